"""What the engine configuration's parts share, kept below :mod:`simulator.engine.config` so that the cost models
and the KV tiers, which :mod:`simulator.engine.config` builds, can use it without importing it back.

:class:`ConfigError` (an engine configuration that cannot be simulated), :func:`unknown_field` (the first
key of a dict that is not a dataclass field) and :class:`StepTimeModel` (the oracle's linear step time).
All three are importable from :mod:`simulator.engine.config` as well.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


def unknown_field(cls, data: dict, ignore: frozenset = frozenset()) -> tuple[str, str] | None:
    """The first key of ``data`` (sorted) that is not a field of dataclass ``cls``, with the known
    fields listed for the message; None when every key is known."""
    known = {f.name for f in fields(cls)}
    bad = sorted(set(data) - known - ignore)
    return (bad[0], ", ".join(sorted(known))) if bad else None


class ConfigError(ValueError):
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
                raise ConfigError(f"step_time_model.{f.name}: must be a finite number >= 0 seconds")
        if self.base_s + self.per_token_s + self.per_req_s <= 0:
            raise ConfigError("step_time_model: at least one coefficient must be positive")
