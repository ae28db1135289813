"""Length distributions: how many tokens a prompt or an output has.

Each distribution is a frozen dataclass that validates on construction and
draws integer token counts with ``sample(rng, n)``: real-valued draws are
rounded to the nearest integer, then clipped to ``[min, max]`` tokens.

Distributions are written as short strings (the command line, the web form)
or as dicts (``to_dict`` / :func:`distribution_from_dict`, what the app
stores). The string grammar is ``KIND:ARG,ARG,...`` with optional
``min=``/``max=`` items at the end, for example::

    const:256                       every request has 256 tokens
    uniform:10,100                  integers uniform on [10, 100]
    normal:512,128                  N(mean=512, std=128), rounded, clipped
    lognormal:512,256               log-normal with arithmetic mean 512, std 256
    lognormal-mu:6.0,0.5            log-normal with log-space mu=6.0, sigma=0.5
    paretolognormal:1.5,100,5.2,0.7,0.35
                                    Pareto/log-normal mixture (see below)
    empirical:lengths.txt           resample the numbers in a file
    normal:512,128,min=16,max=2048  explicit clipping bounds

ParetoLogNormal is BLIS's heavy-tailed mixture (``pareto_lognormal`` in BLIS's
workload specs, after ServeGen): with probability ``mix_weight`` a draw comes
from a Pareto distribution with shape ``alpha`` and scale (minimum) ``xm``
tokens, ``X = xm / U ** (1 / alpha)`` with ``U`` uniform on (0, 1]; otherwise
from a log-normal ``exp(mu + sigma * Z)`` with ``Z`` standard normal. BLIS's
heavy-tail experiment uses ``alpha=1.5, xm=100, mu=5.2, sigma=0.7,
mix_weight=0.35`` (mean about 255 tokens, median about 170, infinite
variance before clipping); those are the defaults here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from simulator.base import unknown_message
from simulator.workload.requests import MAX_TOKENS, WorkloadError

#: Largest number of values an empirical distribution may hold.
MAX_EMPIRICAL_VALUES = 10_000_000


def _number(name: str, value: Any, *, lo: float | None = None, hi: float | None = None,
            lo_open: bool = False) -> float:
    """Validate a finite real number in a range; raise WorkloadError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise WorkloadError(f"must be a number, got {value!r}", field=name)
    v = float(value)
    if not math.isfinite(v):
        raise WorkloadError(f"must be finite, got {value!r}", field=name)
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise WorkloadError(f"must be {'>' if lo_open else '>='} {lo:g}, got {v:g}", field=name)
    if hi is not None and v > hi:
        raise WorkloadError(f"must be <= {hi:g}, got {v:g}", field=name)
    return v


def _whole(name: str, value: Any, lo: int, hi: int) -> int:
    """Validate a whole number in ``[lo, hi]``."""
    v = _number(name, value)
    if v != round(v):
        raise WorkloadError(f"must be a whole number, got {value!r}", field=name)
    if not lo <= v <= hi:
        raise WorkloadError(f"must be between {lo:,} and {hi:,}, got {int(v):,}", field=name)
    return int(v)


@dataclass(frozen=True)
class _Base:
    """Common clipping bounds and sampling wrapper.

    Subclasses implement ``_draw(rng, n) -> float array``; ``sample`` rounds
    and clips it.
    """

    kind: ClassVar[str] = ""
    #: Field name prefix used in error messages (set by the owner, e.g. "prompt").
    name: str = field(default="length", repr=False, compare=False, kw_only=True)
    min: int = field(default=1, kw_only=True)  # tokens
    max: int = field(default=MAX_TOKENS, kw_only=True)  # tokens

    def __post_init__(self) -> None:
        lo = _whole(f"{self.name}.min", self.min, 1, MAX_TOKENS)
        hi = _whole(f"{self.name}.max", self.max, 1, MAX_TOKENS)
        if lo > hi:
            raise WorkloadError(f"{lo:,} is above max {hi:,}", field=f"{self.name}.min")
        object.__setattr__(self, "min", lo)
        object.__setattr__(self, "max", hi)
        self._validate()

    def _validate(self) -> None:  # pragma: no cover - overridden
        pass

    def _set(self, attr: str, value: Any) -> None:
        object.__setattr__(self, attr, value)

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` token counts.

        Parameters
        ----------
        rng : numpy.random.Generator
        n : int
            Number of draws.

        Returns
        -------
        ndarray of int64, shape (n,)
            Tokens, rounded to the nearest integer and clipped to [min, max].
        """
        x = np.asarray(self._draw(rng, int(n)), dtype=np.float64)
        x = np.nan_to_num(x, nan=float(self.max), posinf=float(self.max), neginf=float(self.min))
        return np.clip(np.rint(x), self.min, self.max).astype(np.int64)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``{"kind": ..., <parameters>, "min": ..., "max": ...}``."""
        d = {"kind": self.kind}
        d.update({f.name: getattr(self, f.name) for f in fields(self) if f.name != "name"})
        return d

    def to_string(self) -> str:
        """The short string form (inverse of :func:`parse_distribution`)."""
        params = [f for f in fields(self) if f.name not in ("name", "min", "max")]
        args = ",".join(_fmt(getattr(self, f.name)) for f in params)
        bounds = []
        if self.min != 1:
            bounds.append(f"min={self.min}")
        if self.max != MAX_TOKENS:
            bounds.append(f"max={self.max}")
        return f"{self.kind}:" + ",".join(x for x in [args, *bounds] if x)


def _fmt(v: Any) -> str:
    if isinstance(v, float) and v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return str(v)


@dataclass(frozen=True)
class Constant(_Base):
    """Every draw is ``value`` tokens."""

    kind: ClassVar[str] = "const"
    value: int = 256  # tokens

    def _validate(self) -> None:
        self._set("value", _whole(f"{self.name}.value", self.value, 1, MAX_TOKENS))

    def _draw(self, rng, n):
        return np.full(n, float(self.value))


@dataclass(frozen=True)
class Uniform(_Base):
    """Integers uniform on ``[low, high]`` tokens, both ends included."""

    kind: ClassVar[str] = "uniform"
    low: int = 1  # tokens
    high: int = 512  # tokens

    def _validate(self) -> None:
        self._set("low", _whole(f"{self.name}.low", self.low, 1, MAX_TOKENS))
        self._set("high", _whole(f"{self.name}.high", self.high, 1, MAX_TOKENS))
        if self.low > self.high:
            raise WorkloadError(f"{self.low:,} is above high {self.high:,}", field=f"{self.name}.low")

    def _draw(self, rng, n):
        return rng.integers(self.low, self.high + 1, n).astype(np.float64)


@dataclass(frozen=True)
class Normal(_Base):
    """Gaussian with ``mean`` and ``std`` tokens, rounded then clipped."""

    kind: ClassVar[str] = "normal"
    mean: float = 512.0  # tokens
    std: float = 128.0  # tokens

    def _validate(self) -> None:
        self._set("mean", _number(f"{self.name}.mean", self.mean, lo=0, hi=MAX_TOKENS))
        self._set("std", _number(f"{self.name}.std", self.std, lo=0, hi=MAX_TOKENS))

    def _draw(self, rng, n):
        return rng.normal(self.mean, self.std, n)


@dataclass(frozen=True)
class LogNormal(_Base):
    """Log-normal given by its arithmetic ``mean`` and ``std`` in tokens.

    The underlying normal has ``sigma**2 = log(1 + (std/mean)**2)`` and
    ``mu = log(mean) - sigma**2 / 2``.
    """

    kind: ClassVar[str] = "lognormal"
    mean: float = 512.0  # tokens
    std: float = 256.0  # tokens

    def _validate(self) -> None:
        self._set("mean", _number(f"{self.name}.mean", self.mean, lo=0, lo_open=True, hi=MAX_TOKENS))
        self._set("std", _number(f"{self.name}.std", self.std, lo=0, hi=MAX_TOKENS))

    @property
    def mu_sigma(self) -> tuple[float, float]:
        """``(mu, sigma)`` of the underlying normal (log-tokens)."""
        s2 = math.log1p((self.std / self.mean) ** 2)
        return math.log(self.mean) - s2 / 2, math.sqrt(s2)

    def _draw(self, rng, n):
        mu, sigma = self.mu_sigma
        return rng.lognormal(mu, sigma, n)


@dataclass(frozen=True)
class LogNormalMu(_Base):
    """Log-normal given by the underlying normal's ``mu`` and ``sigma`` (log-tokens)."""

    kind: ClassVar[str] = "lognormal-mu"
    mu: float = 6.0  # log-tokens
    sigma: float = 0.5  # log-tokens

    def _validate(self) -> None:
        self._set("mu", _number(f"{self.name}.mu", self.mu, lo=-50, hi=math.log(MAX_TOKENS)))
        self._set("sigma", _number(f"{self.name}.sigma", self.sigma, lo=0, hi=20))

    def _draw(self, rng, n):
        return rng.lognormal(self.mu, self.sigma, n)


@dataclass(frozen=True)
class ParetoLogNormal(_Base):
    """BLIS's Pareto / log-normal mixture (see the module docstring).

    Parameters
    ----------
    alpha : float
        Pareto shape (> 0); below 2 the Pareto part has infinite variance.
    xm : float
        Pareto scale = its smallest value, tokens (> 0).
    mu, sigma : float
        Log-normal part: mean and std of ``log(tokens)``.
    mix_weight : float
        Probability that a draw comes from the Pareto part, in [0, 1].
    """

    kind: ClassVar[str] = "paretolognormal"
    alpha: float = 1.5
    xm: float = 100.0  # tokens
    mu: float = 5.2  # log-tokens
    sigma: float = 0.7  # log-tokens
    mix_weight: float = 0.35

    def _validate(self) -> None:
        self._set("alpha", _number(f"{self.name}.alpha", self.alpha, lo=0, lo_open=True, hi=1000))
        self._set("xm", _number(f"{self.name}.xm", self.xm, lo=0, lo_open=True, hi=MAX_TOKENS))
        self._set("mu", _number(f"{self.name}.mu", self.mu, lo=-50, hi=math.log(MAX_TOKENS)))
        self._set("sigma", _number(f"{self.name}.sigma", self.sigma, lo=0, hi=20))
        self._set("mix_weight", _number(f"{self.name}.mix_weight", self.mix_weight, lo=0, hi=1))

    def _draw(self, rng, n):
        pick_pareto = rng.random(n) < self.mix_weight
        u = 1.0 - rng.random(n)  # uniform on (0, 1]
        with np.errstate(over="ignore"):
            pareto = self.xm / u ** (1.0 / self.alpha)
        logn = rng.lognormal(self.mu, self.sigma, n)
        return np.where(pick_pareto, pareto, logn)


@dataclass(frozen=True)
class Empirical(_Base):
    """Resample (with replacement, equal weights) a list of observed lengths.

    Parameters
    ----------
    values : tuple of int
        Observed token counts (each >= 1). Built from a file with
        :meth:`from_file`; ``source`` records where they came from.
    source : str
        Description of the origin (a file name), for display and ``to_string``.
    """

    kind: ClassVar[str] = "empirical"
    values: tuple = ()
    source: str = ""

    def _validate(self) -> None:
        vals = self.values
        if isinstance(vals, np.ndarray):
            vals = vals.reshape(-1).tolist()
        if isinstance(vals, (str, bytes)) or not hasattr(vals, "__len__"):
            raise WorkloadError("must be a list of token counts", field=f"{self.name}.values")
        if len(vals) == 0:
            raise WorkloadError("needs at least one value", field=f"{self.name}.values")
        if len(vals) > MAX_EMPIRICAL_VALUES:
            raise WorkloadError(f"at most {MAX_EMPIRICAL_VALUES:,} values", field=f"{self.name}.values")
        arr = np.asarray(vals)
        if arr.dtype.kind not in "iuf":
            raise WorkloadError("must all be numbers", field=f"{self.name}.values")
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)) or np.any(arr != np.rint(arr)):
            raise WorkloadError("must all be whole numbers", field=f"{self.name}.values")
        if arr.min() < 1 or arr.max() > MAX_TOKENS:
            raise WorkloadError(f"must all be between 1 and {MAX_TOKENS:,}", field=f"{self.name}.values")
        self._set("values", tuple(int(v) for v in arr))
        self._set("source", str(self.source))

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> Empirical:
        """Read whitespace- or comma-separated token counts from a text file.

        Lines starting with ``#`` are comments. The error names the line of
        the first value that is not a whole number.
        """
        name = kwargs.get("name", "length")
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as exc:
            raise WorkloadError(f"cannot read empirical file {str(p)!r}: {exc.strerror or exc}", field=name) from None
        values: list[int] = []
        for lineno, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0]
            for tok in line.replace(",", " ").split():
                try:
                    v = float(tok)
                except ValueError:
                    v = float("nan")
                if not math.isfinite(v) or v != round(v) or v < 1:
                    raise WorkloadError(
                        f"{p.name} line {lineno}: {tok!r} is not a token count (a whole number >= 1)"
                    , field=name)
                values.append(int(v))
        return cls(values=tuple(values), source=str(p), **kwargs)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "values": list(self.values), "source": self.source,
                "min": self.min, "max": self.max}

    def to_string(self) -> str:
        return f"empirical:{self.source}" if self.source else "empirical:<inline>"

    def _draw(self, rng, n):
        vals = np.asarray(self.values, dtype=np.float64)
        return vals[rng.integers(0, vals.size, n)]


LengthDistribution = Constant | Uniform | Normal | LogNormal | LogNormalMu | ParetoLogNormal | Empirical

#: kind -> class, with accepted aliases.
KINDS: dict[str, type] = {
    "const": Constant, "constant": Constant,
    "uniform": Uniform,
    "normal": Normal, "gaussian": Normal,
    "lognormal": LogNormal,
    "lognormal-mu": LogNormalMu, "lognormal_mu": LogNormalMu,
    "paretolognormal": ParetoLogNormal, "pareto_lognormal": ParetoLogNormal,
    "empirical": Empirical,
}


def parse_distribution(text: str, *, name: str = "length", min: int | None = None,
                       max: int | None = None) -> LengthDistribution:
    """Parse ``KIND:ARGS[,min=N][,max=N]`` (see the module docstring).

    Parameters
    ----------
    text : str
        The distribution string.
    name : str
        Field name for error messages (e.g. ``"prompt"``).
    min, max : int, optional
        Clipping bounds in tokens, used where the string gives none.

    Raises
    ------
    WorkloadError
        Unknown kind, wrong number of arguments, or an impossible value.
    """
    if not isinstance(text, str) or not text.strip():
        raise WorkloadError("expected a distribution such as 'normal:512,128'", field=name)
    kind, _, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    cls = KINDS.get(kind)
    if cls is None:
        raise WorkloadError(
            f"unknown distribution {kind!r} (known: const, uniform, normal, lognormal, "
            "lognormal-mu, paretolognormal, empirical)"
        , field=name)
    bounds: dict[str, int] = {}
    if min is not None:
        bounds["min"] = min
    if max is not None:
        bounds["max"] = max
    if cls is Empirical:
        path = rest.strip()
        if not path:
            raise WorkloadError("empirical needs a file, e.g. 'empirical:lengths.txt'", field=name)
        return Empirical.from_file(path, name=name, **bounds)
    args: list[float] = []
    for item in (s.strip() for s in rest.split(",")) if rest.strip() else ():
        key, eq, val = item.partition("=")
        try:
            num = float(val if eq else item)
        except ValueError:
            raise WorkloadError(f"{item!r} is not a number in {text!r}", field=name) from None
        if eq:
            if key.strip() not in ("min", "max"):
                raise WorkloadError(f"unknown option {key.strip()!r} in {text!r} (only min=, max=)", field=name)
            bounds[key.strip()] = num  # validated as whole numbers by the class
        else:
            args.append(num)
    params = [f.name for f in fields(cls) if f.name not in ("name", "min", "max")]
    if cls is ParetoLogNormal and not args:
        pass  # BLIS defaults
    elif len(args) != len(params):
        raise WorkloadError(
            f"{kind} takes {len(params)} argument(s) ({', '.join(params)}), got {len(args)} in {text!r}"
        , field=name)
    return cls(**dict(zip(params, args)), name=name, **bounds)


def distribution_from_dict(data: Any, *, name: str = "length") -> LengthDistribution:
    """Build from ``to_dict()`` output (or a string, passed to :func:`parse_distribution`)."""
    if isinstance(data, str):
        return parse_distribution(data, name=name)
    if isinstance(data, _Base):
        return data
    if not isinstance(data, dict):
        raise WorkloadError("must be an object with a 'kind' or a string like 'normal:512,128'", field=name)
    kind = str(data.get("kind", "")).lower()
    cls = KINDS.get(kind)
    if cls is None:
        raise WorkloadError(f"unknown distribution {data.get('kind')!r}", field=f"{name}.kind")
    allowed = {f.name for f in fields(cls)} - {"name"}
    unknown = sorted(set(data) - allowed - {"kind"})
    if unknown:
        raise WorkloadError(f"{unknown_message(unknown[0], sorted(allowed), what='field for ' + cls.kind)}", field=f"{name}.{unknown[0]}")
    kwargs = {k: v for k, v in data.items() if k != "kind"}
    if cls is Empirical and "values" in kwargs:
        kwargs["values"] = tuple(kwargs["values"]) if isinstance(kwargs["values"], list) else kwargs["values"]
    return cls(**kwargs, name=name)


def describe(dist: LengthDistribution) -> dict[str, float]:
    """Analytic mean of the unclipped distribution in tokens, where known (for display)."""
    if isinstance(dist, Constant):
        return {"mean": float(dist.value)}
    if isinstance(dist, Uniform):
        return {"mean": (dist.low + dist.high) / 2}
    if isinstance(dist, (Normal, LogNormal)):
        return {"mean": dist.mean}
    if isinstance(dist, LogNormalMu):
        return {"mean": math.exp(dist.mu + dist.sigma**2 / 2)}
    if isinstance(dist, ParetoLogNormal):
        pareto = dist.xm * dist.alpha / (dist.alpha - 1) if dist.alpha > 1 else math.inf
        return {"mean": dist.mix_weight * pareto + (1 - dist.mix_weight) * math.exp(dist.mu + dist.sigma**2 / 2)}
    return {"mean": float(np.mean(dist.values))}


__all__ = [
    "MAX_TOKENS", "Constant", "Uniform", "Normal", "LogNormal", "LogNormalMu", "ParetoLogNormal",
    "Empirical", "LengthDistribution", "KINDS", "parse_distribution", "distribution_from_dict", "describe",
]
