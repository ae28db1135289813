"""The curated catalog: read ``data/gpus.csv`` and ``data/models.csv`` into rows.

The CSV cells are written by people and are messy: ``"~835 (unverified)"``,
``"79.18-79.25 (vLLM/torch total; R12, R36-R44)"``, ``"350-400
(configurable)"``, ``"n/a (no FP8)"``, empty. The rules, applied everywhere:

- a value is the first number of the cell; a cell that does not start with a
  number (``"n/a"``, ``"not published by AWS"``, ``"no BF16 (...)"``) is empty;
- a range ``a-b`` gives its lower bound (conservative for memory and power,
  cheapest for prices);
- the value is *unverified* when the cell says so (``unverified``, ``~``,
  ``weak``, ``inferred``, ``from memory`` / ``(memory)``), or when the row's
  ``verification`` text says so for that field (:data:`GPU_UNVERIFIED`,
  :data:`MODEL_UNVERIFIED`, transcribed by hand from that text);
- price per GPU-hour is the lowest ``$`` amount listed; the full text is kept;
- GPU ``memory_gib`` is the runtime total (torch / vLLM) when observed, else
  ``nvidia-smi MiB / 1024 - 0.5`` (the driver reserve seen on H100, A100, L40S,
  T4), else the nominal size, and is then marked estimated.

Model rows with a verbatim ``config.json`` in ``data/hf_configs/`` are parsed
from it with :func:`simulator.sizing.hf_config.parse_hf_config` (parameter counts from
the CSV); the others from a minimal config derived from their CSV cells, so the
family rules (Gemma's sliding layers, Qwen3-Next and Jamba linear layers) live
in one place. Every row keeps its CSV cells verbatim in ``source_row``.

:func:`load_catalog` is idempotent (``update_or_create`` keyed by slug); the
data migration and ``manage.py`` call it.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.utils.text import slugify

from gpuprofiles.convert import spec_columns
from simulator.base import DRIVER_RESERVED_GIB, generation_defaults
from simulator.sizing import parse_hf_config

DATA = Path(__file__).resolve().parent / "data"

_NUM = re.compile(r"^\s*~?\s*\$?(\d[\d,]*(?:\.\d+)?)(?:\s*-\s*\$?(\d[\d,]*(?:\.\d+)?))?")
_UNVERIFIED_MARKS = ("unverified", "weak", "inferred", "from memory", "(memory)")


@dataclass(frozen=True)
class Cell:
    """A parsed catalog cell: the number, whether it is unverified, and the verbatim text."""

    value: float | None
    unverified: bool
    text: str


def parse_cell(text: str | None) -> Cell:
    """Parse one messy numeric cell (see the module docstring for the rules).

    >>> parse_cell("~835 (unverified)")
    Cell(value=835.0, unverified=True, text='~835 (unverified)')
    >>> parse_cell("350-400 (configurable)").value
    350.0
    >>> parse_cell("n/a (no FP8)").value is None
    True
    """
    t = (text or "").strip()
    m = _NUM.match(t)
    low = t.lower()
    unverified = t.startswith("~") or any(mark in low for mark in _UNVERIFIED_MARKS)
    if not m:
        return Cell(None, unverified, t)
    return Cell(float(m.group(1).replace(",", "")), unverified, t)


def parse_int(text: str | None) -> int | None:
    v = parse_cell(text).value
    return None if v is None else int(v)


def lowest_price(text: str | None) -> float | None:
    """The lowest ``$`` amount in a price cell (a range counts by its lower bound), or None."""
    amounts = [float(a.replace(",", "")) for a in re.findall(r"\$\s*(\d[\d,]*(?:\.\d+)?)", text or "")]
    return min(amounts) if amounts else None


def slug_for(name: str) -> str:
    """``"Llama 3.1 70B"`` -> ``"llama-3-1-70b"`` (dots become dashes), with a few shorter GPU names."""
    if name in SLUG_OVERRIDES:
        return SLUG_OVERRIDES[name]
    return slugify(name.replace(".", "-"))


SLUG_OVERRIDES = {
    "B200 (HGX, 180GB)": "b200",
    "GB200 (per Blackwell GPU)": "gb200",
    "A10G (AWS)": "a10g",
    "RTX 3090 (extra)": "rtx-3090",
    "AMD Instinct MI300X": "mi300x",
    "AMD Instinct MI325X": "mi325x",
    "AMD Instinct MI250": "mi250",
    "Intel Gaudi 3": "gaudi-3",
}

_GPU_NUMERIC = ("memory_mib", "memory_gib", "bandwidth_tbps", "bf16_tflops", "fp8_tflops", "fp4_tflops",
                "tdp_w", "price_per_hour")

#: Fields the row's ``verification`` text calls unverified (transcribed by hand from gpus.csv).
GPU_UNVERIFIED: dict[str, tuple[str, ...]] = {
    "h100-nvl-94gb": ("bandwidth_tbps", "bf16_tflops", "fp8_tflops"),  # "compute/bandwidth UNVERIFIED"
    "h100-pcie-80gb": ("interconnect",),  # "bridge figure unverified"
    "b200": ("bandwidth_tbps",),  # "BW sources differ"
    "a100-sxm4-40gb": ("bandwidth_tbps",),  # "bandwidth from memory"
    "a100-pcie-40gb": ("bandwidth_tbps",),
    "a10": ("bf16_tflops",),  # "TFLOPS from memory"
    "rtx-4090": ("bf16_tflops", "fp8_tflops"),  # "TFLOPS from memory"
    "rtx-6000-ada": ("memory_mib", "memory_gib", "bf16_tflops", "fp8_tflops", "tdp_w"),  # "UNVERIFIED except BW"
    "mi300x": ("bandwidth_tbps", "bf16_tflops", "fp8_tflops"),  # "compute/bandwidth from vendor spec (memory)"
    "mi325x": _GPU_NUMERIC,  # "UNVERIFIED (vendor spec from memory)"
    "mi250": _GPU_NUMERIC,
    "gaudi-3": _GPU_NUMERIC,
}

#: Per-device overrides where the CSV row describes a package of several devices.
GPU_PER_DEVICE: dict[str, dict[str, Any]] = {
    # "plan per-GCD (64 GB, 1.64 TB/s)": each MI250 GCD is a separate device to the runtime.
    "mi250": {"memory_gib": 64.0, "bandwidth_tbps": 1.6384, "bf16_tflops": 181.05},
}


def gpu_rows() -> list[dict[str, str]]:
    with open(DATA / "gpus.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def model_rows() -> list[dict[str, str]]:
    with open(DATA / "models.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def gpu_defaults(row: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """(slug, field values) of one gpus.csv row."""
    slug = slug_for(row["name"])
    unverified: set[str] = set(GPU_UNVERIFIED.get(slug, ()))
    cells = {
        "memory_mib": parse_cell(row["nvidia_smi_total_MiB"]),
        "bandwidth_tbps": parse_cell(row["mem_bw_TBps"]),
        "bf16_tflops": parse_cell(row["bf16_dense_TFLOPS"]),
        "fp8_tflops": parse_cell(row["fp8_dense_TFLOPS"]),
        "fp4_tflops": parse_cell(row["fp4_dense_TFLOPS"]),
        "tdp_w": parse_cell(row["tdp_W"]),
    }
    values: dict[str, Any] = {k: c.value for k, c in cells.items()}
    unverified |= {k for k, c in cells.items() if c.unverified and c.value is not None}

    observed = parse_cell(row["torch_or_vllm_total_GiB_observed"])
    if observed.value is not None:
        values["memory_gib"], estimated = observed.value, False
        if observed.unverified:
            unverified.add("memory_gib")
    elif values["memory_mib"] is not None:
        values["memory_gib"], estimated = round(values["memory_mib"] / 1024 - DRIVER_RESERVED_GIB, 2), True
    else:
        values["memory_gib"], estimated = parse_cell(row["memory_nominal"]).value, True
    per_device = GPU_PER_DEVICE.get(slug, {})
    values.update(per_device)
    if per_device:
        estimated = True

    price = lowest_price(row["cloud_price_usd_per_gpu_hour"])
    values.update(
        name=row["name"],
        vendor=row["vendor"],
        memory_nominal=row["memory_nominal"],
        memory_type=row["memory_type"],
        memory_gib_estimated=estimated,
        interconnect=row["gpu_interconnect"],
        pcie=row["pcie"],
        price_per_hour=price,
        price_text=row["cloud_price_usd_per_gpu_hour"],
        sources=row["spec_sources"],
        verification=row["verification"],
        unverified_fields=sorted(f for f in unverified if f == "interconnect" or values.get(f) is not None),
        source_row=dict(row),
        is_catalog=True,
        owner=None,
    )
    return slug, values


# --------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------

#: models.csv name -> verbatim config.json (and ModelOpt hf_quant_config.json) in data/hf_configs/.
MODEL_CONFIG_FILES: dict[str, str] = {
    "Llama 3.1 8B": "meta-llama--Meta-Llama-3.1-8B_config.json",
    "Llama 3.1 70B": "meta-llama--Meta-Llama-3.1-70B_config.json",
    "Llama 3.1 405B": "meta-llama--Meta-Llama-3.1-405B_config.json",
    "Mixtral 8x7B": "mistralai--Mixtral-8x7B-v0.1_config.json",
    "Mixtral 8x22B": "mistralai--Mixtral-8x22B-v0.1_config.json",
    "Qwen3 8B": "Qwen--Qwen3-8B_config.json",
    "Qwen3 32B": "Qwen--Qwen3-32B_config.json",
    "Qwen3 30B-A3B": "Qwen--Qwen3-30B-A3B_config.json",
    "Qwen3 235B-A22B": "Qwen--Qwen3-235B-A22B_config.json",
    "DeepSeek-V3": "deepseek-ai--DeepSeek-V3_config.json",
    "DeepSeek-R1": "deepseek-ai--DeepSeek-R1_config.json",
    "gpt-oss-20b": "openai--gpt-oss-20b_config.json",
    "gpt-oss-120b": "openai--gpt-oss-120b_config.json",
}

#: Catalog models that are not in models.csv: known only from their verbatim config (parameters estimated).
EXTRA_CONFIG_MODELS: list[dict[str, str]] = [
    {"name": "Gemma 4 26B-A4B", "hf_id": "google/gemma-4-26B-A4B",
     "config": "google--gemma-4-26B-A4B_config.json"},
    {"name": "Llama 3.1 70B Instruct FP8", "hf_id": "nvidia/Llama-3.1-70B-Instruct-FP8",
     "config": "nvidia--Llama-3.1-70B-Instruct-FP8_config.json",
     "quant": "nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json"},
]

#: Model fields the row's verification text calls unverified (transcribed by hand from models.csv).
MODEL_UNVERIFIED: dict[str, tuple[str, ...]] = {
    "llama-2-7b": ("max_position_embeddings", "weights_dtype"),  # "max_pos 4096 & fp16 from HF config (memory)"
    "llama-2-13b": ("max_position_embeddings", "weights_dtype"),  # "max_pos/dtype from memory"
    "llama-3-2-3b": ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
                     "intermediate_size", "vocab_size"),  # "UNVERIFIED against HF file (secondary only)"
    "mistral-7b-v0-3": ("sliding_window", "vocab_size", "max_position_embeddings"),
    "qwen2-5-7b": ("max_position_embeddings",),  # "max_pos secondary (sources disagree base vs instruct)"
    "qwen2-5-14b": ("max_position_embeddings",),
    "qwen2-5-32b": ("max_position_embeddings",),
    "qwen2-5-72b": ("max_position_embeddings",),
    "qwen3-next-80b-a3b": ("num_parameters", "num_active_parameters"),  # "from model name/card (approx)"
    "jamba-v0-1": ("num_parameters", "num_active_parameters"),  # "model card (approx)"
}


def load_config(filename: str) -> dict:
    with open(DATA / "hf_configs" / filename, encoding="utf-8") as fh:
        return json.load(fh)


def generation_fields(hf_id: str) -> dict | None:
    """The sampling fields of the repository's ``generation_config.json`` where the simulator ships them
    (``simulator/data/generation_configs.json``); None when not known (the clock then times the default path)."""
    entry = generation_defaults(hf_id)
    return None if entry is None else entry["fields"]


def _first_word(text: str) -> str:
    return (text or "").strip().split(" ")[0].strip(",;")


def _attention_kind(text: str) -> str:
    for kind in ("MLA", "GQA", "MQA", "MHA"):
        if kind in text:
            return kind
    return ""


#: The vision tower of the Gemma 3 checkpoints (4B-27B), as their config.json files give it.
GEMMA3_VISION_CONFIG = {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
                        "num_hidden_layers": 27, "num_attention_heads": 16, "image_size": 896, "patch_size": 14}


def derived_config(row: dict[str, str]) -> dict[str, Any]:
    """A minimal Hugging Face-style config built from a models.csv row (for rows with no verbatim file).

    Keys follow the parser's vocabulary; values come from the row's cells
    (first number of each). Not a real ``config.json``: it is never stored as one.
    """
    model_type = _first_word(row["model_type"])
    cfg: dict[str, Any] = {
        "model_type": model_type,
        "num_hidden_layers": parse_int(row["num_hidden_layers"]),
        "hidden_size": parse_int(row["hidden_size"]),
        "num_attention_heads": parse_int(row["num_attention_heads"]),
        "num_key_value_heads": parse_int(row["num_key_value_heads"]),
        "head_dim": parse_int(row["head_dim"]),
        "intermediate_size": parse_int(row["intermediate_size"]) or 0,
        "vocab_size": parse_int(row["vocab_size"]),
        "tie_word_embeddings": row["tie_word_embeddings"].strip().lower() == "yes",
        "max_position_embeddings": parse_int(row["max_position_embeddings"]),
        "torch_dtype": _first_word(row["torch_dtype"]),
    }
    experts = row["experts"]
    if experts:
        n = re.search(r"(\d+)\s+(?:experts|routed)", experts)
        k = re.search(r"top-(\d+)", experts)
        shared = re.search(r"(\d+)\s+shared", experts)
        cfg["num_experts"] = int(n.group(1)) if n else 0
        cfg["num_experts_per_tok"] = int(k.group(1)) if k else 0
        moe_inter = re.search(r"(?:moe_intermediate|expert inter)\s+(\d+)", experts)
        cfg["moe_intermediate_size"] = int(moe_inter.group(1)) if moe_inter else cfg["intermediate_size"]
        if shared:
            cfg["n_shared_experts"] = int(shared.group(1))
            m = re.search(r"\+shared (\d+)", row["intermediate_size"])
            if m:
                cfg["shared_expert_intermediate_size"] = int(m.group(1))
        if "on 16 layers" in experts:  # Jamba: MoE every 2nd layer
            cfg["decoder_sparse_step"] = 2
    n_sliding = parse_int(row["n_sliding_window_layers"]) or 0
    if n_sliding:
        cfg["sliding_window"] = parse_int(row["sliding_window"])
    if model_type.startswith("gemma3"):
        cfg["sliding_window_pattern"] = 6
        # Gemma 3 (4B-27B) ships a SigLIP-so400m tower: transformers' Gemma3Config default vision_config
        # (SiglipVisionConfig hidden 1152, intermediate 4304, 27 layers, image 896, patch 14), counted in the weights.
        cfg["vision_config"] = dict(GEMMA3_VISION_CONFIG)
        cfg["mm_tokens_per_image"] = 256
        cfg["model_type"] = "gemma3"
    if model_type == "qwen3_next":
        # "GDN: 16 key heads, 32 value heads, head dim 128, conv kernel 4"; every 4th layer full attention.
        cfg.update(full_attention_interval=4, linear_num_key_heads=16, linear_num_value_heads=32,
                   linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4)
    if model_type == "jamba":
        # "attention at layers i%8==4"; Mamba-1 d_state 16, d_conv 4, expand 2.
        cfg.update(attn_layer_period=8, attn_layer_offset=4, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2)
    if model_type == "gpt2":
        cfg["torch_dtype"] = "float32"
    return {k: v for k, v in cfg.items() if v is not None}


def _params(text: str) -> int | None:
    v = parse_cell(text).value
    return None if v is None else int(round(v * 1e9))


def model_defaults(row: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """(slug, field values) of one models.csv row; raises SpecError if the row cannot make a spec."""
    slug = slug_for(row["name"])
    num_parameters = _params(row["total_params_B"])
    num_active = _params(row["active_params_B"])
    filename = MODEL_CONFIG_FILES.get(row["name"])
    hf = load_config(filename) if filename else None
    spec = parse_hf_config(hf if hf is not None else derived_config(row), name=row["name"],
                           num_parameters=num_parameters, num_active_parameters=num_active,
                           generation_config=generation_fields(row["hf_id"]))
    unverified = set(MODEL_UNVERIFIED.get(slug, ()))
    for field, column in (("sliding_window", "sliding_window"), ("weights_dtype", "torch_dtype"),
                          ("max_position_embeddings", "max_position_embeddings")):
        if parse_cell(row[column]).unverified:
            unverified.add(field)
    values: dict[str, Any] = dict(
        name=row["name"],
        hf_id=row["hf_id"],
        model_type=_first_word(row["model_type"]),
        params_note=row["params_note"],
        attention_note=row["attention_kind"],
        layer_pattern=row["layer_pattern"],
        checkpoint_quant_text=row["checkpoint_quant"],
        kv_bytes_per_token_bf16=parse_int(row["kv_bytes_per_token_bf16_all_attn_layers"]),
        kv_bytes_per_token_bf16_global=parse_int(row["kv_bytes_per_token_bf16_global_layers_only"]),
        kv_bytes_per_token_fp8=parse_int(row["kv_bytes_per_token_fp8_full"]),
        sources=row["config_source"],
        verification=row["verification"],
        unverified_fields=sorted(unverified),
        source_row=dict(row),
        hf_config=hf,
        hf_quant_config=None,
        sliding_window=parse_int(row["sliding_window"]),
        is_catalog=True,
        owner=None,
    )
    values.update(_spec_values(spec))
    if values["sliding_window"] is None:
        values["sliding_window"] = parse_int(row["sliding_window"])
    return slug, values


def extra_model_defaults(extra: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """(slug, field values) of a catalog model known only from its verbatim config."""
    hf = load_config(extra["config"])
    quant = load_config(extra["quant"]) if extra.get("quant") else None
    spec = parse_hf_config(hf, name=extra["name"], quant_config=quant, generation_config=generation_fields(extra["hf_id"]))
    values: dict[str, Any] = dict(
        name=extra["name"], hf_id=extra["hf_id"], model_type=str(hf.get("model_type", "")),
        params_note="estimated from config.json (simulator.sizing.closed_form.estimate_num_parameters)",
        sources=f"{extra['hf_id']} config.json (verbatim copy in gpuprofiles/data/hf_configs/{extra['config']})",
        verification="dims from the verbatim config.json; parameter counts estimated",
        unverified_fields=["num_parameters", "num_active_parameters"],
        source_row={}, hf_config=hf, hf_quant_config=quant, is_catalog=True, owner=None,
        attention_note="", layer_pattern="", checkpoint_quant_text="",
        kv_bytes_per_token_bf16=None, kv_bytes_per_token_bf16_global=None, kv_bytes_per_token_fp8=None,
        sliding_window=None,
    )
    values.update(_spec_values(spec))
    return slug_for(extra["name"]), values


def quantized_model_entries() -> list[dict[str, Any]]:
    """Common quantized checkpoints (data/quantized_models.json): a base config plus the published
    ``quantization_config``."""
    with open(DATA / "quantized_models.json", encoding="utf-8") as fh:
        return json.load(fh)["models"]


def quantized_model_defaults(entry: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(slug, field values) of a quantized checkpoint: its base model's config with its quantization_config."""
    hf = {**load_config(entry["base"]), "quantization_config": entry["quantization_config"]}
    if entry.get("torch_dtype"):
        hf["torch_dtype"] = entry["torch_dtype"]
    spec = parse_hf_config(hf, name=entry["name"], generation_config=generation_fields(entry["hf_id"]))
    values: dict[str, Any] = dict(
        name=entry["name"], hf_id=entry["hf_id"], model_type=str(hf.get("model_type", "")),
        params_note="estimated from config.json (simulator.sizing.closed_form.estimate_num_parameters)",
        sources=f"{entry['source']}; dims from the base model's config.json "
                f"(gpuprofiles/data/hf_configs/{entry['base']})",
        verification="quantization_config transcribed from the checkpoint's page, not re-checked (unverified)",
        unverified_fields=["quantization", "num_parameters", "num_active_parameters"],
        source_row={}, hf_config=hf, hf_quant_config=None, is_catalog=True, owner=None,
        attention_note="", layer_pattern="", checkpoint_quant_text=str(entry["quantization_config"]),
        kv_bytes_per_token_bf16=None, kv_bytes_per_token_bf16_global=None, kv_bytes_per_token_fp8=None,
        sliding_window=None,
    )
    values.update(_spec_values(spec))
    return slug_for(entry["name"]), values


def _spec_values(spec) -> dict[str, Any]:
    return spec_columns(spec)


def load_catalog(gpu_model, model_model) -> dict[str, int]:
    """Create or update every catalog row (idempotent: keyed by slug). Returns counts.

    ``gpu_model`` / ``model_model`` are the model classes (the migration passes
    its historical models).
    """
    counts = {"gpus": 0, "models": 0, "changed": 0}
    gpus = [gpu_defaults(row) for row in gpu_rows()]
    models = [model_defaults(row) for row in model_rows()] + [extra_model_defaults(e) for e in EXTRA_CONFIG_MODELS]
    if "quant_scheme" in {f.name for f in model_model._meta.get_fields()}:
        # the quantized checkpoints need the quantization columns of migration 0003 (and its wider
        # ``quantization``: "compressed-tensors" does not fit 0002's 16 characters on PostgreSQL)
        models += [quantized_model_defaults(e) for e in quantized_model_entries()]
    for kind, model, rows in (("gpus", gpu_model, gpus), ("models", model_model, models)):
        columns = {f.name for f in model._meta.get_fields()}
        for slug, all_values in rows:
            # a historical model (an earlier migration) may lack later columns: fill only those it has
            values = {k: v for k, v in all_values.items() if k in columns}
            counts[kind] += 1
            current = model.objects.filter(slug=slug).first()
            if current is not None and all(getattr(current, f + "_id" if f == "owner" else f) == v
                                           for f, v in values.items()):
                continue  # unchanged: leave the row (and its updated_at) alone
            model.objects.update_or_create(slug=slug, defaults=values)
            counts["changed"] += 1
    return counts
