"""How stable a search's verdict is across traffic seeds.

A search judges each deployment on one draw of its traffic (one seed of the Poisson arrivals and the length
distributions). An answer near its target can flip on another draw: :func:`check_seeds` simulates the answer,
and the same shape with one replica fewer, on other seeds of the same traffic and says on how many each meets
the SLO:

>>> check = check_seeds(result, lambda seed: generate_workload(spec, seed=seed), model, space, slo,
...                      seeds=other_seeds(0))  # doctest: +SKIP
>>> check.words()  # doctest: +SKIP
'on 3 more traffic seeds (1, 2, 3): meets on 3 of 3 (ITL p90 37.2-39.1 ms against 40 ms); 4 replicas miss on 3 of 3'

The answer is *stable* when it meets on every seed and one replica fewer (if any) misses on every seed; a
verdict that flips is said in words (``marginal``: consider one replica more; or ``one replica fewer meets on
2 of 3``: the answer may be one replica more than the traffic needs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from simulator.base import ModelSpec, figure
from simulator.search.deployments import SearchResult, _Run
from simulator.search.evaluate import default_max_model_len, prepare_candidate
from simulator.search.space import SearchError, SearchSpace, Slo
from simulator.workload import Workload

#: Draws tried when the caller names none: the three seeds after the search's own (:func:`other_seeds`).
DEFAULT_SEED_COUNT = 3
#: Most seeds one check may try (each costs two simulations of the answer's size).
MAX_SEEDS = 10


@dataclass(frozen=True)
class SeedCheck:
    """The answer (``replicas`` of its shape) and one replica fewer, simulated on each of ``seeds``."""

    seeds: tuple[int, ...]
    replicas: int
    meets: tuple[bool, ...]
    values: dict[str, tuple[float | None, ...]]  # s: each target's figure on each seed
    targets: dict[str, float]  # s: each target's limit
    fewer_meets: tuple[bool, ...] | None  # None: the answer is one replica

    @property
    def stable(self) -> bool:
        """Meets on every seed, and one replica fewer misses on every seed."""
        return all(self.meets) and not any(self.fewer_meets or ())

    def words(self) -> str:
        n = len(self.seeds)
        ranges = "; ".join(_range_words(label, vals, self.targets[label]) for label, vals in self.values.items())
        met = sum(self.meets)
        out = (f"on {n} more traffic seed{'s' if n > 1 else ''} ({', '.join(str(s) for s in self.seeds)}): "
               f"meets on {met} of {n}" + (f" ({ranges})" if ranges else ""))
        if met < n:
            out += ": marginal, consider one replica more"
        if self.fewer_meets is not None:
            fewer, k = self.replicas - 1, sum(self.fewer_meets)
            reps = f"{fewer} replica{'s' if fewer > 1 else ''}"
            one = fewer == 1  # "1 replica misses", "2 replicas miss"
            out += (f"; {reps} {'misses' if one else 'miss'} on {n} of {n}" if k == 0 else
                    f"; {reps} {'meets' if one else 'meet'} on {k} of {n}: the answer may be one replica more than "
                    "the traffic needs")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"seeds": list(self.seeds), "replicas": self.replicas, "meets": list(self.meets),
                "values": {k: list(v) for k, v in self.values.items()}, "targets": dict(self.targets),
                "fewer_meets": None if self.fewer_meets is None else list(self.fewer_meets),
                "stable": self.stable, "words": self.words()}


def seed_count(value: Any, field: str = "check_seeds") -> int:
    """How many other seeds to check (every door's range check: the command line's ``--check-seeds``, the
    planner's ``check_seeds``): a whole number from 0 (no check) to :data:`MAX_SEEDS`, else :class:`SearchError`
    naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEEDS:
        raise SearchError(f"a whole number of seeds from 0 to {MAX_SEEDS} (0: not checked), got {value!r}", field=field)
    return value


def seed_check_words(check: SeedCheck | dict | None, *, asked: int, one_draw: str | None = None) -> str | None:
    """The seed check in words, or why there is none: ``not checked (a workload file is one draw)`` (``one_draw``:
    what the traffic is when nothing can be re-drawn), ``not checked (no answer)``; None when none was asked
    (``asked`` 0)."""
    if check is not None:
        return check["words"] if isinstance(check, dict) else check.words()
    if asked == 0:
        return None
    return f"not checked ({one_draw} is one draw)" if one_draw else "not checked (no answer)"


def other_seeds(seed: int, count: int = DEFAULT_SEED_COUNT) -> tuple[int, ...]:
    """The ``count`` seeds after ``seed``: draws other than the one the search judged."""
    return tuple(seed + k for k in range(1, count + 1))


def _range_words(label: str, values: tuple[float | None, ...], target_s: float) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return f"{label} not produced"
    lo, hi = min(known) * 1000, max(known) * 1000
    span = f"{figure(lo)} ms" if figure(lo) == figure(hi) else f"{figure(lo)}-{figure(hi)} ms"
    return f"{label} {span} against {figure(target_s * 1000)} ms"


def check_seeds(result: SearchResult, make_workload: Callable[[int], Workload], model: ModelSpec,
                space: SearchSpace, slo: Slo, seeds: Sequence[int]) -> SeedCheck | None:
    """The answer of ``result`` and one replica fewer on the traffic of each seed (``make_workload(seed)``);
    None when there is no answer. Each trial is the full simulation (no screening)."""
    best = result.best
    if best is None:
        return None
    seeds = tuple(int(s) for s in seeds)
    if not seeds or len(seeds) > MAX_SEEDS or len(set(seeds)) != len(seeds):
        raise SearchError(f"give 1 to {MAX_SEEDS} different seeds, got {list(seeds)}", field="seeds")
    cand = space.candidates()[best.index]
    meets, fewer, values = [], [], {tg.label: [] for tg in slo.targets}
    for seed in seeds:
        wl = make_workload(seed)
        mml = space.max_model_len or max(int(best.sizing.get("max_model_len") or 0),
                                         default_max_model_len(wl, model))
        prepared = prepare_candidate(best.index, cand, model, space, mml, wl, slo)
        if prepared.config is None:  # this draw's longest request changed the shape's sizing past fitting
            meets.append(False)
            fewer.append(False)
            for label in values:
                values[label].append(None)
            continue
        run = _Run(wl, slo, space, None, None)
        trial = run.trial(prepared, best.replicas)
        meets.append(trial.meets)
        for label in values:
            values[label].append(trial.values.get(label))
        if best.replicas > 1:
            fewer.append(run.trial(prepared, best.replicas - 1).meets)
    return SeedCheck(seeds, best.replicas, tuple(meets), {k: tuple(v) for k, v in values.items()},
                     {tg.label: tg.max_s for tg in slo.targets}, tuple(fewer) if best.replicas > 1 else None)


__all__ = ["DEFAULT_SEED_COUNT", "MAX_SEEDS", "SeedCheck", "check_seeds", "other_seeds", "seed_check_words",
           "seed_count"]
