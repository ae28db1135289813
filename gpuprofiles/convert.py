"""Pure conversion between :class:`simulator.base.specs.ModelSpec` and ``ModelProfile`` column values."""

from __future__ import annotations

from typing import Any

from simulator.base import LayerSpec, ModelSpec

#: ModelSpec fields stored one-to-one in ModelProfile columns of the same name.
SPEC_FIELDS = (
    "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "attention",
    "kv_lora_rank", "qk_rope_head_dim", "q_lora_rank", "qk_nope_head_dim", "v_head_dim", "vocab_size",
    "intermediate_size", "num_experts", "num_experts_per_tok", "moe_intermediate_size", "num_shared_experts",
    "shared_expert_intermediate_size", "num_dense_layers", "attention_bias", "gated_mlp",
    "tie_word_embeddings", "num_parameters", "num_active_parameters", "weights_dtype",
    "max_position_embeddings", "vision_parameters", "rope_cache_elements",
)

#: Quantization columns (ModelSpec ``quantization``, ``quant_*``); blank / None = the method's default.
QUANT_COLUMNS = ("quantization", "quant_scheme", "quant_bits", "quant_group_size", "quant_ignore")


def layer_to_dict(lay: LayerSpec) -> dict[str, Any]:
    """A LayerSpec as a compact JSON object (defaults left out)."""
    out: dict[str, Any] = {"kind": lay.kind}
    for k in ("window", "state_bytes", "num_kv_heads", "head_dim"):
        v = getattr(lay, k)
        if v not in (None, 0):
            out[k] = v
    return out


def spec_columns(spec: ModelSpec) -> dict[str, Any]:
    """Column values of a validated ModelSpec, layer counts and sliding window included."""
    out: dict[str, Any] = {f: getattr(spec, f) for f in SPEC_FIELDS}
    out["quantization"] = spec.quantization or ""
    out["quant_scheme"] = spec.quant_scheme or ""
    out["quant_bits"] = spec.quant_bits
    out["quant_group_size"] = spec.quant_group_size
    out["quant_ignore"] = list(spec.quant_ignore)
    out["sampling"] = spec.sampling or ""
    out["layers"] = [layer_to_dict(lay) for lay in spec.layers]
    kinds = [lay.kind for lay in spec.layer_specs]
    out["num_full_layers"] = kinds.count("full")
    out["num_sliding_layers"] = kinds.count("sliding")
    out["num_linear_layers"] = kinds.count("linear")
    windows = {lay.window for lay in spec.layers if lay.kind == "sliding"}
    if windows:
        out["sliding_window"] = min(windows)
    return out


def spec_from_columns(name: str, columns: dict[str, Any]) -> ModelSpec:
    """Build (and so validate) a ModelSpec from column values."""
    kwargs = {f: columns[f] for f in SPEC_FIELDS}
    kwargs["layers"] = tuple(LayerSpec(**lay) for lay in (columns.get("layers") or []))
    kwargs["quantization"] = columns.get("quantization") or None
    kwargs["quant_scheme"] = columns.get("quant_scheme") or None
    kwargs["quant_bits"] = columns.get("quant_bits")
    kwargs["quant_group_size"] = columns.get("quant_group_size")
    kwargs["quant_ignore"] = tuple(columns.get("quant_ignore") or ())
    kwargs["sampling"] = columns.get("sampling") or None
    return ModelSpec(name=name, **kwargs)


#: PCIe bandwidth per lane and direction by generation, GB/s (PCI-SIG: 8/16/32/64 GT/s, 128b/130b
#: encoding; Gen6 FLIT mode), rounded as data sheets quote x16 links (16/32/64/128 GB/s per direction).
PCIE_GBPS_PER_LANE = {3: 1.0, 4: 2.0, 5: 4.0, 6: 8.0}


def interconnect_gbps(interconnect: str, pcie: str = "") -> float | None:
    """GPU-to-GPU bandwidth, both directions, GB/s, from the catalog's link texts.

    The first ``N GB/s`` of ``interconnect`` (``"NVLink4 900 GB/s total (450/dir)"`` -> 900); a GPU
    without a figured link ("none", "optional NVLink bridge (pairs)") talks over PCIe: the PCIe text's
    ``N GB/s/dir`` doubled, or its generation and lane count (``"Gen4 x16"`` -> 2 x 32 = 64).
    None when neither text gives a figure.
    """
    import re

    m = re.search(r"(\d+(?:\.\d+)?)\s*GB/s(?!/dir)", interconnect or "")
    if m:
        return float(m.group(1))
    m = re.search(r"(\d+(?:\.\d+)?)\s*GB/s/dir", pcie or "")
    if m:
        return 2.0 * float(m.group(1))
    m = re.search(r"Gen\s*(\d)\s*(?:x\s*(\d+))?", pcie or "")
    if m and int(m.group(1)) in PCIE_GBPS_PER_LANE:
        return 2.0 * PCIE_GBPS_PER_LANE[int(m.group(1))] * int(m.group(2) or 16)
    return None
