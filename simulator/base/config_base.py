"""What the engine configuration's parts share, kept below :mod:`simulator.engine.config` so that the cost models
and the KV tiers, which :mod:`simulator.engine.config` builds, can use it without importing it back.

:class:`ConfigError` (an engine configuration that cannot be simulated), :func:`unknown_field` (the first
key of a dict that is not a dataclass field) and :class:`StepTimeModel` (the oracle's linear step time).
All three are importable from :mod:`simulator.engine.config` as well.

:func:`unknown_message` is the one wording of an unknown field everywhere the project refuses one (the API's
bodies, sweep and search definitions, engine and workload JSON): ``unknown field; did you mean 'x'? (known:
...)``, the closest known name found by :func:`difflib.get_close_matches` when one is close enough.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, fields

from simulator.base.errors import FieldError

#: How alike (difflib's ratio, 0 to 1) a known name must be to an unknown one to be offered as "did you mean".
CLOSE_NAME_CUTOFF = 0.6


def closest_name(name: object, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (``difflib.get_close_matches``, cutoff 0.6), or None."""
    matches = difflib.get_close_matches(str(name)[:200], [str(k) for k in known], n=1, cutoff=CLOSE_NAME_CUTOFF)
    return matches[0] if matches else None


def unknown_message(name: object, known: Iterable[str], *, what: str = "field") -> str:
    """``"unknown field; did you mean 'tensor_parallel_size'? (known: a, b)"``: the message for a key that is not
    one of ``known`` (listed in the order given), with the closest known name when there is one."""
    names = list(dict.fromkeys(str(k) for k in known))
    hint = closest_name(name, names)
    text = f"unknown {what}" + (f"; did you mean '{hint}'?" if hint else "")
    return f"{text} (known: {', '.join(names)})" if names else f"{text} (this takes no fields)"


def unknown_field(cls, data: dict, ignore: frozenset = frozenset(), *, what: str = "field") -> tuple[str, str] | None:
    """The first key of ``data`` (sorted) that is not a field of dataclass ``cls``, with its message
    (:func:`unknown_message`: the closest field, the known ones); None when every key is known."""
    known = sorted(f.name for f in fields(cls))
    bad = sorted(set(data) - set(known) - ignore)
    return (bad[0], unknown_message(bad[0], known, what=what)) if bad else None


class ConfigError(FieldError):
    """An engine configuration that cannot be simulated; the message names the field."""


@dataclass(frozen=True)
class StepTimeModel:
    """Linear step time: ``base_s + per_token_s * tokens + per_req_s * requests``.

    All coefficients in seconds (per step, per scheduled token, per scheduled
    request). This is the oracle's ``step_time_model``.
    """

    base_s: float = 0.025
    per_token_s: float = 0.0
    per_req_s: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v >= 0) or v == float("inf"):
                raise ConfigError("must be a finite number >= 0 seconds", field=f"step_time_model.{f.name}")
        if self.base_s + self.per_token_s + self.per_req_s <= 0:
            raise ConfigError("at least one coefficient must be positive", field="step_time_model")
