"""Checkpoint quantization: what a ``config.json`` says, and what it costs in weight bytes.

A quantized checkpoint stores its linear layers in few bits plus *scales* (one
per group of ``group_size`` weights along the input dimension, or one per
output channel, or one per tensor) and, for asymmetric formats, *zero points*;
everything else (embeddings, LM head, norms, the MoE router and whatever the
config lists in ``ignore`` / ``modules_to_not_convert``) stays in the
activation dtype. The KV cache is not touched: vLLM's ``kv_cache_dtype auto``
is the activation dtype (bf16/fp16) for every method here; an fp8 KV cache
only comes from ``--kv-cache-dtype fp8``.

Methods (``ModelSpec.quantization``) and their formats (``quant_scheme``):

=================== ============ ===== ===== ===================== =========
method              scheme       bits  group scale                 zero pt.
=================== ============ ===== ===== ===================== =========
awq                 w4a16        4     128   fp16 (2 B)            4 bits
gptq                w4a16        4/8   128   fp16 (2 B)            bits (qzeros are stored even when symmetric)
compressed-tensors  w4a16        4     128   bf16 (2 B)            none (symmetric)
compressed-tensors  w8a8-int8    8     -1    per output channel    none
compressed-tensors  w8a8-fp8     8     -1    per output channel    none
compressed-tensors  nvfp4        4     16    fp8 (1 B)             none
fp8                 fp8-static / fp8-dynamic / fp8-block (128 x 128 fp32 scales)
int8                w8a8-int8    8     -1
mxfp4               mxfp4        4     32    e8m0 (1 B)            none; MoE experts only (gpt-oss)
nvfp4 / fp4         nvfp4        4     16    fp8 (1 B)             none
bitsandbytes        nf4 / nf4-dq / int8 (blocks of 64, fp32 absmax; double quant: 8-bit absmax)
=================== ============ ===== ===== ===================== =========

Sources: AutoAWQ / GPTQ checkpoint tensors (``qweight``, ``qzeros``, ``scales``),
compressed-tensors ``config_groups`` (``num_bits``, ``type``, ``strategy``,
``group_size``, ``symmetric``), OCP MX spec (MXFP4: 32-element blocks, E8M0
scale), NVIDIA NVFP4 (16-element blocks, E4M3 scale), bitsandbytes
``Params4bit`` (``blocksize`` 64, fp32 ``absmax``; double quant 8-bit absmax
with one fp32 per 256).

Pure: no Django, no files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from simulator.base import ModelSpec, SpecError

#: Methods the planner knows, the names a config's ``quant_method`` may use for them.
METHOD_ALIASES = {
    "awq": "awq", "awq_marlin": "awq", "gptq": "gptq", "gptq_marlin": "gptq",
    "compressed-tensors": "compressed-tensors", "compressed_tensors": "compressed-tensors",
    "fp8": "fp8", "fbgemm_fp8": "fp8", "modelopt": "fp8", "int8": "int8", "int4": "int4",
    "mxfp4": "mxfp4", "nvfp4": "nvfp4", "modelopt_fp4": "nvfp4", "fp4": "fp4",
    "bitsandbytes": "bitsandbytes", "none": "none",
}


@dataclass(frozen=True)
class QuantScheme:
    """How one checkpoint stores its quantized weights.

    Attributes
    ----------
    method, scheme : str
        ``ModelSpec.quantization`` and the format within it.
    bits : int
        Bits per stored weight.
    group_size : int
        Weights per scale along the input dimension; -1 one per output channel; 0 one per tensor.
    scale_bytes : float
        Bytes of one scale.  # bytes
    zero_bits : int
        Bits of one zero point per group (0 = symmetric).
    block : bool
        Scales per ``group_size x group_size`` block (DeepSeek-style fp8).
    experts_only : bool
        Only the MoE experts are quantized (gpt-oss MXFP4).
    ignore : tuple of str
        Modules left in the activation dtype.
    """

    method: str
    scheme: str
    bits: int
    group_size: int
    scale_bytes: float
    zero_bits: int = 0
    block: bool = False
    experts_only: bool = False
    ignore: tuple[str, ...] = ()

    def bytes_per_weight(self, in_features: int) -> float:
        """Stored bytes per quantized weight, scales and zero points included.  # bytes"""
        per_scale = self.scale_bytes + self.zero_bits / 8
        if self.block:
            overhead = per_scale / (self.group_size * self.group_size)
        elif self.group_size > 0:
            overhead = per_scale / self.group_size
        elif self.group_size == -1:
            overhead = per_scale / max(in_features, 1)
        else:
            overhead = 0.0
        return self.bits / 8 + overhead

    @property
    def label(self) -> str:
        """``"awq w4a16, group 128"``: what the catalog and the plan show."""
        if self.group_size > 0:
            g = f"{self.group_size}x{self.group_size} blocks" if self.block else f"group {self.group_size}"
        else:
            g = "per channel" if self.group_size == -1 else "per tensor"
        extra = ", MoE experts only" if self.experts_only else ""
        return f"{self.method} {self.scheme}, {g}{extra}"


# method -> scheme -> (bits, group_size, scale_bytes, zero_bits, block)
_FORMATS: dict[str, dict[str, tuple[int, int, float, int, bool]]] = {
    "awq": {"w4a16": (4, 128, 2.0, 4, False)},
    "gptq": {"w4a16": (4, 128, 2.0, 4, False), "w8a16": (8, 128, 2.0, 8, False)},
    "int4": {"w4a16": (4, 128, 2.0, 4, False)},
    "compressed-tensors": {"w4a16": (4, 128, 2.0, 0, False), "w8a16": (8, 128, 2.0, 0, False),
                           "w8a8-int8": (8, -1, 2.0, 0, False), "w8a8-fp8": (8, -1, 2.0, 0, False),
                           "nvfp4": (4, 16, 1.0, 0, False), "fp8-block": (8, 128, 4.0, 0, True)},
    "fp8": {"fp8-static": (8, 0, 4.0, 0, False), "fp8-dynamic": (8, 0, 4.0, 0, False),
            "fp8-block": (8, 128, 4.0, 0, True), "fp8": (8, 0, 4.0, 0, False)},
    "int8": {"w8a8-int8": (8, -1, 4.0, 0, False)},
    "mxfp4": {"mxfp4": (4, 32, 1.0, 0, False)},
    "nvfp4": {"nvfp4": (4, 16, 1.0, 0, False)},
    "fp4": {"nvfp4": (4, 16, 1.0, 0, False)},
    "bitsandbytes": {"nf4": (4, 64, 4.0, 0, False), "nf4-dq": (4, 64, 1.0 + 4.0 / 256, 0, False),
                     "int8": (8, -1, 4.0, 0, False)},
}
_DEFAULT_SCHEME = {"awq": "w4a16", "gptq": "w4a16", "int4": "w4a16", "compressed-tensors": "w4a16",
                   "fp8": "fp8-block", "int8": "w8a8-int8", "mxfp4": "mxfp4", "nvfp4": "nvfp4", "fp4": "nvfp4",
                   "bitsandbytes": "nf4"}
_BITS_SCHEME = {("gptq", 8): "w8a16", ("compressed-tensors", 8): "w8a16", ("bitsandbytes", 8): "int8",
                ("awq", 8): None}
#: Storage dtypes of the API's ``dtype`` (weights stored in that type) -> the method it implies.
DTYPE_METHOD = {"fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "int8": "int8", "int4": "int4",
                "fp4": "nvfp4", "nvfp4": "nvfp4", "mxfp4": "mxfp4"}


def known_methods() -> str:
    return ", ".join(sorted(_FORMATS))


def method_problem(method: object) -> str | None:
    """Why ``method`` is not a quantization method a deployment may name (any spelling of
    :data:`METHOD_ALIASES`, any case; ``none`` for an unquantized run), or None: one rule for the sizing form,
    ``POST /api/plan/`` and the sizing service."""
    if str(method).strip().lower() in METHOD_ALIASES:
        return None
    return f"{method!r} is not a quantization method the planner knows (known: {known_methods()}, or none)"


def scheme_for(model: ModelSpec, deployment_dtype: str = "auto") -> QuantScheme | None:
    """The quantization of ``model``'s weights; for an unquantized checkpoint, the one a
    sub-16-bit ``deployment_dtype`` implies (vLLM's on-the-fly ``--quantization fp8``...); None = 16-bit."""
    method = model.quantization
    scheme, bits, group = model.quant_scheme, model.quant_bits, model.quant_group_size
    if method is None:
        method = DTYPE_METHOD.get(deployment_dtype)
        if method is None:
            return None
        scheme = "fp8-dynamic" if method == "fp8" else None
        bits = group = None
    formats = _FORMATS.get(method)
    if formats is None:
        raise SpecError(f"unknown method {method!r} (known: {known_methods()})", field="quantization")
    if scheme is None and bits is not None:
        scheme = _BITS_SCHEME.get((method, bits), _DEFAULT_SCHEME[method])
        if scheme is None:
            raise SpecError(f"{bits}-bit {method} is not supported", field="quant_bits")
    scheme = scheme or _DEFAULT_SCHEME[method]
    if scheme not in formats:
        raise SpecError(f"{scheme!r} is not a {method} format (known: {', '.join(formats)})", field="quant_scheme")
    fbits, fgroup, scale_b, zero_b, block = formats[scheme]
    if method in ("gptq",) and bits:
        zero_b = bits
    return QuantScheme(method=method, scheme=scheme, bits=bits or fbits,
                       group_size=fgroup if group is None else group, scale_bytes=scale_b, zero_bits=zero_b,
                       block=block, experts_only=method == "mxfp4" and model.is_moe, ignore=model.quant_ignore)


def check_group_size(model: ModelSpec, scheme: QuantScheme | None, tensor_parallel_size: int = 1) -> None:
    """Refuse a group size that does not divide the layers' input sizes (vLLM refuses to load such weights)."""
    if scheme is None or scheme.group_size <= 0:
        return
    g = scheme.group_size
    if model.hidden_size % g:
        raise SpecError(f"{g} does not divide hidden_size {model.hidden_size}", field="quantization_config.group_size")
    inter = (model.moe_intermediate_size or model.intermediate_size) if model.is_moe else model.intermediate_size
    if inter and not scheme.block and scheme.method != "mxfp4" and (inter // tensor_parallel_size) % g:
        raise SpecError(f"the MLP input per GPU ({inter} / {tensor_parallel_size}) is not a "
                        f"multiple of the quantization group size {g}", field="tensor_parallel_size")


# --- unquantized modules -----------------------------------------------------

_CATEGORY_PATTERNS: list[tuple[str, str]] = [
    # first: a vision or audio tower's layers ("vision_model.model.layers.3.mlp.fc1") are not the LM's
    ("other_tower", r"(vision|visual|multi_modal|mm_projector|audio|image)"),
    ("shared", r"shared_expert"),
    ("experts", r"experts"),
    ("router", r"(router|mlp\.gate$|block_sparse_moe\.gate$)"),
    ("attention", r"(self_attn|attention|attn|q_proj|k_proj|v_proj|o_proj|qkv)"),
    ("dense_mlp", r"(mlp|gate_proj|up_proj|down_proj|feed_forward|ffn)"),
    ("edge", r"(lm_head|embed|wte|norm)"),
]
_PROJ_SHARE = {"gate_proj": 1 / 3, "up_proj": 1 / 3, "down_proj": 1 / 3, "o_proj": None, "q_proj": None,
               "k_proj": None, "v_proj": None}


def _attn_share(model: ModelSpec, proj: str) -> float:
    q = model.num_attention_heads
    kv = model.num_kv_heads if model.attention != "MLA" else model.num_attention_heads
    total = 2 * q + 2 * kv
    return {"q_proj": q, "o_proj": q, "k_proj": kv, "v_proj": kv}[proj] / total


@lru_cache(maxsize=1024)
def _classify(entry: str) -> tuple[str | None, int | None, str | None]:
    """(category, layer index or None for every layer, projection) of one ignore-list entry."""
    entry = (entry[3:] if entry.startswith("re:") else entry).lower()
    cat = next((c for c, pat in _CATEGORY_PATTERNS if re.search(pat, entry)), None)
    m = re.search(r"layers\.(\d+)\.", entry)
    proj = next((p for p in _PROJ_SHARE if p in entry), None)
    return cat, (int(m.group(1)) if m else None), proj


def unquantized_fractions(model: ModelSpec, scheme: QuantScheme) -> tuple[dict[str, float], list[str]]:
    """Fraction of each layer category the ``ignore`` list keeps in the activation dtype, and the
    entries not understood (reported as notes, never guessed into a category)."""
    out = {"attention": 0.0, "dense_mlp": 0.0, "shared": 0.0, "experts": 0.0}
    unknown: list[str] = []
    for raw in scheme.ignore:
        cat, layer, proj = _classify(raw)
        if cat is None:
            unknown.append(raw)
            continue
        if cat not in out:
            continue  # edge layers and the router are unquantized anyway; other towers are not in the LM
        layer_frac = 1.0 / model.num_layers if layer is not None else 1.0
        share = 1.0
        if proj and cat == "attention":
            share = _attn_share(model, proj)
        elif proj and cat in ("dense_mlp", "shared", "experts"):
            share = 1 / 3 if model.gated_mlp else 1 / 2
        if cat == "dense_mlp" and model.is_moe and not proj and layer is None:
            for c in ("experts", "shared"):  # "model.layers.*.mlp" in an MoE model covers its experts too
                out[c] = 1.0
        out[cat] = min(1.0, out[cat] + layer_frac * share)
    return out, unknown


def weight_bytes_by_category(model: ModelSpec, scheme: QuantScheme | None, params: dict[str, float],
                             act_bytes: float, tensor_parallel_size: int = 1) -> tuple[dict[str, float], list[str]]:
    """Bytes of each layer category (whole model, before the TP split) and notes.  # bytes

    ``params`` are :func:`simulator.sizing.weights._param_parts` counts. Embedding,
    LM head, norms and router stay in ``act_bytes``.
    """
    notes: list[str] = []
    if scheme is None:
        return {k: v * act_bytes for k, v in params.items()}, notes
    unq, unknown = unquantized_fractions(model, scheme)
    if unknown:
        notes.append("quantization ignore entries not matched to a layer (counted as quantized): "
                     + ", ".join(unknown[:5]))
    out = {k: params[k] * act_bytes for k in ("embed", "lm_head", "router", "norms")}
    H = model.hidden_size
    for cat in ("attention", "dense_mlp", "shared", "experts"):
        n = params[cat]
        if scheme.experts_only and cat != "experts":
            out[cat] = n * act_bytes
            continue
        qb = scheme.bytes_per_weight(H)
        if cat == "experts" and scheme.method == "mxfp4":
            ie = model.moe_intermediate_size or model.intermediate_size or 1
            per_rank = ie / tensor_parallel_size
            qb *= (-(-per_rank // 256) * 256) / per_rank  # vLLM pads the per-rank expert width to 256
        f = unq[cat]
        out[cat] = n * (f * act_bytes + (1 - f) * qb)
    return out, notes


def describe(model: ModelSpec, deployment_dtype: str = "auto") -> str:
    """One line for the catalog and the plan: ``"awq w4a16, group 128"`` or ``"none (bf16)"``."""
    s = scheme_for(model, deployment_dtype)
    if s is None:
        return f"none ({model.weights_dtype})"
    ign = f"; {len(s.ignore)} modules left unquantized" if s.ignore else ""
    return s.label + ign


__all__ = ["DTYPE_METHOD", "METHOD_ALIASES", "QuantScheme", "check_group_size", "describe", "known_methods",
           "method_problem", "scheme_for", "unquantized_fractions", "weight_bytes_by_category"]
