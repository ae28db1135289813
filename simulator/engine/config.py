"""Engine configuration: the vLLM scheduler and KV cache knobs one simulation uses.

Field names and defaults follow the oracle's config JSON
(``tests/data/oracle/configs``), which are vLLM 0.33.0's own
``SchedulerConfig`` / ``CacheConfig`` names, so an oracle config file loads as
it is with :meth:`EngineConfig.from_dict`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from simulator.base import ConfigError, StepTimeModel, unknown_field, unknown_message
from simulator.engine.tiers import KvTier, TierError
from simulator.speculative import SpeculativeConfig, SpeculativeError

#: Largest KV cache the engine accepts, in blocks (a 10x margin over the
#: largest single-GPU figure in the catalog); a guard against absurd input.
MAX_NUM_GPU_BLOCKS = 50_000_000

#: vLLM's scheduling policies (``SchedulerConfig.policy``).
POLICIES = ("fcfs", "priority")


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
    policy : {"fcfs", "priority"}
        vLLM's scheduling policy (``--scheduling-policy``): ``fcfs`` serves
        the waiting queue in arrival order; ``priority`` by each request's
        ``priority`` (lower first, ties by arrival) and preempts the running
        request of the greatest (priority, arrival) instead of the last one.
    async_scheduling : bool
        vLLM's asynchronous scheduling (batch queue of depth 2).
    max_model_len : int or None
        ``None`` = max(longest prompt + output + 16, max_num_batched_tokens).
    step_time_model : StepTimeModel
        Advances the clock for workloads with arrivals in seconds.
    prefix_cache : {"vllm", "radix"}
        ``vllm``: hashed full blocks (vLLM's prefix cache). ``radix``:
        SGLang's RadixCache: reuse at token granularity (page size 1), the
        same memory counted in token slots (``(num_gpu_blocks - 1) x
        block_size``), reference counts and least-recently-used leaves
        evicted first (see ``docs/simulator.md``, "RadixCache"). Block
        figures in the results are then token slots.
    cpu_tier, disk_tier : simulator.engine.tiers.KvTier or None
        Lower KV tiers (``{"num_blocks" or "size_gib", "read_gbps",
        "write_gbps", "read_latency_s", "write_latency_s"}``): GPU evictions
        are demoted there and prefix hits onboarded from there (see
        :mod:`simulator.engine.tiers`). Need prefix caching; disk needs CPU.
    kv_offload_threshold : float or None
        BLIS's threshold: when more than this fraction of GPU blocks hold KV
        (in use or cached) after a step, cached free blocks move to the CPU
        tier until no more do. ``None`` = only evictions demote.
    kv_bytes_per_block : int or None
        KV bytes of one block on one GPU (the sizing engine's figure), for
        tier sizes in GiB and transfer times.  # bytes
    cost_model : simulator.clock.cost_model.StepCostTerms or None
        A full step-time cost model (roofline or user coefficients, see
        ``docs/cost-model.md``) replacing ``step_time_model`` when set. In a
        config file: ``{"kind": "linear", "base_s": ...}``, ``{"kind":
        "roofline", "model": <config.json>, "gpu": {...}, "tp": 1,
        "coefficients": {...}}`` or ``{"kind": "terms", <coefficients>}``.
    max_steps : int or None
        Safety cap on schedule calls; None (the default): :func:`step_limit` derives one from the workload
        that no finite run reaches.
    speculative : simulator.speculative.drafting.SpeculativeConfig or None
        Speculative decoding (``{"method": "eagle", "num_speculative_tokens": 3,
        "acceptance_rate": 0.7}``; ``docs/speculative_decoding.md``). Synchronous scheduling only.
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
    cost_model: Any = None
    prefix_cache: str = "vllm"
    cpu_tier: Any = None
    disk_tier: Any = None
    kv_offload_threshold: float | None = None
    kv_bytes_per_block: int | None = None
    max_steps: int | None = None
    speculative: Any = None

    def __post_init__(self) -> None:
        whole = self._check_whole
        whole("num_gpu_blocks", 2, MAX_NUM_GPU_BLOCKS)
        whole("block_size", 1, 4096)
        whole("max_num_seqs", 1, 1_000_000)
        whole("max_num_batched_tokens", 1, 10_000_000)
        whole("long_prefill_token_threshold", 0, 10_000_000)
        whole("max_steps", 1, 1_000_000_000, optional=True)
        whole("max_model_len", 1, 100_000_000, optional=True)
        whole("kv_bytes_per_block", 1, 1 << 40, optional=True)
        for name in ("enable_prefix_caching", "enable_chunked_prefill", "scheduler_reserve_full_isl", "async_scheduling"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError("must be true or false", field=name)
        w = self.watermark
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not (0.0 <= w < 1.0):
            raise ConfigError("must be a fraction in [0, 1)", field="watermark")
        if self.prefix_cache not in ("vllm", "radix"):
            raise ConfigError(f"must be 'vllm' or 'radix', got {self.prefix_cache!r}", field="prefix_cache")
        if self.prefix_cache == "radix" and (self.num_gpu_blocks - 1) * self.block_size + 1 > MAX_NUM_GPU_BLOCKS:
            raise ConfigError(f"radix counts memory in tokens; at most {MAX_NUM_GPU_BLOCKS:,} "
                              "token slots (num_gpu_blocks x block_size)", field="prefix_cache")
        if self.policy not in POLICIES:
            raise ConfigError(f"must be 'fcfs' or 'priority' (vLLM's --scheduling-policy), got {self.policy!r}", field="policy")
        if isinstance(self.step_time_model, dict):
            object.__setattr__(self, "step_time_model", StepTimeModel(**self.step_time_model))
        if not isinstance(self.step_time_model, StepTimeModel):
            raise ConfigError("must be an object with base_s, per_token_s, per_req_s", field="step_time_model")
        if self.cost_model is not None:
            # imported here: a run without a cost model does not load the cost models (and the model
            # specs, sizing and quantization they build on: about 0.08 s of CPU at start-up)
            from simulator.clock import parse_cost_model

            object.__setattr__(self, "cost_model", parse_cost_model(self.cost_model))
        self._check_tiers()
        self._check_speculative()

    def _check_whole(self, name: str, lo: int, hi: int | None = None, *, optional: bool = False) -> None:
        """``name`` is a whole number from ``lo`` to ``hi`` (or None, when ``optional``)."""
        v = getattr(self, name)
        if v is None and optional:
            return
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError("must be a whole number", field=name)
        if v < lo or (hi is not None and v > hi):
            limit = f"between {lo:,} and {hi:,}" if hi is not None else f">= {lo:,}"
            raise ConfigError(f"must be {limit}, got {v:,}", field=name)

    def _check_speculative(self) -> None:
        if self.speculative is None:
            return
        from simulator.clock import parse_cost_model  # (a drafter's cost model; see __post_init__)

        try:
            object.__setattr__(self, "speculative", SpeculativeConfig.from_dict(self.speculative, parse_cost_model))
        except SpeculativeError as exc:
            raise ConfigError(exc.message, field=exc.field) from exc
        except TypeError as exc:
            raise ConfigError(f"{exc}", field="speculative") from exc

    def _check_tiers(self) -> None:
        for name in ("cpu_tier", "disk_tier"):
            v = getattr(self, name)
            if v is not None:
                try:
                    object.__setattr__(self, name, KvTier.from_dict(v, name))
                except TierError as exc:  # from_dict names the tier in the field; else the words go under it
                    inner = exc.field or ""
                    raise (ConfigError(exc.message, field=inner) if inner == name or inner.startswith(f"{name}.")
                           else ConfigError(str(exc), field=name)) from exc
        if self.disk_tier is not None and self.cpu_tier is None:
            raise ConfigError("needs a cpu_tier above it (blocks reach disk through the CPU tier)", field="disk_tier")
        tiers = [t for t in (self.cpu_tier, self.disk_tier) if t is not None]
        if tiers and not self.enable_prefix_caching:
            raise ConfigError("KV tiers keep cached prefixes, so they need enable_prefix_caching", field="cpu_tier")
        for name, t in (("cpu_tier", self.cpu_tier), ("disk_tier", self.disk_tier)):
            if t is not None and t.size_gib is not None and self.kv_bytes_per_block is None:
                raise ConfigError("needs kv_bytes_per_block to convert GiB to blocks "
                                  "(or give num_blocks)", field=f"{name}.size_gib")
        thr = self.kv_offload_threshold
        if thr is not None:
            if isinstance(thr, bool) or not isinstance(thr, (int, float)) or not 0.0 < thr <= 1.0:
                raise ConfigError(f"must be a fraction in (0, 1], got {thr!r}", field="kv_offload_threshold")
            if self.cpu_tier is None:
                raise ConfigError("needs a cpu_tier to offload to", field="kv_offload_threshold")

    #: Oracle config keys we accept and ignore (they do not change decisions).
    IGNORED_KEYS = frozenset({"prefix_caching_hash_algo", "seed"})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineConfig:
        """Build from the oracle's config JSON; unknown keys raise :class:`ConfigError`."""
        if not isinstance(data, dict):
            raise ConfigError("must be a JSON object", field="config")
        bad = unknown_field(cls, data, cls.IGNORED_KEYS, what="config field")
        if bad:
            raise ConfigError(f"{bad[1]}", field=bad[0])
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        stm = kwargs.get("step_time_model")
        if stm is not None:
            if not isinstance(stm, dict):
                raise ConfigError("must be an object with base_s, per_token_s, per_req_s", field="step_time_model")
            bad = sorted(set(stm) - {"base_s", "per_token_s", "per_req_s"})
            if bad:
                raise ConfigError(f"{unknown_message(bad[0], ['base_s', 'per_token_s', 'per_req_s'])}", field=f"step_time_model.{bad[0]}")
            kwargs["step_time_model"] = StepTimeModel(**stm)
        try:
            return cls(**kwargs)
        except TypeError as exc:  # pragma: no cover - guarded by the key check
            raise ConfigError(str(exc)) from exc

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (the inverse of :meth:`from_dict`)."""
        d = asdict(self)  # tiers become dicts here (dataclasses)
        if self.speculative is None:
            del d["speculative"]  # (a configuration without it writes what it wrote before)
        else:
            d["speculative"] = self.speculative.to_dict()
        if self.max_steps is None:
            del d["max_steps"]  # derived from the workload (step_limit)
        if self.cost_model is not None:
            d["cost_model"] = {"kind": "terms", **self.cost_model.to_dict()}
        return d


#: The least step limit a run gets when its configuration names none (the fixed default it replaced).
MIN_STEP_LIMIT = 2_000_000


def step_limit(config: EngineConfig, workload) -> int:
    """The schedule calls a run may make: ``config.max_steps`` when given, else one a finite run never reaches:
    twice the tokens it must compute (each schedule call with work computes at least one token of a running
    request; the factor leaves room for recomputation after preemptions) plus, for arrivals in steps, the
    last arrival, and at least :data:`MIN_STEP_LIMIT`."""
    if config.max_steps is not None:
        return int(config.max_steps)
    tokens = int(workload.prompt_len.sum()) + int(workload.output_len.sum())
    last = int(workload.arrival.max(initial=0)) if workload.arrival_unit == "step" else 0
    return max(MIN_STEP_LIMIT, 2 * tokens + last + workload.n)
