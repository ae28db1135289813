"""Synthetic workloads: a :class:`WorkloadSpec` and a seeded generator.

A :class:`WorkloadSpec` says how many requests arrive, when (burst, Poisson,
bursty gamma or periodic arrivals, in engine steps or seconds), how long their
prompts and outputs are (:mod:`simulator.workload.distributions`), which share a system
prompt (prefix groups) and whether requests form multi-turn conversations.
:func:`generate_workload` turns a spec and a seed into a
:class:`~simulator.workload.requests.Workload`; the same spec and seed always give the
same workload (``numpy.random.default_rng(seed)``, no global state).

Generation order (fixed, so results are reproducible): turns per
conversation, first-turn prompt lengths, output lengths, arrival gaps, prefix
assignment, follow-up user tokens, think times.

Multi-turn model: a conversation's first turn is an ordinary request (it may
start with a shared prefix). Turn ``k+1`` re-sends the whole context of turn
``k`` (its prompt and its generated output) plus ``user_tokens`` new tokens,
so its prompt is ``prompt_k + output_k + user_tokens`` and its ``parent`` is
turn ``k``. A static workload cannot wait for the engine to finish a turn, so
turn ``k+1`` arrives at ``arrival_k + output_k * per_token + think``: with
arrivals in steps ``per_token`` is one step (a turn cannot finish sooner than
one step per output token); in seconds it is ``seconds_per_output_token``.
``think`` is exponential with mean ``think_time`` (arrival units).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

import numpy as np

from simulator.base import unknown_message
from simulator.workload.distributions import (
    MAX_TOKENS,
    Constant,
    LengthDistribution,
    Normal,
    _Base,
    distribution_from_dict,
    parse_distribution,
)
from simulator.workload.requests import MAX_GENERATED_REQUESTS, MAX_REQUESTS, Workload, WorkloadError

#: Most distinct shared prefixes.
MAX_PREFIXES = 10_000
#: Longest time span of arrivals, in steps or seconds (a guard against typos).
MAX_ARRIVAL = 1e12

ArrivalKind = Literal["burst", "poisson", "gamma", "periodic", "piecewise"]
#: Most segments of a piecewise rate (a week of hourly rates is 168).
MAX_SEGMENTS = 10_000


def _num(name: str, v: Any, lo: float, hi: float, *, lo_open: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise WorkloadError(f"must be a number, got {v!r}", field=name)
    rng_txt = f"{'>' if lo_open else '>='} {lo:g} and <= {hi:g}"
    try:
        x = float(v)
    except OverflowError:  # a whole number past a float's range (hundreds of digits)
        raise WorkloadError(f"must be {rng_txt}, got a number of {len(str(v)):,} digits", field=name) from None
    if not math.isfinite(x) or x < lo or (lo_open and x == lo) or x > hi:
        raise WorkloadError(f"must be {rng_txt}, got {v!r}", field=name)
    return x


def _int(name: str, v: Any, lo: int, hi: int) -> int:
    x = _num(name, v, lo, hi)
    if x != int(x):
        raise WorkloadError(f"must be a whole number, got {v!r}", field=name)
    return int(x)


def _check_keys(name: str, data: Any, allowed: set[str]) -> dict:
    if not isinstance(data, dict):
        raise WorkloadError("must be an object", field=name)
    unknown = sorted(set(data) - allowed)
    if unknown:
        where = f"{name}.{unknown[0]}" if name else unknown[0]
        raise WorkloadError(f"{unknown_message(unknown[0], sorted(allowed))}", field=where)
    return data


@dataclass(frozen=True)
class ArrivalProcess:
    """When requests (or conversations) arrive.

    Parameters
    ----------
    kind : {"burst", "poisson", "gamma", "periodic", "piecewise"}
        ``burst``: all at time 0. ``poisson``: exponential gaps with mean
        ``1 / rate``. ``gamma``: gamma gaps with mean ``1 / rate`` and
        coefficient of variation ``cv`` (> 1 bursty, < 1 regular, 1 = Poisson).
        ``periodic``: one every ``interval``, the first at 0. ``piecewise``: a
        Poisson process whose rate changes over time, ``segments[i][0]``
        requests per unit for ``segments[i][1]`` units one after another
        (stages, a day of hourly rates, bursts): the ``n`` requests are spread
        over the segments in proportion to rate x duration, each at a uniform
        time within its segment (a Poisson process given its count).
    rate : float
        Requests per unit (per step or per second), for poisson and gamma.
    cv : float
        Coefficient of variation of the gaps (std / mean), for gamma.
    interval : float
        Units between arrivals, for periodic (0.5 = two per step).
    segments : tuple of (rate, duration) pairs
        For piecewise: requests per unit and units, each rate >= 0, each
        duration > 0, at least one rate > 0.
    unit : {"step", "s"}
        ``step``: arrival times are engine-step indices (the continuous time is
        floored, as the oracle's generator does). ``s``: seconds, rounded to
        the microsecond.

    Poisson and gamma arrivals start after one gap (the first request does not
    arrive at exactly 0).
    """

    kind: ArrivalKind = "burst"
    rate: float = 1.0  # requests per unit
    cv: float = 1.0
    interval: float = 1.0  # units
    unit: Literal["step", "s"] = "step"
    segments: tuple[tuple[float, float], ...] = ()  # (requests per unit, units)

    def __post_init__(self) -> None:
        if self.kind not in ("burst", "poisson", "gamma", "periodic", "piecewise"):
            raise WorkloadError(f"must be burst, poisson, gamma, periodic or piecewise, got {self.kind!r}", field="arrival.kind")
        object.__setattr__(self, "segments", _segments(self.segments, self.kind == "piecewise"))
        if self.unit not in ("step", "s"):
            raise WorkloadError(f"must be 'step' or 's', got {self.unit!r}", field="arrival.unit")
        object.__setattr__(self, "rate", _num("arrival.rate", self.rate, 0, 1e9, lo_open=True))
        object.__setattr__(self, "cv", _num("arrival.cv", self.cv, 0, 100, lo_open=True))
        object.__setattr__(self, "interval", _num("arrival.interval", self.interval, 0, 1e9))

    def times(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Continuous arrival times, shape (n,), non-decreasing, in ``unit``."""
        if self.kind == "burst":
            return np.zeros(n)
        if self.kind == "periodic":
            return np.arange(n, dtype=np.float64) * self.interval
        if self.kind == "piecewise":
            return self._piecewise_times(rng, n)
        if self.kind == "poisson":
            gaps = rng.exponential(1.0 / self.rate, n)
        else:
            shape = 1.0 / self.cv**2
            gaps = rng.gamma(shape, 1.0 / (self.rate * shape), n)
        return np.cumsum(gaps)

    def _piecewise_times(self, rng: np.random.Generator, n: int) -> np.ndarray:
        rates = np.array([r for r, _ in self.segments])
        spans = np.array([d for _, d in self.segments])
        starts = np.concatenate(([0.0], np.cumsum(spans)))[:-1]
        seg = rng.choice(len(spans), size=n, p=rates * spans / (rates * spans).sum())
        return np.sort(starts[seg] + rng.random(n) * spans[seg])

    def expected_requests(self) -> float | None:
        """Requests the piecewise rate gives on average (sum of rate x duration); None for other kinds."""
        return float(sum(r * d for r, d in self.segments)) if self.kind == "piecewise" else None

    def to_dict(self) -> dict[str, Any]:
        """``{"kind", "rate", "cv", "interval", "unit"}`` (all keys, always), plus ``segments`` when piecewise."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "segments"}
        if self.kind == "piecewise":
            out["segments"] = [list(s) for s in self.segments]
        return out

    def to_string(self) -> str:
        """Short form accepted by :func:`parse_arrival` (the unit is separate)."""
        if self.kind == "piecewise":
            return "stages:" + ",".join(f"{r:g}x{d:g}" for r, d in self.segments)
        return {
            "burst": "burst",
            "poisson": f"poisson:{self.rate:g}",
            "gamma": f"gamma:{self.rate:g},{self.cv:g}",
            "periodic": f"every:{self.interval:g}",
        }[self.kind]

    @classmethod
    def from_dict(cls, data: Any) -> ArrivalProcess:
        if isinstance(data, str):
            return parse_arrival(data)
        d = _check_keys("arrival", data, {f.name for f in fields(cls)})
        return cls(**d)


def _segments(raw: Any, needed: bool) -> tuple[tuple[float, float], ...]:
    """The checked (rate, duration) pairs of a piecewise rate; () when not ``needed`` and not given."""
    if not needed:
        if raw:
            raise WorkloadError("only a piecewise arrival takes segments", field="arrival.segments")
        return ()
    if not isinstance(raw, (list, tuple)) or not 1 <= len(raw) <= MAX_SEGMENTS:
        raise WorkloadError(f"give 1 to {MAX_SEGMENTS:,} [rate, duration] pairs", field="arrival.segments")
    out = []
    for i, pair in enumerate(raw):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise WorkloadError(f"expected [rate, duration], got {pair!r}", field=f"arrival.segments[{i}]")
        out.append((_num(f"arrival.segments[{i}] rate", pair[0], 0, 1e9),
                    _num(f"arrival.segments[{i}] duration", pair[1], 0, MAX_ARRIVAL, lo_open=True)))
    if not any(r > 0 for r, _ in out):
        raise WorkloadError("at least one segment needs a rate above 0", field="arrival.segments")
    if sum(d for _, d in out) > MAX_ARRIVAL:
        raise WorkloadError(f"{sum(d for _, d in out):.3g} units in all, above {MAX_ARRIVAL:g}", field="arrival.segments")
    return tuple(out)


def _stages(kind: str, rest: str, text: str) -> list[tuple[float, float]]:
    """``stages:R1xD1,R2xD2,...``, ``hourly:R0,...,R23`` (3600 s each) or ``bursts:BASE,PEAK,LEN,EVERY,TOTAL``."""
    try:
        if kind == "stages":
            pairs = [part.lower().split("x") for part in rest.split(",")]
            if any(len(p) != 2 for p in pairs):
                raise ValueError
            return [(float(r), float(d)) for r, d in pairs]
        nums = [float(x) for x in rest.split(",")]
    except ValueError:
        raise WorkloadError(f"{kind} expects {_STAGE_FORMS[kind]}, got {text!r}", field="arrival") from None
    if kind == "hourly":
        return [(r / 3600.0, 3600.0) for r in nums]
    if len(nums) != 5 or not 0 < nums[2] < nums[3] or nums[4] <= 0:
        raise WorkloadError(f"bursts expects {_STAGE_FORMS[kind]} (0 < LEN < EVERY), got {text!r}", field="arrival")
    base, peak, length, every, total = nums
    full, rest_s = divmod(total, every)
    segments = [(peak, length), (base, every - length)] * int(full)
    if rest_s:
        segments += [(peak, min(length, rest_s))] + ([(base, rest_s - length)] if rest_s > length else [])
    return segments


_STAGE_FORMS = {"stages": "RATExDURATION,... (e.g. stages:5x600,10x600)",
                "hourly": "24 hourly rates in requests per hour (hourly:R0,R1,...)",
                "bursts": "BASE,PEAK,LEN,EVERY,TOTAL (rates per unit, LEN of each burst every EVERY, TOTAL units)"}


def parse_arrival(text: str, unit: str | None = None) -> ArrivalProcess:
    """Parse ``burst``, ``poisson:RATE``, ``gamma:RATE,CV``, ``every:K`` and the rates that change over time:
    ``stages:R1xD1,R2xD2,...`` (rate R1 for D1 units, then R2 for D2 ...), ``hourly:R0,R1,...`` (requests per
    hour, one rate an hour; seconds) and ``bursts:BASE,PEAK,LEN,EVERY,TOTAL`` (BASE, with a PEAK burst of LEN
    units every EVERY units, for TOTAL units).

    Also accepted, as the oracle's generator writes them: ``uniform:K`` (= every
    K) and ``poisson-time:RATE`` (Poisson in seconds). ``unit`` ("step" or
    "s") overrides the default unit ("step", or "s" for poisson-time and hourly).
    """
    if not isinstance(text, str) or not text.strip():
        raise WorkloadError("expected e.g. 'burst', 'poisson:4', 'gamma:4,2' or 'every:2'", field="arrival")
    kind, _, rest = text.strip().partition(":")
    kind = kind.lower()
    if kind in _STAGE_FORMS:
        u = unit or ("s" if kind == "hourly" else "step")
        return ArrivalProcess("piecewise", unit=u, segments=tuple(_stages(kind, rest, text)))
    try:
        args = [float(x) for x in rest.split(",")] if rest.strip() else []
    except ValueError:
        raise WorkloadError(f"arguments must be numbers in {text!r}", field="arrival") from None
    default_unit = "s" if kind == "poisson-time" else "step"
    u = unit or default_unit
    want = {"burst": 0, "poisson": 1, "poisson-time": 1, "gamma": 2, "every": 1, "periodic": 1, "uniform": 1}
    if kind not in want:
        raise WorkloadError(f"unknown process {kind!r} (known: burst, poisson:RATE, gamma:RATE,CV, every:K, "
                            f"stages:RxD,..., hourly:R0,..., bursts:BASE,PEAK,LEN,EVERY,TOTAL)", field="arrival")
    if len(args) != want[kind]:
        raise WorkloadError(f"{kind} takes {want[kind]} number(s), got {len(args)} in {text!r}", field="arrival")
    if kind == "burst":
        return ArrivalProcess("burst", unit=u)
    if kind in ("poisson", "poisson-time"):
        return ArrivalProcess("poisson", rate=args[0], unit=u)
    if kind == "gamma":
        return ArrivalProcess("gamma", rate=args[0], cv=args[1], unit=u)
    return ArrivalProcess("periodic", interval=args[0], unit=u)


@dataclass(frozen=True)
class PrefixGroup:
    """A shared system prompt: ``count`` distinct prefixes of ``length`` tokens.

    A fraction ``fraction`` of requests (exactly ``round(fraction * n)``,
    chosen at random; of conversations when turns are on) starts with one of
    this group's prefixes, picked uniformly.
    """

    length: int = 512  # tokens
    fraction: float = 1.0
    count: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "length", _int("prefixes.length", self.length, 1, MAX_TOKENS))
        object.__setattr__(self, "fraction", _num("prefixes.fraction", self.fraction, 0, 1))
        object.__setattr__(self, "count", _int("prefixes.count", self.count, 1, MAX_PREFIXES))

    def to_dict(self) -> dict[str, Any]:
        return {"length": self.length, "fraction": self.fraction, "count": self.count}

    @classmethod
    def from_dict(cls, data: Any) -> PrefixGroup:
        return cls(**_check_keys("prefixes[]", data, {"length", "fraction", "count"}))


@dataclass(frozen=True)
class TurnSpec:
    """Multi-turn conversations (see the module docstring).

    Parameters
    ----------
    turns : LengthDistribution
        Turns per conversation (>= 1), e.g. ``const:3`` or ``uniform:1,6``.
    user_tokens : LengthDistribution
        New user tokens appended by each follow-up turn, tokens.
    think_time : float
        Mean of the exponential think time between a turn's earliest possible
        end and the next turn's arrival, in arrival units (steps or seconds).
    seconds_per_output_token : float
        Seconds a turn needs per output token before the user can answer,
        used when arrivals are in seconds (default 0.025 s, the oracle's
        default step time). Ignored in step units (one step per token).
    """

    turns: LengthDistribution = field(default_factory=lambda: Constant(3, name="turns.turns"))
    user_tokens: LengthDistribution = field(default_factory=lambda: Normal(128.0, 32.0, name="turns.user_tokens"))
    think_time: float = 10.0
    seconds_per_output_token: float = 0.025

    def __post_init__(self) -> None:
        for name in ("turns", "user_tokens"):
            d = getattr(self, name)
            if not isinstance(d, _Base):
                object.__setattr__(self, name, distribution_from_dict(d, name=f"turns.{name}"))
        if self.turns.max > 100_000:
            object.__setattr__(self, "turns", replace(self.turns, max=100_000))
        object.__setattr__(self, "think_time", _num("turns.think_time", self.think_time, 0, 1e9))
        object.__setattr__(self, "seconds_per_output_token",
                           _num("turns.seconds_per_output_token", self.seconds_per_output_token, 0, 3600))

    def to_dict(self) -> dict[str, Any]:
        return {"turns": self.turns.to_dict(), "user_tokens": self.user_tokens.to_dict(),
                "think_time": self.think_time, "seconds_per_output_token": self.seconds_per_output_token}

    @classmethod
    def from_dict(cls, data: Any) -> TurnSpec:
        d = dict(_check_keys("turns", data, {f.name for f in fields(cls)}))
        for name in ("turns", "user_tokens"):
            if name in d:
                d[name] = distribution_from_dict(d[name], name=f"turns.{name}")
        return cls(**d)


@dataclass(frozen=True)
class WorkloadSpec:
    """Everything that defines a synthetic workload (the seed is separate).

    Parameters
    ----------
    n : int
        Number of requests (all turns counted), 1 to 2,000,000 (:data:`MAX_GENERATED_REQUESTS`).
    prompt : LengthDistribution
        Prompt length in tokens (of first turns), before any shared prefix.
    output : LengthDistribution
        Output length in tokens (every request generates exactly this many).
    arrival : ArrivalProcess
        Arrival times of requests (of conversations when turns are on).
    prefixes : tuple of PrefixGroup
        Shared system prompts; fractions must sum to at most 1.
    prefix_mode : {"prepend", "include"}
        ``prepend``: the prefix is added in front of the sampled prompt (the
        prompt grows by its length). ``include``: the sampled length is the
        total, the prefix replacing its head (at least one unique token is
        kept), as the oracle generator's ``--prefix-mode``.
    turns : TurnSpec or None
        Multi-turn conversations, or None for independent requests.

    ``to_dict()`` gives ``{"n", "prompt", "output", "arrival", "prefixes",
    "prefix_mode", "turns"}`` with distributions as ``{"kind", ...}`` dicts;
    :meth:`from_dict` is its inverse and also takes distribution strings.
    """

    n: int = 200
    prompt: LengthDistribution = field(default_factory=lambda: Normal(512.0, 128.0, name="prompt"))
    output: LengthDistribution = field(default_factory=lambda: Normal(256.0, 64.0, name="output"))
    arrival: ArrivalProcess = field(default_factory=ArrivalProcess)
    prefixes: tuple[PrefixGroup, ...] = ()
    prefix_mode: Literal["prepend", "include"] = "prepend"
    turns: TurnSpec | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", _int("n", self.n, 1, MAX_GENERATED_REQUESTS))
        for name in ("prompt", "output"):
            d = getattr(self, name)
            if not isinstance(d, _Base):
                object.__setattr__(self, name, distribution_from_dict(d, name=name))
        if not isinstance(self.arrival, ArrivalProcess):
            object.__setattr__(self, "arrival", ArrivalProcess.from_dict(self.arrival))
        groups = tuple(g if isinstance(g, PrefixGroup) else PrefixGroup.from_dict(g) for g in self.prefixes)
        object.__setattr__(self, "prefixes", groups)
        if sum(g.fraction for g in groups) > 1 + 1e-9:
            raise WorkloadError("the fractions of all prefix groups must add up to at most 1", field="prefixes.fraction")
        if sum(g.count for g in groups) > MAX_PREFIXES:
            raise WorkloadError(f"at most {MAX_PREFIXES:,} shared prefixes in all", field="prefixes.count")
        if self.prefix_mode not in ("prepend", "include"):
            raise WorkloadError(f"must be 'prepend' or 'include', got {self.prefix_mode!r}", field="prefix_mode")
        if self.turns is not None and not isinstance(self.turns, TurnSpec):
            object.__setattr__(self, "turns", TurnSpec.from_dict(self.turns))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (see the class docstring)."""
        return {
            "n": self.n,
            "prompt": self.prompt.to_dict(),
            "output": self.output.to_dict(),
            "arrival": self.arrival.to_dict(),
            "prefixes": [g.to_dict() for g in self.prefixes],
            "prefix_mode": self.prefix_mode,
            "turns": None if self.turns is None else self.turns.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Any) -> WorkloadSpec:
        """Inverse of :meth:`to_dict`; unknown keys raise :class:`WorkloadError`."""
        d = dict(_check_keys("", data, {f.name for f in fields(cls)}))
        for name in ("prompt", "output"):
            if name in d:
                d[name] = distribution_from_dict(d[name], name=name)
        if "arrival" in d:
            d["arrival"] = ArrivalProcess.from_dict(d["arrival"])
        if "prefixes" in d:
            if not isinstance(d["prefixes"], (list, tuple)):
                raise WorkloadError("must be a list of {length, fraction, count}", field="prefixes")
            d["prefixes"] = tuple(PrefixGroup.from_dict(g) for g in d["prefixes"])
        if d.get("turns") is not None:
            d["turns"] = TurnSpec.from_dict(d["turns"])
        return cls(**d)


def _assign_prefixes(rng: np.random.Generator, groups: tuple[PrefixGroup, ...], m: int):
    """Prefix id per item (shape (m,), -1 = none) and the prefix length table."""
    prefix_len = np.repeat([g.length for g in groups], [g.count for g in groups]).astype(np.int64)
    pid = np.full(m, -1, np.int64)
    if not groups:
        return pid, prefix_len
    order = rng.permutation(m)
    start, offset = 0, 0
    for g in groups:
        k = min(int(round(g.fraction * m)), m - start)
        chosen = order[start:start + k]
        pid[chosen] = offset + rng.integers(0, g.count, k)
        start += k
        offset += g.count
    return pid, prefix_len


def _segment_cumsum(values: np.ndarray, starts: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Cumulative sum restarting at each segment start (``seg`` = segment index)."""
    cs = np.cumsum(values)
    base = np.concatenate([[0], cs])[starts]  # sum before each segment
    return cs - base[seg]


def generate_workload(spec: WorkloadSpec, seed: int = 0) -> Workload:
    """Draw a workload from ``spec`` with ``numpy.random.default_rng(seed)``.

    Parameters
    ----------
    spec : WorkloadSpec
    seed : int
        Non-negative seed; the same spec and seed give the same workload.

    Returns
    -------
    Workload
        Requests in arrival order (ties: conversation, then turn order), with
        ``prefix_id``/``prefix_len`` for shared prefixes (named ``p0``,
        ``p1``, ...) and ``parent`` for follow-up turns. Ids are ``"0"``,
        ``"1"``, ... or ``"c<conversation>t<turn>"`` with turns.

    Raises
    ------
    WorkloadError
        A prompt would exceed 10,000,000 tokens (long prefixes or very long
        conversations) or arrivals would exceed 1e12 units.
    """
    if not isinstance(spec, WorkloadSpec):
        raise WorkloadError("expected a WorkloadSpec", field="spec")
    seed = _int("seed", seed, 0, 2**63 - 1)
    rng = np.random.default_rng(seed)
    n = spec.n
    unit = spec.arrival.unit

    # 1. conversation structure (conversation-major order)
    if spec.turns is not None:
        counts = spec.turns.turns.sample(rng, n)  # each >= 1, so their sum reaches n
        total = np.cumsum(counts)
        c = int(np.searchsorted(total, n)) + 1
        counts = counts[:c].copy()
        counts[-1] -= int(total[c - 1] - n)
    else:
        c, counts = n, np.ones(n, np.int64)
    conv = np.repeat(np.arange(c), counts)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    turn = np.arange(n) - starts[conv]

    # 2-5. lengths, arrivals, prefixes
    first_prompt = spec.prompt.sample(rng, c)
    output = spec.output.sample(rng, n)
    conv_start = spec.arrival.times(rng, c)
    pid_conv, prefix_len = _assign_prefixes(rng, spec.prefixes, c)
    if prefix_len.size:
        plen = np.where(pid_conv >= 0, prefix_len[np.maximum(pid_conv, 0)], 0)
        if spec.prefix_mode == "prepend":
            first_prompt = first_prompt + plen
        else:
            first_prompt = np.where(pid_conv >= 0, np.maximum(first_prompt, plen + 1), first_prompt)

    # 6-7. follow-up turns: prompt and arrival grow along the conversation
    prompt = first_prompt[conv].astype(np.int64)
    arrival = conv_start[conv].astype(np.float64)
    parent = np.full(n, -1, np.int64)
    if spec.turns is not None:
        user = spec.turns.user_tokens.sample(rng, n)
        mean_think = spec.turns.think_time
        think = rng.exponential(mean_think, n) if mean_think > 0 else np.zeros(n)
        follow = turn > 0
        prev = np.maximum(np.arange(n) - 1, 0)
        per_token = 1.0 if unit == "step" else spec.turns.seconds_per_output_token
        inc = np.where(follow, output[prev] + user, prompt)
        prompt = _segment_cumsum(inc, starts, conv)
        gap = np.where(follow, output[prev] * per_token + think, arrival)
        arrival = _segment_cumsum(gap, starts, conv)
        parent = np.where(follow, np.arange(n) - 1, -1)
    if prompt.max() > MAX_TOKENS:
        what = "conversation context" if spec.turns is not None else "prompt with its shared prefix"
        raise WorkloadError(f"a {what} reaches {int(prompt.max()):,} tokens, above the {MAX_TOKENS:,}-token limit", field="prompt")
    if arrival.max() > MAX_ARRIVAL:
        raise WorkloadError(f"arrivals reach {arrival.max():.3g} {unit}, above the {MAX_ARRIVAL:g} limit", field="arrival")
    arrival = np.floor(arrival) if unit == "step" else np.round(arrival, 6)

    pid = np.where(turn == 0, pid_conv[conv], -1)
    if spec.turns is None:
        ids = None
        order = np.arange(n)
    else:
        ids = np.array([f"c{a}t{b}" for a, b in zip(conv.tolist(), turn.tolist())], dtype=object)
        order = np.argsort(arrival, kind="stable")
        inverse = np.empty(n, np.int64)
        inverse[order] = np.arange(n)
        parent = np.where(parent >= 0, inverse[np.maximum(parent, 0)], -1)[order]
        ids = tuple(ids[order].tolist())
    return Workload(
        prompt_len=prompt[order],
        output_len=output[order],
        arrival=arrival[order],
        arrival_unit=unit,
        prefix_id=pid[order],
        prefix_len=prefix_len,
        parent=parent if spec.turns is not None else None,
        ids=ids,
        prefix_names=tuple(f"p{i}" for i in range(prefix_len.size)),
    )


__all__ = [
    "MAX_GENERATED_REQUESTS", "MAX_REQUESTS", "ArrivalProcess", "parse_arrival", "PrefixGroup", "TurnSpec", "WorkloadSpec",
    "generate_workload", "parse_distribution",
]
