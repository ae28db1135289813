"""Step-time cost models: how long one engine step takes, in seconds.

The engine calls a cost model once per step for every configuration of a
batch, with what that step scheduled, summed over the scheduled requests (all
arguments are arrays of shape ``(B,)``, one entry per configuration):

``prefill_tokens``
    Prompt tokens computed this step (all prefill chunks).  # tokens
``prefill_attention_tokens``
    Sum over those tokens of the context each attends to (itself included).
    A chunk of ``c`` tokens starting after ``s`` computed tokens contributes
    ``c * s + c * (c + 1) / 2``.  # tokens
``decode_tokens``
    Requests decoding one token this step.  # tokens
``decode_context_tokens``
    Sum over decoding requests of the context the new token attends to
    (``num_computed_tokens + 1``).  # tokens
``num_reqs``
    Scheduled requests (prefill and decode).  # requests
``prefill_kv_tokens`` (optional)
    Sum over prefilling requests of ``s + c``, the KV they read; ``None`` =
    ``prefill_tokens`` (fresh prompts).  # tokens

Two models:

* :class:`RooflineStepTime` from a :class:`~simulator.base.specs.ModelSpec`, a
  :class:`~simulator.base.specs.GpuSpec` and a TP degree: the step is the **sum of
  its operator groups**, each bounded by its own roofline (dense GEMMs with an
  efficiency that grows with the step's tokens, prefill attention, decode
  attention's KV read, the MoE experts the step's tokens touch, TP all-reduces,
  and the CPU time of a step growing with its requests), see
  :mod:`simulator.clock.terms`. Coefficients live in :class:`RooflineCoefficients`;
  their defaults were fitted once on the training split of the sim-to-real study
  (``python -m simulator validate``, ``docs/cost-model.md``).
* :class:`LinearStepTime`: ``base_s + per_token_s x tokens + per_req_s x
  requests``, the oracle's :class:`simulator.engine.config.StepTimeModel`.

Both reduce to the same per-configuration coefficient row
(:class:`StepCostTerms`), so configurations with different GPUs, TP degrees,
coefficients or model kinds run in one :class:`BatchStepTime`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from simulator.base import (
    DEFAULT_SAMPLER_PATH,
    DTYPE_BYTES,
    LAYER_FULL,
    LAYER_SLIDING,
    SAMPLER_FIELDS,
    SAMPLER_PATHS,
    ConfigError,
    DeploymentSpec,
    GpuSpec,
    ModelSpec,
    SpecError,
    StepTimeModel,
    unknown_message,
)
from simulator.clock.physics import GpuPhysics, gpu_physics
from simulator.clock.terms import BatchStepTime, CostModelError, StepCostTerms, _arr, _known_fields
from simulator.sizing import (
    check_parallelism,
    compute_dtype,
    estimate_num_parameters,
    kv_bytes_per_token,
    parse_hf_config,
    resolve_kv_dtype,
    weights_bytes_per_gpu,
)

TERA = 1e12
GIGA = 1e9



def sampling_coefficients(path: str) -> dict[str, float]:
    """The :class:`RooflineCoefficients` overrides of one sampler path of :data:`SAMPLER_PATHS`."""
    if path not in SAMPLER_PATHS:
        raise CostModelError(f"must be one of {', '.join(SAMPLER_PATHS)}, got {path!r}", field="sampling")
    return dict(zip(SAMPLER_FIELDS, SAMPLER_PATHS[path]))


def model_coefficients(model: ModelSpec, overrides: dict | None = None, gpu: GpuSpec | None = None,
                       tp: int = 1) -> dict[str, Any]:
    """The default coefficients for ``model`` (on ``gpu`` at ``tp``) as a dict: :class:`RooflineCoefficients`,
    then the GPU's measured physics (:func:`simulator.clock.physics.gpu_physics`; none without ``gpu``), then the
    sampler of the path its requests take unless they choose one (``model.sampling``, from its
    ``generation_config.json``; :data:`DEFAULT_SAMPLER_PATH` when not known), then ``overrides``."""
    physics = gpu_physics(gpu, tp).coefficients if gpu is not None else {}
    return {**RooflineCoefficients().to_dict(), **physics,
            **sampling_coefficients(model.sampling or DEFAULT_SAMPLER_PATH), **(overrides or {})}


_FRACTIONS = ("mfu", "attention_efficiency", "bandwidth_efficiency", "expert_bandwidth_efficiency", "kv_bandwidth_efficiency",
              "interconnect_efficiency", "nccl_interconnect_efficiency")
#: Fractions that may be None: the figure of the wider type (or of the dense GEMMs) then stands in.
_OPTIONAL_FRACTIONS = ("fp8_mfu", "fp8_bandwidth_efficiency", "block_fp8_mfu", "block_fp8_bandwidth_efficiency",
                       "int8_mfu", "fp4_mfu", "fp4_bandwidth_efficiency", "int4_bandwidth_efficiency", "expert_mfu",
                       "mla_attention_efficiency")
_SECONDS = ("allreduce_latency_s", "nccl_allreduce_latency_s", "layer_overhead_s", "moe_expert_overhead_s",
            "mla_layer_overhead_s", "kv_offload_copy_s",
            "sampling_step_s", "sampling_vocab_s", "sampling_request_vocab_s", "step_overhead_s", "per_request_overhead_s", "per_token_overhead_s",
            "serve_request_s", "serve_prompt_token_s", "serve_output_token_s")
_COUNTS = ("gemm_half_tokens", "async_lag_steps", "host_link_gbps")


@dataclass(frozen=True)
class RooflineCoefficients:
    """Efficiencies and overheads of the roofline clock (every one overridable).

    Defaults: each from a measurement with a physical meaning (``docs/cost-model.md``
    names the source of every one: the H100 step-time table, published kernel
    benchmarks, BLIS, the H100 sampler table); the serving time per request and the fixed
    GPU time per layer were fitted on the 13 training runs of the sim-to-real study (vLLM
    0.15.1 on H100), with their leave-one-out errors.

    Parameters
    ----------
    mfu : float
        Fraction of the GPU's dense tensor FLOPS that large GEMMs reach, in (0, 1].
    gemm_half_tokens : float
        Tokens in a step at which the GEMMs reach half of ``mfu`` (efficiency
        ``mfu x T / (T + gemm_half_tokens)``).  # tokens
    attention_efficiency : float
        Fraction of dense FLOPS prefill attention (flash attention) reaches, in (0, 1].
    bandwidth_efficiency : float
        Fraction of peak HBM bandwidth the weight reads reach, in (0, 1].
    expert_bandwidth_efficiency : float
        Fraction of peak HBM bandwidth the routed experts are read at (MoE models); by default
        the dense weights' rate (each layer's fixed time is charged separately, MoE layers
        included). Small experts read by gathering kernels may stream slower.
    kv_bandwidth_efficiency : float
        Fraction of peak HBM bandwidth the KV cache reads and writes reach, in
        (0, 1]: decode attention streams long contiguous pages from every SM at
        once, closer to peak than the per-layer weight GEMVs.
    interconnect_efficiency : float
        Fraction of the per-direction GPU-to-GPU bandwidth a ring all-reduce of a
        decode-sized message (tens of KB to 1 MB) reaches: vLLM's custom all-reduce
        on H100 moves such messages at ~50 GB/s, not at the link's 450 GB/s.
    allreduce_latency_s : float
        Fixed latency of one all-reduce (vLLM's custom all-reduce on H100,
        small messages: 8.5-9.5 us).  # s
    nccl_interconnect_efficiency, nccl_allreduce_latency_s : float
        The large-message path (NCCL's ring, which vLLM uses past its custom
        kernel's range): fraction of the per-direction link bandwidth and fixed
        latency. A step's all-reduces take the faster of the two paths, so a
        long prefill's multi-MB messages move near the link's bandwidth.  # s
    allreduces_per_layer : int
        Tensor-parallel all-reduces per decoder layer (Megatron-style: 2).
    layer_overhead_s : float
        GPU time per decoder layer per step that neither bytes nor FLOPs explain: each
        layer's kernels (norms, rotary, KV-cache write, attention, activation, four
        GEMMs) pay a launch, ramp-up and tail latency even inside a CUDA graph. Paid by
        every step, whatever its size.  # s
    sampling_step_s, sampling_vocab_s, sampling_request_vocab_s : float
        GPU time of the sampler, outside the forward pass: ``sampling_step_s + sampling_vocab_s x V +
        sampling_request_vocab_s x V x R`` a step for ``R`` scheduled requests over a ``V``-token
        vocabulary. Defaults: vLLM 0.15's PyTorch top-k / top-p path (a full sort of each request's
        logits), which every request of a model whose ``generation_config.json`` sets ``top_k`` or
        ``top_p`` takes (vLLM applies those defaults to requests that do not set them);
        :data:`SAMPLER_PATHS` holds the measured figures of the other paths.  # s
    kv_offload_copy_s : float
        With CPU KV offload (``from_specs(..., cpu_offload=True)``, vLLM's offloading
        connector): each KV block that fills is copied to host memory one layer's K or V
        at a time, and each copy pays this fixed latency on the step's path (measured on
        one H100: 12-19 us a copy, whatever its 16-131 KB).  # s
    host_link_gbps : float
        GPU-to-host bandwidth the offloaded KV bytes move at (PCIe 5.0 x16 on one H100:
        54 GB/s measured for one 128 MB copy).  # GB/s
    step_overhead_s : float
        CPU time of one engine step that does not overlap the GPU (scheduling,
        input preparation, sampling, launch gaps).  # s
    per_request_overhead_s : float
        CPU time per scheduled request per step.  # s
    per_token_overhead_s : float
        CPU time per scheduled token per step.  # s
    serve_request_s : float
        Time a request spends outside the engine steps once (HTTP handling in
        the API server, engine-core hand-off, first-token streaming); added to
        TTFT and E2E.  # s
    serve_prompt_token_s : float
        Tokenization per prompt token; added to TTFT and E2E.  # s
    serve_output_token_s : float
        Detokenization and streaming per output token after the first; added to E2E.  # s
    async_lag_steps : float
        Steps of the running batch a request waits, under async scheduling, beyond
        the step boundary the simulator admits it at: vLLM schedules step k+1 when
        step k starts, so a request arriving during step k joins step k+2.  # steps
    activation_bytes : float, optional
        Bytes per activation element all-reduced; ``None`` = the compute dtype's.  # bytes
    fp8_mfu, block_fp8_mfu, int8_mfu, fp4_mfu : float, optional
        Fraction of the fp8 (fp4) peak that large GEMMs of that format reach (``block_fp8``: 128 x 128
        block-scaled fp8, as DeepSeek-V3 ships); ``None`` = ``mfu`` (the next wider format's figure first).
    fp8_bandwidth_efficiency, block_fp8_bandwidth_efficiency, fp4_bandwidth_efficiency, int4_bandwidth_efficiency : float, optional
        Fraction of peak HBM bandwidth decode GEMVs of such weights stream at (``int4``: weight-only
        AWQ / GPTQ kernels); ``None`` = ``bandwidth_efficiency``.
    expert_mfu : float, optional
        Fraction of peak the grouped expert GEMMs of a fused-MoE layer reach at thousands of tokens (many
        small experts run far below a dense GEMM); ``None`` = ``mfu``.
    expert_half_tokens : float, optional
        Tokens per expert (``T x top_k / E``) at which the grouped expert GEMMs reach half of ``expert_mfu``:
        their time is ``expert_tok_s x (T + expert_half_tokens x E / top_k)``, still linear in ``T``; ``None`` =
        ``gemm_half_tokens`` over the step's tokens (the dense GEMMs' curve).  # tokens
    moe_expert_overhead_s : float
        Fixed time of a fused-MoE layer per local expert per step (routing, the token-to-expert alignment,
        the grouped kernels' launch and tail), whatever the tokens.  # s
    mla_attention_efficiency : float, optional
        Fraction of dense FLOPS the absorbed MLA decode kernel (FlashMLA, FlashAttention-MLA, Triton MLA)
        reaches; ``None`` = ``attention_efficiency``.
    mla_layer_overhead_s : float
        Fixed time of an MLA attention module per layer per step beyond ``layer_overhead_s`` (its extra
        projections, norms, rope and latent cache write).  # s
    sampler_scale : float
        The sampler's seconds on this GPU over the H100's the ``sampling_*`` fields hold.
    """

    mfu: float = 0.70
    gemm_half_tokens: float = 64.0
    attention_efficiency: float = 0.45
    bandwidth_efficiency: float = 0.84
    expert_bandwidth_efficiency: float = 0.84
    kv_bandwidth_efficiency: float = 0.90
    interconnect_efficiency: float = 0.12
    allreduce_latency_s: float = 8.5e-6
    nccl_interconnect_efficiency: float = 0.75
    nccl_allreduce_latency_s: float = 20e-6
    allreduces_per_layer: int = 2
    layer_overhead_s: float = 25e-6
    sampling_step_s: float = SAMPLER_PATHS[DEFAULT_SAMPLER_PATH][0]
    sampling_vocab_s: float = SAMPLER_PATHS[DEFAULT_SAMPLER_PATH][1]
    sampling_request_vocab_s: float = SAMPLER_PATHS[DEFAULT_SAMPLER_PATH][2]
    kv_offload_copy_s: float = 13e-6
    host_link_gbps: float = 54.0
    step_overhead_s: float = 0.5e-3
    per_request_overhead_s: float = 15e-6
    per_token_overhead_s: float = 0.0
    serve_request_s: float = 7.0e-3
    serve_prompt_token_s: float = 1e-6
    serve_output_token_s: float = 0.0
    async_lag_steps: float = 1.0
    activation_bytes: float | None = None
    fp8_mfu: float | None = None
    fp8_bandwidth_efficiency: float | None = None
    block_fp8_mfu: float | None = None
    block_fp8_bandwidth_efficiency: float | None = None
    int8_mfu: float | None = None
    fp4_mfu: float | None = None
    fp4_bandwidth_efficiency: float | None = None
    int4_bandwidth_efficiency: float | None = None
    expert_mfu: float | None = None
    expert_half_tokens: float | None = None
    moe_expert_overhead_s: float = 0.0
    mla_attention_efficiency: float | None = None
    mla_layer_overhead_s: float = 0.0
    sampler_scale: float = 1.0

    def __post_init__(self) -> None:
        for name in _FRACTIONS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 < v <= 1.0):
                raise CostModelError(f"must be a fraction in (0, 1], got {v!r}", field=name)
            object.__setattr__(self, name, float(v))
        for name in _OPTIONAL_FRACTIONS:
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 < v <= 1.0):
                raise CostModelError(f"must be a fraction in (0, 1] or null, got {v!r}", field=name)
            object.__setattr__(self, name, float(v))
        h = self.expert_half_tokens
        if h is not None:
            if isinstance(h, bool) or not isinstance(h, (int, float)) or not math.isfinite(h) or not 0.0 <= h <= 1e5:
                raise CostModelError(f"must be a number of tokens in [0, 100000] or null, got {h!r}", field="expert_half_tokens")
            object.__setattr__(self, "expert_half_tokens", float(h))
        s = self.sampler_scale
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or not 0.0 < s <= 100.0:
            raise CostModelError(f"must be a multiple of the H100's sampler time in (0, 100], got {s!r}", field="sampler_scale")
        object.__setattr__(self, "sampler_scale", float(s))
        for name in (*_SECONDS, *_COUNTS):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                what = {"gemm_half_tokens": "tokens", "async_lag_steps": "steps", "host_link_gbps": "GB/s"}.get(name, "seconds")
                raise CostModelError(f"must be a finite number of {what} >= 0, got {v!r}", field=name)
            object.__setattr__(self, name, float(v))
        if self.host_link_gbps <= 0:
            raise CostModelError(f"must be a number of GB/s > 0, got {self.host_link_gbps!r}", field="host_link_gbps")
        a = self.allreduces_per_layer
        if isinstance(a, bool) or not isinstance(a, int) or a < 0:
            raise CostModelError(f"must be a whole number >= 0, got {a!r}", field="allreduces_per_layer")
        b = self.activation_bytes
        if b is not None:
            if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b) or b <= 0:
                raise CostModelError(f"must be a number of bytes > 0, got {b!r}", field="activation_bytes")
            object.__setattr__(self, "activation_bytes", float(b))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RooflineCoefficients:
        """Build from a JSON object; unknown keys raise :class:`CostModelError`."""
        _known_fields(cls, data, "coefficients", "", "unknown roofline coefficient")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------
# single-configuration models
# ---------------------------------------------------------------------------


class _Single:
    """Shared evaluation of a one-configuration model (arrays broadcast over calls)."""

    terms: StepCostTerms

    def _batch(self) -> BatchStepTime:
        b = self.__dict__.get("_batch_cache")
        if b is None:
            b = BatchStepTime([self.terms])
            object.__setattr__(self, "_batch_cache", b)
        return b

    def step_time(self, prefill_tokens, prefill_attention_tokens, decode_tokens, decode_context_tokens,
                  num_reqs, prefill_kv_tokens=None) -> np.ndarray:
        """Seconds per step; arguments may be arrays of any 1-D shape (many steps of one configuration).  # s"""
        args = [np.atleast_1d(_arr(x, "arg")) for x in (prefill_tokens, prefill_attention_tokens, decode_tokens,
                                                          decode_context_tokens, num_reqs)]
        if prefill_kv_tokens is not None:
            args.append(np.atleast_1d(_arr(prefill_kv_tokens, "prefill_kv_tokens")))
        shape = np.broadcast_shapes(*(a.shape for a in args))
        batch = BatchStepTime([self.terms] * int(np.prod(shape)))
        out = batch.step_time(*(np.broadcast_to(a, shape) for a in args[:5]),
                              prefill_kv_tokens=None if prefill_kv_tokens is None else np.broadcast_to(args[5], shape))
        return out.reshape(shape)

    def components(self, *args, **kwargs) -> dict[str, float]:
        """The operator groups of one step (gemm, attention, moe, comm, overhead, total), as floats.  # s"""
        return {k: float(v[0]) for k, v in self._batch().components(*args, **kwargs).items()}

    def decode_jump_time(self, k, decode_tokens, decode_context_tokens, num_reqs=None) -> float:
        """Total seconds of ``k`` decode-only steps (see :meth:`BatchStepTime.decode_jump_time`).  # s"""
        return float(self._batch().decode_jump_time(k, decode_tokens, decode_context_tokens, num_reqs)[0])


@dataclass(frozen=True)
class LinearStepTime(_Single):
    """``base_s + per_token_s x (prefill + decode tokens) + per_req_s x requests``.

    Wraps :class:`simulator.engine.config.StepTimeModel` (the oracle's model, and the
    way a user enters coefficients fitted on their own measurements).
    """

    linear: StepTimeModel

    def __post_init__(self) -> None:
        lin = self.linear
        if isinstance(lin, dict):
            lin = StepTimeModel(**lin)
            object.__setattr__(self, "linear", lin)
        if not isinstance(lin, StepTimeModel):
            raise CostModelError("must be a StepTimeModel or an object with base_s, per_token_s, per_req_s", field="linear")

    @property
    def terms(self) -> StepCostTerms:
        return StepCostTerms(base_s=self.linear.base_s, per_token_s=self.linear.per_token_s,
                             per_req_s=self.linear.per_req_s)


#: Quantization formats (``ModelSpec.quantization`` / ``quant_scheme``) whose GEMMs run in a narrow type, by
#: the peak they run at: W8A8 fp8 (per tensor or channel), block-scaled fp8, W8A8 int8, nvfp4.
_W8A8_FP8 = ("fp8-static", "fp8-dynamic", "w8a8-fp8")


def _gemm_format(model: ModelSpec, dtype: str) -> str:
    """``"block_fp8"``, ``"fp8"``, ``"int8"``, ``"fp4"``, ``"int4"`` (weight-only 4-bit: computes in bf16)
    or ``"bf16"``: the kind of GEMM the model's weights run through in vLLM."""
    q, scheme = model.quantization, model.quant_scheme
    if q == "fp8":  # (no scheme: vLLM's online --quantization fp8, per-tensor dynamic)
        return "block_fp8" if scheme == "fp8-block" else "fp8"
    if q == "compressed-tensors" and scheme in _W8A8_FP8:
        return "fp8"
    if q == "int8" or (q == "compressed-tensors" and scheme == "w8a8-int8"):
        return "int8"
    if q in ("nvfp4", "fp4") or (q == "compressed-tensors" and scheme == "nvfp4"):
        return "fp4"
    if q in ("awq", "gptq", "int4", "compressed-tensors") and (model.quant_bits or 4) == 4:
        return "int4"
    if q is None and dtype in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        return "fp8"
    return "bf16"


def gemm_format(model: ModelSpec, deployment: DeploymentSpec | None = None) -> str:
    """The kind of GEMM ``model``'s weights run through in vLLM (``"bf16"``, ``"fp8"``, ``"block_fp8"``, ``"int8"``,
    ``"fp4"``, ``"int4"``), under ``deployment``'s dtype (default ``auto``).  # format"""
    deployment = deployment or DeploymentSpec()
    cdt = compute_dtype(model, deployment)
    return _gemm_format(model, deployment.dtype if deployment.dtype != "auto" else cdt)


#: Per GEMM kind: the peaks to try (narrowest first), then the efficiency fields (FLOPs, weight streaming) to try.
_FORMAT_RATES = {
    "block_fp8": (("fp8", "bf16"), ("block_fp8_mfu", "fp8_mfu"), ("block_fp8_bandwidth_efficiency", "fp8_bandwidth_efficiency")),
    "fp8": (("fp8", "bf16"), ("fp8_mfu",), ("fp8_bandwidth_efficiency",)),
    "int8": (("fp8", "bf16"), ("int8_mfu", "fp8_mfu"), ("fp8_bandwidth_efficiency",)),
    "fp4": (("fp4", "fp8", "bf16"), ("fp4_mfu",), ("fp4_bandwidth_efficiency",)),
    "int4": (("bf16",), (), ("int4_bandwidth_efficiency",)),
    "bf16": (("bf16",), (), ()),
}


def _flops_dtype(model: ModelSpec, gpu: GpuSpec, dtype: str,
                 co: RooflineCoefficients | None = None) -> tuple[str, float, float, float]:
    """Which dense TFLOPS the matmuls run at, that figure, and the GEMMs' FLOP and weight-streaming efficiencies.

    fp8 / int8 (W8A8) checkpoints use the fp8 figure, nvfp4 / fp4 the fp4 figure, falling back to the next
    wider type the GPU lists; weight-only int4 (AWQ / GPTQ / mxfp4) computes in the activation dtype (bf16). A
    format computed at its own peak takes that format's measured efficiencies (``fp8_mfu`` ...; ``None``:
    ``mfu`` / ``bandwidth_efficiency``); on a GPU without the format's peak (fp8 on an A100: vLLM's weight-only
    Marlin kernels) the bf16 ones.
    """
    co = co or RooflineCoefficients()
    kind = _gemm_format(model, dtype)
    peaks, mfus, bws = _FORMAT_RATES[kind]
    for name in (*peaks, "bf16"):
        v = getattr(gpu, f"{name}_tflops")
        if v:
            break
    else:
        raise CostModelError(f"{gpu.name} has no dense TFLOPS figure; the roofline needs one", field="gpu.bf16_tflops")
    narrow = name != "bf16" or kind == "int4"  # (weight-only int4 streams its own way whatever the peak)
    mfu = next((getattr(co, f) for f in mfus if getattr(co, f) is not None), None) if name != "bf16" else None
    bw = next((getattr(co, f) for f in bws if getattr(co, f) is not None), None) if narrow else None
    return name, float(v), mfu or co.mfu, bw or co.bandwidth_efficiency


def _attention_per_token(model: ModelSpec, kvdt: str, tp: int) -> tuple[float, float, dict[int, list[float]]]:
    """FLOP per query x context token of the full-attention layers, their KV bytes per token per GPU, and
    ``{window: [FLOP, KV bytes]}`` of the sliding layers."""
    full_attn = 0.0
    sliding: dict[int, list[float]] = {}
    kv_full = kv_bytes_per_token(model, kvdt, tp, [lay for lay in model.layer_specs if lay.kind == LAYER_FULL],
                                 per_gpu=True)
    for lay in model.layer_specs:
        if lay.kind == LAYER_FULL or lay.kind == LAYER_SLIDING:
            hd = lay.head_dim or model.head_dim
            if model.attention == "MLA":
                hd = (model.qk_nope_head_dim or 0) + (model.qk_rope_head_dim or 0) or hd
            f = 4.0 * model.num_attention_heads * hd  # FLOP per query x context token (QK^T + AV)
            if lay.kind == LAYER_FULL:
                full_attn += f
            else:
                kvb = kv_bytes_per_token(model, kvdt, tp, [lay], per_gpu=True)
                acc = sliding.setdefault(int(lay.window), [0.0, 0.0])
                acc[0] += f
                acc[1] += kvb
    return full_attn, kv_full, sliding


def _experts(model: ModelSpec, total_w: float) -> tuple[float, float, float]:
    """Routed experts: bytes per GPU when all are read, ``1 - top_k / E``, and FLOP per token (top-k of them)."""
    if not model.is_moe:
        return 0.0, 1.0, 0.0
    total_params, _ = estimate_num_parameters(model)
    ie = model.moe_intermediate_size or model.intermediate_size
    mats = 3 if model.gated_mlp else 2
    n_moe = model.num_layers - model.num_dense_layers
    expert_params = n_moe * model.num_experts * mats * model.hidden_size * ie
    frac = min(expert_params / max(total_params, 1), 1.0)
    flops = 2.0 * n_moe * model.num_experts_per_tok * mats * model.hidden_size * ie
    return total_w * frac, 1.0 - model.num_experts_per_tok / model.num_experts, flops


def _expert_padding(model: ModelSpec, co: RooflineCoefficients, expert_tok_s: float) -> dict[str, float]:
    """The grouped expert GEMMs' fixed part: with ``expert_half_tokens`` (``h`` tokens per expert), each touched
    expert runs as if it had ``h`` more tokens (``expert_tok_s x h x E / top_k`` when every expert is touched,
    times the fraction touched: ``expert_pad_s``); without it, the dense GEMMs' ``gemm_half_tokens`` over the
    step (``expert_fixed_s``, as before the field).  # s"""
    if co.expert_half_tokens is None or not model.is_moe:
        return {"expert_fixed_s": expert_tok_s * co.gemm_half_tokens}
    return {"expert_pad_s": expert_tok_s * co.expert_half_tokens * model.num_experts / model.num_experts_per_tok}


def _fixed_gpu_seconds(model: ModelSpec, co: RooflineCoefficients) -> float:
    """GPU seconds of every busy step whatever its size: each layer's kernel latencies, the fused-MoE layers'
    fixed time per local expert, the MLA modules' own fixed time, and the sampler's fixed and per-vocabulary
    parts (at this GPU's ``sampler_scale``).  # s"""
    fixed = co.layer_overhead_s * model.num_layers
    if model.is_moe and co.moe_expert_overhead_s:
        fixed += co.moe_expert_overhead_s * model.num_experts * (model.num_layers - model.num_dense_layers)
    if model.attention == "MLA" and co.mla_layer_overhead_s:
        fixed += co.mla_layer_overhead_s * sum(1 for lay in model.layer_specs if lay.kind in (LAYER_FULL, LAYER_SLIDING))
    return fixed + (co.sampling_step_s + co.sampling_vocab_s * model.vocab_size) * co.sampler_scale


def _mla_terms(model: ModelSpec, tp: int, peak: float, co: RooflineCoefficients, gemm_flops: float) -> tuple[float, float]:
    """MLA attention as vLLM runs it (DeepSeek-V2 / V3, Kimi), seconds per context token: ``(decode, prefill read)``.

    Decode takes the absorbed path: the query is projected into the latent space, so attention runs over the
    cached latent itself, ``2 h (kv_lora + rope)`` FLOP for QK and ``2 h kv_lora`` for AV per context token
    and layer, at ``mla_attention_efficiency`` of peak (FlashMLA / FlashAttention-MLA on Hopper reach about
    half, Triton MLA on an L40S a twentieth). Prefill takes the non-absorbed path: the cached latent of the
    whole context is up-projected to keys and values (``kv_b_proj``: ``2 kv_lora h (nope + v)`` FLOP a context
    token and layer, at the dense GEMMs' rate) before flash attention. Both ``(0, 0)`` for other models.  # s
    """
    if model.attention != "MLA" or not model.kv_lora_rank:
        return 0.0, 0.0
    h = model.num_attention_heads / tp
    lora, rope = model.kv_lora_rank, model.qk_rope_head_dim or 0
    nope, v = model.qk_nope_head_dim or 0, model.v_head_dim or model.qk_nope_head_dim or 0
    layers = sum(1 for lay in model.layer_specs if lay.kind in (LAYER_FULL, LAYER_SLIDING)) or model.num_layers
    decode = layers * (2.0 * h * (lora + rope) + 2.0 * h * lora)
    read = layers * 2.0 * lora * h * (nope + v)
    return decode / (peak * (co.mla_attention_efficiency or co.attention_efficiency)), read / gemm_flops


def _roofline_inputs(model: ModelSpec, gpu: GpuSpec, tp: int, coefficients: RooflineCoefficients | dict | None,
                     deployment: DeploymentSpec | None) -> tuple[RooflineCoefficients, DeploymentSpec, GpuPhysics]:
    """Checked inputs of :meth:`RooflineStepTime.from_specs`: the coefficients, the deployment (``tp`` in it) and
    the GPU's measured physics (applied beneath the given coefficients when those are a dict or None)."""
    if not isinstance(model, ModelSpec):
        raise CostModelError("a ModelSpec is required for the roofline model", field="model")
    if not isinstance(gpu, GpuSpec):
        raise CostModelError("a GpuSpec is required for the roofline model", field="gpu")
    if deployment is None:
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise CostModelError(f"must be a whole number >= 1, got {tp!r}", field="tp")
        deployment = DeploymentSpec(tensor_parallel_size=tp)
    tp = deployment.tensor_parallel_size
    physics = gpu_physics(gpu, tp)
    if coefficients is None or isinstance(coefficients, dict):
        coefficients = RooflineCoefficients.from_dict(model_coefficients(model, coefficients, gpu, tp))
    if not isinstance(coefficients, RooflineCoefficients):
        raise CostModelError("must be RooflineCoefficients or a dict of them", field="coefficients")
    if deployment.pipeline_parallel_size != 1:
        raise CostModelError("the roofline models tensor parallelism only", field="pipeline_parallel_size")
    check_parallelism(model, tp)
    if not gpu.bandwidth_tbps:
        raise CostModelError(f"{gpu.name} has no HBM bandwidth; the roofline needs one", field="gpu.bandwidth_tbps")
    if tp > 1 and not gpu.interconnect_gbps:
        raise CostModelError(f"{gpu.name} has no GPU-to-GPU bandwidth; needed for tp > 1", field="gpu.interconnect_gbps")
    return coefficients, deployment, physics


def _offload_per_token(model: ModelSpec, co: RooflineCoefficients, kv_bytes: float, block_size: int) -> float:
    """Seconds per new token of copying the KV cache to host memory: a filled block goes over one copy per
    attention layer and K/V (each a fixed ``kv_offload_copy_s``), shared by the block's tokens, and its bytes
    over the host link.  # s"""
    layers = sum(1 for lay in model.layer_specs if lay.kind in (LAYER_FULL, LAYER_SLIDING)) or model.num_layers
    copies = (1 if model.attention == "MLA" else 2) * layers
    return copies * co.kv_offload_copy_s / block_size + kv_bytes / (co.host_link_gbps * GIGA)


def _token_flops(model: ModelSpec) -> tuple[float, float, int]:
    """FLOP per token of the body (active parameters less embedding and LM head), FLOP per sampled request of
    the LM head, and the input embedding's parameters (0 when tied to the head)."""
    H, V = model.hidden_size, model.vocab_size
    _, active = estimate_num_parameters(model)
    if model.num_active_parameters:
        active = model.num_active_parameters
    embed = V * H
    lm_head = embed  # tied or not, the head is a vocab x hidden matmul
    in_embed = 0 if model.tie_word_embeddings else embed
    body = max(active - in_embed - lm_head, 0)
    body_flops = 2.0 * body  # FLOP per token
    head_flops = 2.0 * lm_head  # FLOP per sampled request
    return body_flops, head_flops, in_embed


def _allreduce_terms(model: ModelSpec, co: RooflineCoefficients, tp: int, compute_bytes: int,
                     link: float) -> tuple[float, float, float, float]:
    """Tensor-parallel all-reduce cost per step, fixed seconds and seconds per token, of the small-message path
    (a one-shot kernel: low latency, low bandwidth) and of the large-message path (NCCL's ring: higher latency,
    near the link's bandwidth); the step pays the faster (all 0 at tp 1).  # s"""
    if tp == 1:
        return 0.0, 0.0, 0.0, 0.0
    n_ar = co.allreduces_per_layer * model.num_layers
    act = co.activation_bytes or compute_bytes
    ring_bytes = n_ar * 2.0 * (tp - 1) / tp * model.hidden_size * act  # bytes per token over the links
    return (n_ar * co.allreduce_latency_s, ring_bytes / (link * co.interconnect_efficiency),
            n_ar * co.nccl_allreduce_latency_s, ring_bytes / (link * co.nccl_interconnect_efficiency))


@dataclass(frozen=True)
class RooflineStepTime(_Single):
    """Roofline step time of ``model`` on ``tp`` GPUs of ``gpu``.

    ``step = gemm + attention + moe + tp_comm + cpu``, each group bounded by its own roofline (see
    :mod:`simulator.clock.terms` and ``docs/cost-model.md``). Build with
    :meth:`from_specs`; the derived per-GPU figures are kept as attributes so
    the docs and a user can see them.

    Attributes
    ----------
    body_flops_per_token : float
        ``2 x`` active parameters without embedding and LM head.  # FLOP
    lm_head_flops_per_request : float  # FLOP
    attn_flops_per_context_token : float
        ``4 x heads x head_dim`` summed over full-attention layers, per query
        token per context token (QK^T and AV).  # FLOP
    weights_bytes, experts_bytes : float
        Per GPU, read once per step (experts: when all are touched).  # bytes
    kv_bytes_per_token_full : float
        Per GPU, full-attention layers.  # bytes
    peak_flops, hbm_bytes_per_s, link_bytes_per_s : float
        Per GPU.  # FLOP/s, bytes/s
    physics : GpuPhysics
        The GPU's measured coefficients and their source (:func:`simulator.clock.physics.gpu_physics`);
        ``physics_note`` says it in words.
    """

    model: ModelSpec
    gpu: GpuSpec
    tp: int
    coefficients: RooflineCoefficients
    terms: StepCostTerms
    body_flops_per_token: float
    lm_head_flops_per_request: float
    attn_flops_per_context_token: float
    weights_bytes: float
    experts_bytes: float
    kv_bytes_per_token_full: float
    flops_dtype: str
    peak_flops: float
    hbm_bytes_per_s: float
    link_bytes_per_s: float
    physics: GpuPhysics | None = None

    @property
    def physics_note(self) -> str:
        """Where this GPU's efficiencies come from, for an answer (``"timed from data-sheet peaks; not checked
        against a measurement"`` when nothing was measured on it)."""
        return (self.physics or GpuPhysics()).note

    @classmethod
    def from_specs(cls, model: ModelSpec, gpu: GpuSpec, tp: int = 1,
                   coefficients: RooflineCoefficients | dict | None = None,
                   deployment: DeploymentSpec | None = None, cpu_offload: bool = False) -> RooflineStepTime:
        """Derive the roofline terms.

        Parameters
        ----------
        model, gpu : ModelSpec, GpuSpec
        tp : int
            Tensor-parallel degree (ignored when ``deployment`` is given).
        coefficients : RooflineCoefficients or dict, optional
            Defaults: :class:`RooflineCoefficients()`, with the sampler of the model's own path
            (``model.sampling``, from its ``generation_config.json``) unless the dict sets the
            ``sampling_*`` fields; a :class:`RooflineCoefficients` is taken as it is.
        deployment : DeploymentSpec, optional
            For ``dtype`` / ``kv_cache_dtype``; default bf16-style ``auto``.
        cpu_offload : bool
            The deployment copies every filled KV block to host memory (vLLM's CPU
            offloading): each new token's KV costs its share of the per-layer copies
            (:func:`_offload_per_token`) on top of the HBM write.
        """
        co, deployment, physics = _roofline_inputs(model, gpu, tp, coefficients, deployment)
        tp = deployment.tensor_parallel_size
        cdt = compute_dtype(model, deployment)
        kvdt = resolve_kv_dtype(model, deployment)
        flops_dtype, tflops, mfu, bw_eff = _flops_dtype(model, gpu, deployment.dtype if deployment.dtype != "auto" else cdt, co)
        peak = tflops * TERA  # FLOP/s per GPU
        hbm = gpu.bandwidth_tbps * TERA  # bytes/s per GPU
        # interconnect_gbps is the total (both directions) per GPU, as data sheets quote NVLink
        link = (gpu.interconnect_gbps or 0.0) / 2.0 * GIGA  # bytes/s per direction

        body_flops, head_flops, in_embed = _token_flops(model)

        full_attn, kv_full, sliding = _attention_per_token(model, kvdt, tp)
        windows = tuple(sorted(sliding))

        cb = DTYPE_BYTES[cdt]
        total_w = weights_bytes_per_gpu(model, deployment, buffers=False)  # streamed: no vision tower, rotary cache
        w_read = total_w - (in_embed * cb / tp)  # the input embedding is a gather, not read whole
        experts_bytes, keep, expert_flops = _experts(model, total_w)
        w_read -= experts_bytes
        dense_flops = max(body_flops - expert_flops, 0.0)

        eff_flops = peak * mfu  # FLOP/s
        attn_flops = peak * co.attention_efficiency  # FLOP/s
        kv_hbm = hbm * co.kv_bandwidth_efficiency  # bytes/s, KV reads and writes
        tok_s = dense_flops / tp / eff_flops
        expert_tok_s = expert_flops / tp / (peak * (co.expert_mfu or co.mfu) * (mfu / co.mfu))
        attn_full_s = full_attn / tp / attn_flops
        mla_decode_s, mla_read_s = _mla_terms(model, tp, peak, co, eff_flops)
        kv_read_full_s = kv_full / kv_hbm
        attn_sl = tuple(sliding[w][0] / tp / attn_flops for w in windows)
        kv_sl = tuple(sliding[w][1] / kv_hbm for w in windows)
        kv_all = kv_full + sum(sliding[w][1] for w in windows)
        comm_fixed, comm_tok, large_fixed, large_tok = _allreduce_terms(model, co, tp, cb, link)
        terms = StepCostTerms(
            tok_s=tok_s, gemm_fixed_s=tok_s * co.gemm_half_tokens, req_s=head_flops / tp / eff_flops,
            attn_full_s=attn_full_s, attn_sliding_s=attn_sl, windows=windows,
            weights_s=max(w_read, 0.0) / (hbm * bw_eff), experts_s=experts_bytes / (hbm * co.expert_bandwidth_efficiency), expert_keep=keep,
            expert_tok_s=expert_tok_s, **_expert_padding(model, co, expert_tok_s),
            kv_read_full_s=max(kv_read_full_s, mla_read_s), kv_read_sliding_s=kv_sl,
            dec_attn_s=max(kv_read_full_s, mla_decode_s or attn_full_s),
            dec_sliding_s=tuple(max(k, a) for k, a in zip(kv_sl, attn_sl)), kv_write_s=kv_all / kv_hbm + (_offload_per_token(model, co, kv_all, deployment.block_size) if cpu_offload else 0.0),
            comm_fixed_s=comm_fixed, comm_tok_s=comm_tok, comm_large_fixed_s=large_fixed, comm_large_tok_s=large_tok,
            gpu_fixed_s=_fixed_gpu_seconds(model, co), gpu_req_s=co.sampling_request_vocab_s * co.sampler_scale * model.vocab_size,
            base_s=co.step_overhead_s,
            per_token_s=co.per_token_overhead_s, per_req_s=co.per_request_overhead_s,
            serve_request_s=co.serve_request_s, serve_prompt_token_s=co.serve_prompt_token_s,
            serve_output_token_s=co.serve_output_token_s, serve_async_lag_steps=co.async_lag_steps,
        )
        return cls(model=model, gpu=gpu, tp=tp, coefficients=co, terms=terms,
                   body_flops_per_token=body_flops, lm_head_flops_per_request=head_flops,
                   attn_flops_per_context_token=full_attn, weights_bytes=max(w_read, 0.0),
                   experts_bytes=experts_bytes, kv_bytes_per_token_full=kv_full, flops_dtype=flops_dtype,
                   peak_flops=peak, hbm_bytes_per_s=hbm, link_bytes_per_s=link, physics=physics)

    def prefill_time(self, tokens: int, start: int = 0) -> float:
        """Seconds of one step that prefills ``tokens`` prompt tokens of one request after ``start`` cached ones.  # s"""
        attn = tokens * start + tokens * (tokens + 1) / 2.0
        return float(self.step_time(tokens, attn, 0, 0, 1, prefill_kv_tokens=start + tokens)[0])

    def decode_step_time(self, batch: int, context: int) -> float:
        """Seconds of one decode step of ``batch`` requests each attending to ``context`` tokens.  # s"""
        return float(self.step_time(0, 0, batch, batch * context, batch)[0])


STEP_TIME_KINDS = ("roofline", "linear")


def build_step_time_model(kind: str, *, model: ModelSpec | None = None, gpu: GpuSpec | None = None, tp: int = 1,
                          coefficients: RooflineCoefficients | dict | None = None,
                          linear: StepTimeModel | dict | None = None,
                          deployment: DeploymentSpec | None = None) -> RooflineStepTime | LinearStepTime:
    """A single-configuration step-time model.

    Parameters
    ----------
    kind : {"roofline", "linear"}
    model, gpu, tp, coefficients, deployment
        For ``roofline`` (see :meth:`RooflineStepTime.from_specs`).
    linear : StepTimeModel or dict
        For ``linear``; default ``StepTimeModel()`` (the oracle's default).

    Stack several with :meth:`BatchStepTime.from_models` to evaluate a batch.
    """
    if kind == "roofline":
        return RooflineStepTime.from_specs(model, gpu, tp, coefficients, deployment)
    if kind == "linear":
        return LinearStepTime(StepTimeModel() if linear is None else linear)
    raise CostModelError(f"must be one of {', '.join(STEP_TIME_KINDS)}, got {kind!r}", field="kind")


COST_MODEL_KINDS = ("linear", "roofline", "terms")


def parse_cost_model(value: Any):
    """A :class:`simulator.clock.cost_model.StepCostTerms` from itself, a model with ``terms``, or a config object.

    Config objects: ``{"kind": "linear", "base_s", "per_token_s", "per_req_s"}``;
    ``{"kind": "roofline", "model": <HF config.json object>, "gpu": <GpuSpec
    fields>, "tp": 1, "coefficients": {...}}``; ``{"kind": "terms", ...}``
    (the coefficient row itself, as :meth:`EngineConfig.to_dict` writes it).
    """
    if isinstance(value, StepCostTerms):
        return value
    terms = getattr(value, "terms", None)
    if isinstance(terms, StepCostTerms):
        return terms
    if not isinstance(value, dict):
        raise ConfigError('must be an object with "kind" (linear, roofline or terms)', field="cost_model")
    data = dict(value)
    kind = data.pop("kind", None)
    try:
        if kind == "terms":
            return StepCostTerms.from_dict(data)
        if kind == "linear":
            bad = sorted(set(data) - {"base_s", "per_token_s", "per_req_s"})
            if bad:
                raise ConfigError(f"{unknown_message(bad[0], ['base_s', 'per_token_s', 'per_req_s'], what='field for the linear model')}", field=f"cost_model.{bad[0]}")
            return build_step_time_model("linear", linear=StepTimeModel(**data)).terms
        if kind == "roofline":
            bad = sorted(set(data) - {"model", "generation_config", "gpu", "tp", "coefficients"})
            if bad:
                raise ConfigError(f"{unknown_message(bad[0], ['model', 'generation_config', 'gpu', 'tp', 'coefficients'], what='field for the roofline model')}", field=f"cost_model.{bad[0]}")
            if not isinstance(data.get("model"), dict):
                raise ConfigError("the model's config.json object is required", field="cost_model.model")
            if not isinstance(data.get("gpu"), dict):
                raise ConfigError("an object with name, memory_gib, bandwidth_tbps, bf16_tflops ... is required", field="cost_model.gpu")
            try:
                model = parse_hf_config(data["model"], generation_config=data.get("generation_config"))
            except (SpecError, TypeError, ValueError) as exc:  # the generation_config's fields sit beside the model
                inner = getattr(exc, "field", None) or ""
                raise ConfigError.nested(exc, "cost_model" if inner.startswith("generation_config")
                                         else "cost_model.model") from exc
            try:
                gpu = GpuSpec.from_dict(data["gpu"])
            except (SpecError, TypeError, ValueError) as exc:
                raise ConfigError.nested(exc, "cost_model.gpu") from exc
            return build_step_time_model("roofline", model=model, gpu=gpu, tp=data.get("tp", 1),
                                         coefficients=data.get("coefficients")).terms
    except CostModelError as exc:  # a field of the cost model's own (cost_model.k) as it is; else under cost_model
        inner = exc.field or ""
        raise (ConfigError(exc.message, field=inner) if inner == "cost_model" or inner.startswith("cost_model.")
               else ConfigError(str(exc), field="cost_model")) from exc
    raise ConfigError(f"must be one of {', '.join(COST_MODEL_KINDS)}, got {kind!r}", field="cost_model.kind")


__all__ = [
    "CostModelError",
    "RooflineCoefficients",
    "StepCostTerms",
    "BatchStepTime",
    "LinearStepTime",
    "RooflineStepTime",
    "STEP_TIME_KINDS",
    "build_step_time_model",
    "COST_MODEL_KINDS",
    "parse_cost_model",
    "SAMPLER_PATHS",
    "DEFAULT_SAMPLER_PATH",
    "sampling_coefficients",
    "model_coefficients",
    "gemm_format",
]
