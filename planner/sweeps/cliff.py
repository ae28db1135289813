"""Find the cliff: bracket the knee of a monotone metric by batched k-section.

The cliff is where a metric (preemptions per request, TTFT p99) crosses a
limit: for KV blocks and utilization, values *below* the cliff are bad; for
the request rate, values *above* it are. Each round evaluates ``per_round``
points inside the current bracket in one batch (one batched simulation), so
the bracket shrinks by ``per_round + 1`` per round: about
``2 + per_round x log_{per_round+1}(range / resolution)`` simulations instead
of ``range / resolution + 1`` for a grid at the same resolution.

The limit is ``threshold`` as given for preemptions per request, and
``threshold x`` the value at the good end of the range for TTFT p99 (a
relative jump: "TTFT p99 doubles").

Pure: ``evaluate(xs) -> metric values`` is supplied by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

PER_ROUND = 3


@dataclass
class CliffResult:
    """Outcome of :func:`find_cliff`.

    ``cliff`` is the last good value found next to the bad side (``None`` when
    the range holds no crossing); ``bad`` the nearest bad value; ``status`` one of
    ``found``, ``all_good`` (no cliff in range: even the bad end is fine) and
    ``all_bad`` (even the good end is past the limit).
    """

    status: str
    cliff: float | None
    bad: float | None
    limit: float
    resolution: float
    evaluations: int
    rounds: int
    history: list[tuple[float, float]] = field(default_factory=list)  # (x, metric), in evaluation order

    def to_dict(self) -> dict:
        d = asdict(self)
        d["history"] = [list(h) for h in self.history]
        return d


def max_evaluations(lo: float, hi: float, resolution: float, per_round: int = PER_ROUND) -> int:
    """Upper bound on simulations :func:`find_cliff` runs (ends + rounds, one spare round)."""
    span = max(hi - lo, resolution)
    rounds = max(0, math.ceil(math.log(span / resolution, per_round + 1))) + 1
    return 2 + per_round * rounds


def find_cliff(evaluate: Callable[[Sequence[float]], Sequence[float]], *, lo: float, hi: float,
               resolution: float, threshold: float, relative: bool = False, bad_below: bool = True,
               integer: bool = False, per_round: int = PER_ROUND) -> CliffResult:
    """Bracket the crossing of ``metric <= limit`` to within ``resolution``.

    Parameters
    ----------
    evaluate
        Maps a list of x values to their metric values (one batch).
    lo, hi
        The range searched.
    resolution
        Stop when the bracket ``|good - bad| <= resolution`` (same unit as x).
    threshold
        Absolute limit, or a factor on the good end's value when ``relative``.
    bad_below
        True when small x is bad (KV blocks, utilization); False for the rate.
    integer
        Round probe points to whole numbers (KV blocks).
    """
    history: list[tuple[float, float]] = []

    def run(xs: list[float]) -> list[float]:
        vals = [float(v) for v in evaluate(xs)]
        history.extend(zip(xs, vals))
        return vals

    good_end, bad_end = (hi, lo) if bad_below else (lo, hi)
    v_good, v_bad = run([good_end, bad_end])
    limit = threshold * max(v_good, 1.0) if relative else threshold
    rounds = 0
    if v_good > limit:
        return CliffResult("all_bad", None, good_end, limit, resolution, len(history), rounds, history)
    if v_bad <= limit:
        return CliffResult("all_good", None, None, limit, resolution, len(history), rounds, history)
    good, bad = good_end, bad_end
    while abs(good - bad) > resolution:
        a, b = min(good, bad), max(good, bad)
        xs = [a + (b - a) * (i + 1) / (per_round + 1) for i in range(per_round)]
        if integer:
            xs = sorted({int(round(x)) for x in xs} - {int(a), int(b)})
            xs = [x for x in xs if a < x < b]
        if not xs:
            break
        rounds += 1
        vals = run(xs)
        ok = [v <= limit for v in vals]
        # Walk from the bad side to the first good probe; the bracket is its neighbourhood.
        order = list(range(len(xs))) if bad_below else list(range(len(xs)))[::-1]
        new_bad, new_good = bad, good
        for i in order:
            if ok[i]:
                new_good = xs[i]
                break
            new_bad = xs[i]
        good, bad = new_good, new_bad
    return CliffResult("found", float(good), float(bad), limit, resolution, len(history), rounds, history)


def grid_knee(xs: Sequence[float], values: Sequence[float], limit: float, *, bad_below: bool = True) -> float | None:
    """The knee of a grid: the good point nearest the bad side (for tests and figures)."""
    pairs = sorted(zip(xs, values), reverse=not bad_below)
    # bad_below: scan from large x down; the knee is the smallest x with all larger x good.
    seq = pairs[::-1]
    knee = None
    for x, v in seq:
        if v <= limit:
            knee = x
        else:
            break
    return knee
