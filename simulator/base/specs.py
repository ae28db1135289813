"""Plain spec objects for closed-form sizing: a model, a GPU, a deployment.

These are the inputs of :func:`simulator.sizing.closed_form.plan`. They are frozen
dataclasses that validate on construction; every error is a
:class:`SpecError` whose message starts with the offending field name, so a
form or an API can attach it to that field::

    SpecError("num_kv_heads: 7 does not divide num_attention_heads 32")

The Django catalog (``gpuprofiles/``) converts its rows into these objects and
:mod:`simulator.sizing.hf_config` builds a :class:`ModelSpec` from a Hugging Face
``config.json``. Nothing here imports Django.

Units: memory in GiB (2**30 bytes) unless a name says ``_mib`` (2**20 bytes) or
``_bytes``; bandwidth in TB/s (10**12 bytes/s); interconnect in GB/s;
compute in dense TFLOPS; price in USD per GPU-hour.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from simulator.base.config_base import unknown_field, unknown_message
from simulator.base.errors import FieldError
from simulator.base.sampling import SAMPLER_PATHS

GIB = 2**30  # bytes
MIB = 2**20  # bytes


class SpecError(FieldError):
    """A model, GPU or deployment spec that cannot be sized; the message names the field."""


# --------------------------------------------------------------------------
# dtypes
# --------------------------------------------------------------------------

#: Canonical dtype name -> bytes per element (before any scale overhead).
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
    "nvfp4": 0.5,
    "mxfp4": 0.5,
}

_DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "float": "fp32",
    "torch.float32": "fp32",
    "bfloat16": "bf16",
    "torch.bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "torch.float16": "fp16",
    "float8": "fp8",
    "float8_e4m3fn": "fp8_e4m3",
    "e4m3": "fp8_e4m3",
    "fp8_e4m3fn": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
    "float8_e5m2": "fp8_e5m2",
    "uint8": "int8",
    "w8a8": "int8",
    "awq": "int4",
    "gptq": "int4",
    "w4a16": "int4",
    "float4": "fp4",
}

#: KV cache dtypes a deployment may ask for ("auto" = the model's dtype).
KV_CACHE_DTYPES = ("auto", "fp32", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "int8", "int4", "fp4", "nvfp4")

#: Weight dtypes a deployment may ask for (vLLM ``--dtype``; ``fp8``, ``int8``, ``int4`` and the 4-bit floats as
#: on-the-fly quantization): every dtype the sizing models (:data:`DTYPE_BYTES`), the common ones first, as the sizing
#: form offers and ``POST /api/plan/`` accepts them. A quantized checkpoint keeps its format (``quantization``).
WEIGHT_DTYPES = ("auto", "bf16", "fp16", "fp32", "fp8", "int4",
                 *(d for d in DTYPE_BYTES if d not in ("bf16", "fp16", "fp32", "fp8", "int4")))

#: KV block sizes (tokens) vLLM's CacheConfig accepts: it declares ``BlockSize = Literal[1, 8, 16, 32, 64, 128, 256]``
#: and types ``CacheConfig.block_size`` with it (``vllm/config/cache.py``, vLLM 0.11; 0.8-0.10 had
#: ``Literal[1, 8, 16, 32, 64, 128]``; ``--block-size`` takes the same choices). What a person types is held to it
#: (:func:`block_size_problem`); a :class:`DeploymentSpec` itself takes any size up to ``DEPLOYMENT_LIMITS``, as
#: vLLM's own larger blocks for hybrid models are.
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)


def block_size_problem(value: Any) -> str | None:
    """A message when ``value`` is not a block size vLLM accepts, else None (booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int) or value not in VLLM_BLOCK_SIZES:
        sizes = ", ".join(str(b) for b in VLLM_BLOCK_SIZES)
        return f"must be one of vLLM's block sizes ({sizes} tokens; vLLM's CacheConfig refuses others), got {value!r}"
    return None


#: Checkpoint quantization methods understood by the weights model (see simulator/sizing/quantization.py).
QUANTIZATIONS = (None, "fp8", "int8", "awq", "gptq", "int4", "mxfp4", "nvfp4", "fp4", "compressed-tensors",
                 "bitsandbytes")

ATTENTION_KINDS = ("MHA", "GQA", "MQA", "MLA")

#: Most decoder layers a model may have. The largest published models have about 160; every per-layer step (the
#: layer kinds an import builds, each read of a profile, a page's KV figures) costs ~10 us a layer, so 100,000
#: layers (the bound before) made a 200-byte config.json import take 1.3-3.1 s and its page 4-9 s.
MAX_LAYERS = 1_000

LAYER_FULL = "full"
LAYER_SLIDING = "sliding"
LAYER_LINEAR = "linear"
LAYER_KINDS = (LAYER_FULL, LAYER_SLIDING, LAYER_LINEAR)


def normalize_dtype(value: Any, field_name: str, *, allow_auto: bool = False) -> str:
    """Return the canonical dtype name (``"bf16"``, ``"fp8"``, ...) or raise :class:`SpecError`.

    Parameters
    ----------
    value : str
        Any common spelling: ``bfloat16``, ``torch.float16``, ``half``, ``fp8_e4m3``...
    field_name : str
        Named in the error message.
    allow_auto : bool
        Accept ``"auto"`` (returned as is).
    """
    if not isinstance(value, str) or not value.strip():
        raise SpecError("must be a dtype name such as bf16, fp16, fp8", field=field_name)
    v = value.strip().lower()
    if allow_auto and v == "auto":
        return "auto"
    v = _DTYPE_ALIASES.get(v, v)
    if v not in DTYPE_BYTES:
        known = ", ".join(sorted(set(DTYPE_BYTES) | ({"auto"} if allow_auto else set())))
        raise SpecError(f"unknown dtype {value!r} (known: {known})", field=field_name)
    return v


#: The largest value of each sized field a :class:`DeploymentSpec` accepts (sensible caps, not vLLM's, which has
#: none below its process limits: an absurd size gets a message, not a long computation). Its lower bounds are
#: its own rules (1 for a size, 0 for memory; ``available_kv_gib`` and ``cudagraph_gib`` down to minus their cap:
#: vLLM prints negative figures). The planner's sizing form and ``POST /api/plan/`` take their bounds from here
#: (:data:`planner.sizing.services.LIMITS`), so a range is written once.
DEPLOYMENT_LIMITS: dict[str, float] = {
    "tensor_parallel_size": 512,
    "pipeline_parallel_size": 128,
    "data_parallel_size": 1024,  # DP ranks
    "block_size": 1024,  # tokens
    "max_model_len": 10_000_000,  # tokens
    "max_num_batched_tokens": 10_000_000,  # tokens
    "max_num_seqs": 1_000_000,  # requests
    "max_loras": 4096,
    "max_lora_rank": 4096,
    "cpu_tier_gib": 1_048_576.0,  # GiB (1 PiB)
    "disk_tier_gib": 1_048_576.0,  # GiB
    "weights_gib": 100_000.0,  # GiB
    "available_kv_gib": 100_000.0,  # GiB
    "activation_gib": 100_000.0,  # GiB
    "non_torch_gib": 100_000.0,  # GiB
    "cudagraph_gib": 100_000.0,  # GiB
}


def _whole(obj: Any, name: str, lo: int, hi: int | None = None, *, optional: bool = False) -> None:
    v = getattr(obj, name)
    if v is None and optional:
        return
    if isinstance(v, bool) or not isinstance(v, int):
        raise SpecError(f"must be a whole number, got {v!r}", field=name)
    if v < lo or (hi is not None and v > hi):
        limit = f"between {lo:,} and {hi:,}" if hi is not None else f">= {lo:,}"
        raise SpecError(f"must be {limit}, got {v:,}", field=name)


def _plain(x: float) -> str:
    """A number as a person reads it: 1,048,576 and 0.05, not 1.04858e+06."""
    return f"{x:,.0f}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:,g}"


def _number(obj: Any, name: str, *, lo: float = 0.0, lo_open: bool = False, hi: float | None = None,
            optional: bool = True) -> None:
    v = getattr(obj, name)
    if v is None:
        if optional:
            return
        raise SpecError("is required", field=name)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise SpecError(f"must be a finite number, got {v!r}", field=name)
    if (v <= lo) if lo_open else (v < lo):
        raise SpecError(f"must be {'>' if lo_open else '>='} {_plain(lo)}, got {_plain(v)}", field=name)
    if hi is not None and v > hi:
        raise SpecError(f"must be at most {_plain(hi)}, got {_plain(v)}", field=name)
    object.__setattr__(obj, name, float(v))


# --------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------


class _FromDict:
    """``from_dict``: a spec from its JSON object (what ``to_dict`` / ``asdict`` wrote), every key checked."""

    @classmethod
    def from_dict(cls, data: Any):
        """The spec of ``data`` (a spec already is returned as it is); :class:`SpecError` naming an unknown key
        (with the closest field) or the field a value breaks."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise SpecError(f"must be a JSON object of {cls.__name__} fields, got {type(data).__name__}")
        bad = unknown_field(cls, data)
        if bad:
            raise SpecError(bad[1], field=bad[0])
        return cls(**data)


@dataclass(frozen=True)
class LayerSpec(_FromDict):
    """One decoder layer as the KV cache sees it.

    Parameters
    ----------
    kind : {"full", "sliding", "linear"}
        ``full``: attention over the whole context (KV grows with tokens).
        ``sliding``: attention over the last ``window`` tokens (vLLM keeps at
        most ``window - 1 + max_num_batched_tokens`` tokens of it per request).
        ``linear``: linear attention / Mamba / Gated DeltaNet: a fixed state per
        request, no per-token KV.
    window : int, optional
        Sliding window in tokens; required for ``sliding``.
    state_bytes : int
        Fixed per-request state of a ``linear`` layer, whole layer (all TP
        ranks together).  # bytes
    num_kv_heads, head_dim : int, optional
        Per-layer override of the model's KV heads / head size (Gemma 4's
        global layers use 2 KV heads of 512).
    """

    kind: str = LAYER_FULL
    window: int | None = None
    state_bytes: int = 0
    num_kv_heads: int | None = None
    head_dim: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in LAYER_KINDS:
            raise SpecError(f"must be one of {', '.join(LAYER_KINDS)}, got {self.kind!r}", field="layers.kind")
        if self.kind == LAYER_SLIDING:
            if self.window is None:
                raise SpecError("a sliding-window layer needs a window in tokens", field="layers.window")
            _whole_named(self.window, "layers.window", 1, 100_000_000)
        elif self.window is not None:
            _whole_named(self.window, "layers.window", 1, 100_000_000)
        _whole_named(self.state_bytes, "layers.state_bytes", 0, 2**40)
        if self.num_kv_heads is not None:
            _whole_named(self.num_kv_heads, "layers.num_kv_heads", 1, 100_000)
        if self.head_dim is not None:
            _whole_named(self.head_dim, "layers.head_dim", 1, 100_000)


def _whole_named(v: Any, name: str, lo: int, hi: int) -> None:
    """A whole number in ``[lo, hi]`` (the upper bounds keep absurd configs out of 64-bit database columns)."""
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise SpecError(f"must be a whole number >= {lo}, got {v!r}", field=name)
    if v > hi:
        raise SpecError(f"{v:,} is more than the limit of {hi:,}", field=name)


@dataclass(frozen=True)
class ModelSpec(_FromDict):
    """A decoder-only language model, as far as memory sizing needs it.

    Parameters
    ----------
    name : str
    num_layers : int
        Decoder layers (``num_hidden_layers``).
    hidden_size : int
    num_attention_heads : int
        Query heads.
    num_kv_heads : int
        KV heads of a full-attention layer (ignored for MLA, which caches one latent).
    head_dim : int
        Size of one attention head (``hidden_size / num_attention_heads`` unless the config says otherwise).
    attention : {"MHA", "GQA", "MQA", "MLA"}
        Derived from the heads when left empty.
    kv_lora_rank, qk_rope_head_dim : int, optional
        MLA only: the cached latent is ``kv_lora_rank + qk_rope_head_dim`` values per token per layer.
    q_lora_rank, qk_nope_head_dim, v_head_dim : int, optional
        MLA only, used to count parameters.
    layers : tuple of LayerSpec
        Per-layer kinds; empty means every layer is full attention.
    vocab_size, intermediate_size : int
    num_experts, num_experts_per_tok, moe_intermediate_size, num_shared_experts : int
        Mixture of experts (0 = dense). ``moe_intermediate_size`` defaults to ``intermediate_size``.
    shared_expert_intermediate_size : int, optional
        Intermediate size of each shared expert (defaults to ``moe_intermediate_size``).
    num_dense_layers : int
        Layers with a dense FFN in an MoE model (DeepSeek ``first_k_dense_replace``).
    gated_mlp : bool
        SwiGLU-style MLP with gate, up and down projections (False: GPT-2 style up/down).
    attention_bias : bool
        q/k/v (and o) projections carry a bias (parameter count only).
    tie_word_embeddings : bool
    num_parameters, num_active_parameters : int, optional
        Total and per-token active parameters; estimated from the config when absent.
    weights_dtype : str
        Dtype of the unquantized tensors (``torch_dtype``), e.g. ``bf16``.
    quantization : str, optional
        Checkpoint quantization: ``fp8``, ``int8``, ``awq``, ``gptq``, ``int4``, ``mxfp4`` (MoE experts only, as
        in gpt-oss), ``nvfp4``, ``compressed-tensors``, ``bitsandbytes`` (details in
        :mod:`simulator.sizing.quantization`).
    quant_bits, quant_group_size : int, optional
        Weight bits and weights per scale along the input dimension (``None`` = the method's default;
        ``quant_group_size`` -1 = one scale per output channel).
    quant_scheme : str, optional
        Format within a method: ``w4a16``, ``w8a8-int8``, ``w8a8-fp8``, ``nvfp4``, ``nf4``, ``fp8-block``,
        ``fp8-dynamic``, ``fp8-static``... (``None`` = the method's default).
    quant_ignore : tuple of str
        Modules the checkpoint leaves unquantized (``ignore`` / ``modules_to_not_convert``).
    mm_tokens_per_item : int, optional
        Multimodal models: embedding tokens of the largest image (from ``vision_config``); sizes vLLM's
        encoder cache.  # tokens
    max_position_embeddings : int, optional
        Longest context the model supports (vLLM's default ``max_model_len``).
    sampling : str, optional
        The sampler path (a key of :data:`simulator.base.sampling.SAMPLER_PATHS`) that vLLM gives this model's
        requests when they set no sampling parameters: the one its ``generation_config.json`` asks for
        (:func:`simulator.base.sampling.sampler_path`). None: not known; the clock then times
        :data:`simulator.base.sampling.DEFAULT_SAMPLER_PATH`.
    vision_parameters : int, optional
        Multimodal checkpoints: parameters of the vision tower and projector vLLM loads beside the language
        model (counted from ``vision_config``; ``num_parameters`` stays the language model's).  # parameters
    rope_cache_elements : int, optional
        Elements of vLLM's rotary ``cos_sin_cache`` buffers (``positions x rotary_dim`` per distinct RoPE),
        loaded with the weights on every GPU; None: ``max_position_embeddings x`` the rotary width; 0: none.
    config_notes : tuple of str
        What :func:`simulator.sizing.hf_config.parse_hf_config` assumed where the config was silent.
    """

    name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int | None = None
    attention: str = ""
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    q_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    layers: tuple[LayerSpec, ...] = ()
    vocab_size: int = 0
    intermediate_size: int = 0
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int | None = None
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int | None = None
    num_dense_layers: int = 0
    attention_bias: bool = False
    gated_mlp: bool = True
    tie_word_embeddings: bool = False
    num_parameters: int | None = None
    num_active_parameters: int | None = None
    weights_dtype: str = "bf16"
    quantization: str | None = None
    max_position_embeddings: int | None = None
    quant_bits: int | None = None
    quant_group_size: int | None = None
    quant_scheme: str | None = None
    quant_ignore: tuple[str, ...] = ()
    mm_tokens_per_item: int | None = None
    sampling: str | None = None
    vision_parameters: int | None = None
    rope_cache_elements: int | None = None
    config_notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # checked in this order: the first problem found is the one reported
        self._check_shape()
        self._check_attention()
        self._check_sizes()
        self._check_layers()
        self._check_parameters()
        self._check_quantization()
        if self.sampling is not None and self.sampling not in SAMPLER_PATHS:
            raise SpecError(f"must be one of {', '.join(SAMPLER_PATHS)}, got {self.sampling!r}", field="sampling")

    def _check_shape(self) -> None:
        """Name, layers, hidden size, heads; ``head_dim`` derived when absent."""
        if not isinstance(self.name, str) or not self.name.strip():
            raise SpecError("must be a non-empty string", field="name")
        _whole(self, "num_layers", 1, MAX_LAYERS)
        _whole(self, "hidden_size", 1, 10_000_000)
        _whole(self, "num_attention_heads", 1, 100_000)
        _whole(self, "num_kv_heads", 1, 100_000)
        if self.head_dim is None:
            if self.hidden_size % self.num_attention_heads:
                raise SpecError(
                    f"not given and hidden_size {self.hidden_size} is not a multiple of "
                    f"num_attention_heads {self.num_attention_heads}"
                , field="head_dim")
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)
        _whole(self, "head_dim", 1, 100_000)

    def _check_attention(self) -> None:
        """The attention kind (derived from the heads when empty) and its own fields."""
        attn = (self.attention or "").upper()
        if not attn:
            if self.kv_lora_rank:
                attn = "MLA"
            elif self.num_kv_heads == self.num_attention_heads:
                attn = "MHA"
            elif self.num_kv_heads == 1:
                attn = "MQA"
            else:
                attn = "GQA"
        if attn not in ATTENTION_KINDS:
            raise SpecError(f"must be one of {', '.join(ATTENTION_KINDS)}, got {self.attention!r}", field="attention")
        object.__setattr__(self, "attention", attn)
        if attn == "MLA":
            _whole(self, "kv_lora_rank", 1, 1_000_000)
            _whole(self, "qk_rope_head_dim", 0, 1_000_000)
        else:
            if self.num_kv_heads > self.num_attention_heads:
                raise SpecError(
                    f"{self.num_kv_heads} is more than num_attention_heads {self.num_attention_heads}"
                , field="num_kv_heads")
            if self.num_attention_heads % self.num_kv_heads:
                raise SpecError(
                    f"{self.num_kv_heads} does not divide num_attention_heads {self.num_attention_heads}"
                , field="num_kv_heads")

    def _check_sizes(self) -> None:
        """Optional MLA sizes, vocabulary, FFN and mixture-of-experts counts."""
        for name in ("kv_lora_rank", "qk_rope_head_dim", "q_lora_rank", "qk_nope_head_dim", "v_head_dim",
                     "max_position_embeddings", "moe_intermediate_size", "shared_expert_intermediate_size"):
            _whole(self, name, 0, 100_000_000, optional=True)
        _whole(self, "vocab_size", 0, 100_000_000)
        _whole(self, "intermediate_size", 0, 100_000_000)
        _whole(self, "num_experts", 0, 1_000_000)
        _whole(self, "num_experts_per_tok", 0, 1_000_000)
        _whole(self, "num_shared_experts", 0, 1_000_000)
        _whole(self, "num_dense_layers", 0, self.num_layers)
        if self.num_experts and not self.num_experts_per_tok:
            raise SpecError("an MoE model needs the number of experts per token", field="num_experts_per_tok")
        if self.num_experts_per_tok > max(self.num_experts, 0) and self.num_experts:
            raise SpecError(
                f"{self.num_experts_per_tok} is more than num_experts {self.num_experts}"
            , field="num_experts_per_tok")

    def _check_layers(self) -> None:
        """Per-layer kinds: LayerSpec entries (or dicts), one per layer when given."""
        layers = []
        for i, lay in enumerate(self.layers or ()):
            try:
                layers.append(LayerSpec.from_dict(lay) if isinstance(lay, dict) else lay)
            except SpecError as exc:
                raise SpecError.nested(exc, f"layers[{i}]", join=".") from None
        layers = tuple(layers)
        for lay in layers:
            if not isinstance(lay, LayerSpec):
                raise SpecError("each entry must be a LayerSpec or an object with kind/window/state_bytes", field="layers")
        if layers and len(layers) != self.num_layers:
            raise SpecError(f"{len(layers)} layer kinds given for num_layers {self.num_layers}", field="layers")
        object.__setattr__(self, "layers", layers)

    def _check_parameters(self) -> None:
        """Boolean flags, parameter counts and the weights' dtype."""
        for name in ("attention_bias", "tie_word_embeddings", "gated_mlp"):
            if not isinstance(getattr(self, name), bool):
                raise SpecError("must be true or false", field=name)
        _whole(self, "num_parameters", 1, 10**15, optional=True)
        _whole(self, "num_active_parameters", 1, 10**15, optional=True)
        if self.num_parameters and self.num_active_parameters and self.num_active_parameters > self.num_parameters:
            raise SpecError(
                f"{self.num_active_parameters:,} is more than num_parameters "
                f"{self.num_parameters:,}"
            , field="num_active_parameters")
        object.__setattr__(self, "weights_dtype", normalize_dtype(self.weights_dtype, "weights_dtype"))

    def _check_quantization(self) -> None:
        """Quantization method (aliases folded), bits, group size, ignored modules, multimodal tokens."""
        q = self.quantization
        if q is not None:
            if not isinstance(q, str):
                raise SpecError(f"must be one of {', '.join(x for x in QUANTIZATIONS if x)}", field="quantization")
            q = q.strip().lower() or None
            if q in ("fp8_e4m3", "e4m3", "float8", "modelopt", "compressed-tensors-fp8"):
                q = "fp8"
            if q is not None and q not in QUANTIZATIONS:
                raise SpecError(f"unknown method {self.quantization!r} "
                                f"(known: {', '.join(x for x in QUANTIZATIONS if x)})", field="quantization")
            object.__setattr__(self, "quantization", q)
        if self.quant_bits is not None:
            _whole(self, "quant_bits", 1, 32)
        if self.quant_group_size is not None and self.quant_group_size not in (-1, 0):
            _whole(self, "quant_group_size", 1, 10_000_000)
        object.__setattr__(self, "quant_ignore", tuple(str(x) for x in (self.quant_ignore or ())))
        _whole(self, "mm_tokens_per_item", 1, 10_000_000, optional=True)
        _whole(self, "vision_parameters", 1, 10**13, optional=True)
        if self.rope_cache_elements is not None and self.rope_cache_elements != 0:
            _whole(self, "rope_cache_elements", 1, 10**13)
        object.__setattr__(self, "config_notes", tuple(str(x) for x in (self.config_notes or ())))

    # -- derived views ------------------------------------------------------

    @property
    def layer_specs(self) -> tuple[LayerSpec, ...]:
        """Per-layer specs, with the implicit all-full-attention default expanded."""
        return self.layers or tuple(LayerSpec() for _ in range(self.num_layers))

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_hybrid(self) -> bool:
        """True when layers are not all full attention (sliding window or linear layers present)."""
        return any(lay.kind != LAYER_FULL for lay in self.layers)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------
# GPU
# --------------------------------------------------------------------------

#: nvidia-smi total minus what torch/vLLM reports as total, observed 0.44-0.85 GiB
#: (H100 79.65 vs 79.18, A100-80 80.00 vs 79.15, L40S 44.99 vs 44.42, T4 15.00 vs 14.56).
DRIVER_RESERVED_GIB = 0.5  # GiB


@dataclass(frozen=True)
class GpuSpec(_FromDict):
    """One GPU model.

    Parameters
    ----------
    name : str
    memory_gib : float, optional
        Total memory as torch / vLLM see it (``torch.cuda.mem_get_info()[1]``,
        vLLM's ``total_gpu_memory``); this is what ``gpu_memory_utilization``
        multiplies. When absent it is estimated as
        ``memory_mib / 1024 - DRIVER_RESERVED_GIB`` and
        ``memory_gib_estimated`` is set.  # GiB
    memory_mib : float, optional
        Total as ``nvidia-smi`` reports it.  # MiB
    bandwidth_tbps : float, optional
        HBM bandwidth.  # TB/s
    bf16_tflops, fp8_tflops, fp4_tflops : float, optional
        Dense tensor throughput.  # TFLOPS
    interconnect_gbps : float, optional
        GPU-to-GPU bandwidth per GPU.  # GB/s
    price_per_hour : float, optional
        Cloud price per GPU-hour.  # USD
    measured : dict, optional
        The clock's figures measured on this GPU (:data:`GPU_MEASURED_FIELDS`: achieved bandwidths and
        GEMM / attention efficiencies as fractions of the peaks above, fixed kernel times in seconds,
        the sampler's time as a multiple of the H100's), e.g. ``{"bandwidth_efficiency": 0.71}``. They
        replace the shipped measurements of a GPU of the same name (``simulator/data/gpu_physics.json``);
        a GPU with neither is timed from its data-sheet peaks and every answer says so. Stored as sorted
        ``(name, value)`` pairs; :attr:`measured_figures` gives the dict.
    measured_source : str
        Where ``measured`` comes from (a benchmark, a profile run), shown beside the answers.
    """

    name: str
    memory_gib: float | None = None
    memory_mib: float | None = None
    bandwidth_tbps: float | None = None
    bf16_tflops: float | None = None
    fp8_tflops: float | None = None
    fp4_tflops: float | None = None
    interconnect_gbps: float | None = None
    price_per_hour: float | None = None
    memory_gib_estimated: bool = False
    measured: Any = ()
    measured_source: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise SpecError("must be a non-empty string", field="name")
        object.__setattr__(self, "measured", check_measured(self.measured))
        if not isinstance(self.measured_source, str) or len(self.measured_source) > 2000:
            raise SpecError("must be a text of at most 2,000 characters", field="measured_source")
        _number(self, "memory_mib", lo=0.0, lo_open=True, hi=100 * 1024 * 1024)
        _number(self, "memory_gib", lo=0.0, lo_open=True, hi=100 * 1024)
        if self.memory_gib is None:
            if self.memory_mib is None:
                raise SpecError("is required (or give memory_mib as nvidia-smi reports it)", field="memory_gib")
            est = self.memory_mib / 1024 - DRIVER_RESERVED_GIB
            if est <= 0:
                raise SpecError(f"{self.memory_mib:g} MiB is too small", field="memory_mib")
            object.__setattr__(self, "memory_gib", est)
            object.__setattr__(self, "memory_gib_estimated", True)
        for name in ("bandwidth_tbps", "bf16_tflops", "fp8_tflops", "fp4_tflops", "interconnect_gbps"):
            _number(self, name, lo=0.0, lo_open=True)
        _number(self, "price_per_hour", lo=0.0)

    @property
    def measured_figures(self) -> dict[str, float]:
        """``measured`` as a dict (empty when the GPU carries no measurement of its own)."""
        return dict(self.measured)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["measured"] = dict(self.measured)
        if not d["measured"] and not d["measured_source"]:  # a GPU without measurements writes as before
            del d["measured"], d["measured_source"]
        return d


#: The figures a GPU profile may carry for the clock (``GpuSpec.measured``) and their kind: ``fraction`` in
#: (0, 1] of the GPU's peak, ``seconds`` (finite, >= 0, at most 1 s), ``scale`` (a multiple of the H100's,
#: in (0, 100]), ``tokens`` (in [0, 100000]). The names are the clock's coefficients (``simulator.clock.cost_model.RooflineCoefficients``).
GPU_MEASURED_FIELDS = {
    "bandwidth_efficiency": "fraction",  # dense weights streamed by decode GEMVs, of peak HBM bandwidth
    "kv_bandwidth_efficiency": "fraction",  # KV cache read by decode attention, of peak HBM bandwidth
    "mfu": "fraction",  # large (prefill) bf16 GEMMs, of the bf16 peak
    "attention_efficiency": "fraction",  # prefill attention FLOPs, of the bf16 peak
    "expert_bandwidth_efficiency": "fraction",  # routed experts streamed by fused-MoE kernels
    "expert_mfu": "fraction",  # grouped expert GEMMs at thousands of tokens, of the peak of their dtype
    "expert_half_tokens": "tokens",  # tokens per expert at which they reach half of expert_mfu
    "fp8_mfu": "fraction",  # fp8 (per-tensor / per-channel) GEMMs, of the fp8 peak
    "fp8_bandwidth_efficiency": "fraction",  # fp8 weights streamed by decode GEMVs
    "block_fp8_mfu": "fraction",  # block-scaled fp8 GEMMs (DeepSeek-style 128 x 128 scales), of the fp8 peak
    "block_fp8_bandwidth_efficiency": "fraction",
    "int8_mfu": "fraction",  # W8A8 int8 GEMMs, of the fp8 / int8 peak
    "fp4_mfu": "fraction",  # nvfp4 GEMMs, of the fp4 peak
    "fp4_bandwidth_efficiency": "fraction",
    "int4_bandwidth_efficiency": "fraction",  # weight-only int4 (AWQ / GPTQ, Marlin) decode GEMVs
    "mla_attention_efficiency": "fraction",  # absorbed MLA decode attention FLOPs, of the bf16 peak
    "interconnect_efficiency": "fraction",  # decode-sized all-reduces, of the link's bandwidth a direction
    "nccl_interconnect_efficiency": "fraction",  # large all-reduces (NCCL's ring)
    "layer_overhead_s": "seconds",  # fixed GPU time per decoder layer per step
    "moe_expert_overhead_s": "seconds",  # fixed fused-MoE time per local expert per MoE layer per step
    "mla_layer_overhead_s": "seconds",  # fixed MLA-module time per MLA layer per step
    "allreduce_latency_s": "seconds",  # one small all-reduce (vLLM's custom kernel)
    "nccl_allreduce_latency_s": "seconds",  # one all-reduce through NCCL
    "sampler_scale": "scale",  # the sampler's time over the H100's
}


def check_measured(value: Any) -> tuple[tuple[str, float], ...]:
    """``GpuSpec.measured`` checked and as sorted ``(name, value)`` pairs; a :class:`SpecError` naming
    ``measured.<field>`` for an unknown name or an absurd value (0, above 1 for a fraction, NaN, infinite)."""
    if value is None:
        return ()
    items = value.items() if isinstance(value, dict) else value
    try:
        pairs = [(k, v) for k, v in items]
    except (TypeError, ValueError):
        raise SpecError("must be an object of measured figures (name: value)", field="measured") from None
    out = {}
    for key, v in pairs:
        kind = GPU_MEASURED_FIELDS.get(key) if isinstance(key, str) else None
        if kind is None:
            raise SpecError(f"{unknown_message(key, GPU_MEASURED_FIELDS, what='measured figure')}", field=f"measured.{key}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise SpecError(f"must be a finite number, got {v!r}", field=f"measured.{key}")
        if kind == "fraction" and not 0.0 < v <= 1.0:
            raise SpecError(f"must be a fraction of the peak in (0, 1], got {v:g}", field=f"measured.{key}")
        if kind == "seconds" and not 0.0 <= v <= 1.0:
            raise SpecError(f"must be a number of seconds in [0, 1], got {v:g}", field=f"measured.{key}")
        if kind == "tokens" and not 0.0 <= v <= 1e5:
            raise SpecError(f"must be a number of tokens in [0, 100000], got {v:g}", field=f"measured.{key}")
        if kind == "scale" and not 0.0 < v <= 100.0:
            raise SpecError(f"must be a multiple of the H100's time in (0, 100], got {v:g}", field=f"measured.{key}")
        out[key] = float(v)
    return tuple(sorted(out.items()))


# --------------------------------------------------------------------------
# deployment
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class DeploymentSpec(_FromDict):
    """The vLLM knobs of one deployment, plus optional calibration overrides.

    Parameters
    ----------
    tensor_parallel_size, pipeline_parallel_size : int
        GPUs per data-parallel rank = TP x PP.
    data_parallel_size : int
        Data-parallel ranks (vLLM ``--data-parallel-size``, ``ParallelConfig.data_parallel_size``): each rank is
        its own engine with its own attention weights, KV cache pool and scheduler; an MoE model's expert layers
        are sharded over all ``TP x DP`` GPUs of the deployment. GPUs per deployment = TP x PP x DP.
    enable_expert_parallel : bool
        vLLM ``--enable-expert-parallel``: the routed experts are spread whole over ``TP x DP`` GPUs (expert
        parallelism) instead of each expert being split by tensor parallelism; MoE models only
        (:func:`simulator.sizing.kv_layout.check_parallelism`). Rules and sources: ``docs/moe_parallelism.md``.
    dtype : str
        Weights / activation dtype; ``"auto"`` = the model's ``weights_dtype``.
    kv_cache_dtype : str
        ``"auto"`` = the model dtype (after ``dtype``); else fp32/bf16/fp16/fp8/int8/int4/fp4.
    block_size : int
        Tokens per KV block (vLLM default 16).  # tokens
    gpu_memory_utilization : float
        Fraction of total GPU memory vLLM may use, in (0, 1].
    max_model_len : int, optional
        Longest request; ``None`` = the model's ``max_position_embeddings``.  # tokens
    max_num_batched_tokens : int, optional
        Token budget per step, which also sizes the profiling run;
        ``None`` = vLLM's online-serving default for the GPU (8192 on >= 70 GiB
        GPUs other than A100, else 2048).  # tokens
    max_num_seqs : int, optional
        Running-request cap; sizes vLLM's dummy sampler run in profiling.
        ``None`` = vLLM's default for the GPU (1024 on >= 70 GiB GPUs other
        than A100, else 256).
    vllm_version : str, optional
        vLLM version the plan should imitate (``"0.10.1"``, ``"0.6"``...); it
        selects the version rules (``simulator.sizing.memory_model.version_rules``,
        ``docs/sizing.md``). ``None`` = the newest checked.
    enforce_eager : bool
        No CUDA graphs (the CUDA-graph term is then 0).
    subtract_cudagraph : bool, optional
        Subtract the CUDA-graph estimate from the KV budget (vLLM's
        ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``); ``None`` (default): as the
        chosen vLLM version does (subtracted since 0.21).
    cpu_tier_gib, disk_tier_gib : float, optional
        Offload tiers per deployment.  # GiB
    weights_gib, available_kv_gib, activation_gib, non_torch_gib, cudagraph_gib : float, optional
        Calibration: per-GPU figures from a vLLM log ("Model loading took X GiB",
        "Available KV cache memory: Y GiB", ...) replacing the modelled terms.  # GiB
        ``available_kv_gib`` may be negative (a start-up that failed).
    max_loras : int
        LoRA slots on the GPU (vLLM ``--max-loras``); 0 = LoRA off.
    max_lora_rank : int
        Largest adapter rank (vLLM ``--max-lora-rank``, default 16).
    lora_target_modules : tuple of str
        Projections that carry adapters (``q_proj`` ... ``down_proj``); empty = every linear layer vLLM wraps.
    """

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    vllm_version: str | None = None
    enforce_eager: bool = False
    subtract_cudagraph: bool | None = None
    cpu_tier_gib: float | None = None
    disk_tier_gib: float | None = None
    weights_gib: float | None = None
    available_kv_gib: float | None = None
    activation_gib: float | None = None
    non_torch_gib: float | None = None
    cudagraph_gib: float | None = None
    max_loras: int = 0
    max_lora_rank: int = 16
    lora_target_modules: tuple[str, ...] = ()
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False

    def __post_init__(self) -> None:
        top = DEPLOYMENT_LIMITS
        _whole(self, "max_loras", 0, top["max_loras"])
        _whole(self, "max_lora_rank", 1, top["max_lora_rank"])
        if isinstance(self.lora_target_modules, str):
            object.__setattr__(self, "lora_target_modules", (self.lora_target_modules,))
        object.__setattr__(self, "lora_target_modules", tuple(self.lora_target_modules or ()))
        _whole(self, "tensor_parallel_size", 1, top["tensor_parallel_size"])
        _whole(self, "pipeline_parallel_size", 1, top["pipeline_parallel_size"])
        _whole(self, "data_parallel_size", 1, top["data_parallel_size"])
        object.__setattr__(self, "dtype", normalize_dtype(self.dtype, "dtype", allow_auto=True))
        kv = normalize_dtype(self.kv_cache_dtype, "kv_cache_dtype", allow_auto=True)
        if kv not in KV_CACHE_DTYPES:
            raise SpecError(f"{self.kv_cache_dtype!r} is not a KV cache dtype "
                            f"(known: {', '.join(KV_CACHE_DTYPES)})", field="kv_cache_dtype")
        object.__setattr__(self, "kv_cache_dtype", kv)
        _whole(self, "block_size", 1, top["block_size"])
        g = self.gpu_memory_utilization
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not (0.0 < g <= 1.0):
            raise SpecError(f"must be a fraction in (0, 1], got {g!r}", field="gpu_memory_utilization")
        object.__setattr__(self, "gpu_memory_utilization", float(g))
        _whole(self, "max_model_len", 1, top["max_model_len"], optional=True)
        _whole(self, "max_num_batched_tokens", 1, top["max_num_batched_tokens"], optional=True)
        _whole(self, "max_num_seqs", 1, top["max_num_seqs"], optional=True)
        if self.vllm_version is not None:
            v = self.vllm_version
            if not isinstance(v, str) or not v.strip() or not v.strip().lstrip("v")[:1].isdigit():
                raise SpecError(f"must look like '0.11.0', got {v!r}", field="vllm_version")
        for name in ("enforce_eager", "subtract_cudagraph", "enable_expert_parallel"):
            if not isinstance(getattr(self, name), bool) and not (name == "subtract_cudagraph" and
                                                                  self.subtract_cudagraph is None):
                raise SpecError("must be true or false", field=name)
        for name in ("cpu_tier_gib", "disk_tier_gib", "weights_gib", "activation_gib", "non_torch_gib"):
            _number(self, name, lo=0.0, hi=top[name])
        # A failed start-up prints a negative "Available KV cache memory": the plan then says how much is short.
        # vLLM has printed negative CUDA-graph figures too (R36: -0.76 GiB), so allow them.
        for name in ("available_kv_gib", "cudagraph_gib"):
            _number(self, name, lo=-top[name], hi=top[name])

    @property
    def num_gpus(self) -> int:
        """GPUs per deployment (TP x PP x DP)."""
        return self.gpus_per_dp_rank * self.data_parallel_size

    @property
    def gpus_per_dp_rank(self) -> int:
        """GPUs of one data-parallel rank, i.e. one engine (TP x PP)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def moe_parallel_size(self) -> int:
        """GPUs an MoE layer is sharded over: TP x DP (vLLM ``FusedMoEParallelConfig.make``:
        ``flatten_tp_across_dp``), whether the experts are split (EP off) or spread whole (EP on)."""
        return self.tensor_parallel_size * self.data_parallel_size

    @property
    def expert_parallel_size(self) -> int:
        """EP size: TP x DP with ``enable_expert_parallel``, else 1 (each expert split over TP x DP GPUs)."""
        return self.moe_parallel_size if self.enable_expert_parallel else 1

    def with_(self, **changes: Any) -> DeploymentSpec:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


__all__ = [
    "GIB",
    "MIB",
    "SpecError",
    "DTYPE_BYTES",
    "KV_CACHE_DTYPES",
    "WEIGHT_DTYPES",
    "VLLM_BLOCK_SIZES",
    "block_size_problem",
    "QUANTIZATIONS",
    "ATTENTION_KINDS",
    "LAYER_FULL",
    "LAYER_SLIDING",
    "LAYER_LINEAR",
    "normalize_dtype",
    "LayerSpec",
    "ModelSpec",
    "GpuSpec",
    "DeploymentSpec",
    "DRIVER_RESERVED_GIB",
]
