"""Engine configuration: the vLLM scheduler and KV cache knobs one simulation uses.

Field names and defaults follow the oracle's config JSON
(``tests/data/oracle/configs``), which are vLLM 0.33.0's own
``SchedulerConfig`` / ``CacheConfig`` names, so an oracle config file loads as
it is with :meth:`EngineConfig.from_dict`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

#: Largest KV cache the engine accepts, in blocks (a 10x margin over the
#: largest single-GPU figure in the catalog); a guard against absurd input.
MAX_NUM_GPU_BLOCKS = 50_000_000


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


@dataclass(frozen=True)
class EngineConfig:
    """One engine configuration (one entry of a batch).

    Parameters
    ----------
    num_gpu_blocks : int
        vLLM's ``num_gpu_blocks`` including the permanent null block, so
        usable blocks = ``num_gpu_blocks - 1``.
    block_size : int
        Tokens per KV block.
    max_num_seqs : int
        Cap on running requests (admission only).
    max_num_batched_tokens : int
        Token budget per step.
    enable_prefix_caching, enable_chunked_prefill : bool
    long_prefill_token_threshold : int
        Cap on one request's prefill tokens per step; 0 = off.
    scheduler_reserve_full_isl : bool
        Admit a waiting request only if its whole prompt fits in free blocks.
    watermark : float
        Fraction of blocks held back from admissions (0 = off, vLLM's default).
    policy : {"fcfs"}
    async_scheduling : bool
        vLLM's asynchronous scheduling (batch queue of depth 2).
    max_model_len : int or None
        ``None`` = max(longest prompt + output + 16, max_num_batched_tokens).
    step_time_model : StepTimeModel
        Advances the clock for workloads with arrivals in seconds.
    max_steps : int
        Safety cap on engine steps.
    """

    num_gpu_blocks: int = 100_000
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    long_prefill_token_threshold: int = 0
    scheduler_reserve_full_isl: bool = True
    watermark: float = 0.0
    policy: str = "fcfs"
    async_scheduling: bool = False
    max_model_len: int | None = None
    step_time_model: StepTimeModel = field(default_factory=StepTimeModel)
    max_steps: int = 2_000_000

    def __post_init__(self) -> None:
        def whole(name: str, lo: int, hi: int | None = None) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(f"{name}: must be a whole number")
            if v < lo or (hi is not None and v > hi):
                limit = f"between {lo:,} and {hi:,}" if hi is not None else f">= {lo:,}"
                raise ConfigError(f"{name}: must be {limit}, got {v:,}")

        whole("num_gpu_blocks", 2, MAX_NUM_GPU_BLOCKS)
        whole("block_size", 1, 4096)
        whole("max_num_seqs", 1, 1_000_000)
        whole("max_num_batched_tokens", 1, 10_000_000)
        whole("long_prefill_token_threshold", 0, 10_000_000)
        whole("max_steps", 1, 1_000_000_000)
        if self.max_model_len is not None:
            whole("max_model_len", 1, 100_000_000)
        for name in ("enable_prefix_caching", "enable_chunked_prefill", "scheduler_reserve_full_isl", "async_scheduling"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}: must be true or false")
        w = self.watermark
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not (0.0 <= w < 1.0):
            raise ConfigError("watermark: must be a fraction in [0, 1)")
        if self.policy != "fcfs":
            raise ConfigError("policy: only 'fcfs' is supported")
        if isinstance(self.step_time_model, dict):
            object.__setattr__(self, "step_time_model", StepTimeModel(**self.step_time_model))
        if not isinstance(self.step_time_model, StepTimeModel):
            raise ConfigError("step_time_model: must be an object with base_s, per_token_s, per_req_s")

    #: Oracle config keys we accept and ignore (they do not change decisions).
    IGNORED_KEYS = frozenset({"prefix_caching_hash_algo", "seed"})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineConfig:
        """Build from the oracle's config JSON; unknown keys raise :class:`ConfigError`."""
        if not isinstance(data, dict):
            raise ConfigError("config: must be a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - cls.IGNORED_KEYS)
        if unknown:
            raise ConfigError(f"{unknown[0]}: unknown config field (known: {', '.join(sorted(known))})")
        kwargs = {k: v for k, v in data.items() if k in known}
        stm = kwargs.get("step_time_model")
        if stm is not None:
            if not isinstance(stm, dict):
                raise ConfigError("step_time_model: must be an object with base_s, per_token_s, per_req_s")
            bad = sorted(set(stm) - {"base_s", "per_token_s", "per_req_s"})
            if bad:
                raise ConfigError(f"step_time_model.{bad[0]}: unknown field")
            kwargs["step_time_model"] = StepTimeModel(**stm)
        try:
            return cls(**kwargs)
        except TypeError as exc:  # pragma: no cover - guarded by the key check
            raise ConfigError(str(exc)) from exc

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (the inverse of :meth:`from_dict`)."""
        return asdict(self)
