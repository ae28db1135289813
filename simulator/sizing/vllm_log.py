"""Read the figures a vLLM start-up log prints, to calibrate a plan with them.

:func:`parse_vllm_log` extracts "Model loading took X GiB", "Available KV cache
memory: Y GiB" (negative when the start-up failed) and the rest;
:func:`calibration_from_log` maps them onto :class:`~simulator.base.specs.DeploymentSpec`
overrides and :func:`calibrate` applies them. Pure: no Django.
"""

from __future__ import annotations

import re
from dataclasses import replace

from simulator.base import DeploymentSpec, SpecError

_NUM = r"(-?\d[\d,]*(?:\.\d+)?)"
_LOG_PATTERNS: list[tuple[str, str, str]] = [
    # (key, regex, unit) - unit "GiB", "GB" (vLLM V0 printed GiB values labelled GB), "int", "float"
    ("model_loading_gib", r"Model loading took\s+" + _NUM + r"\s*GiB", "GiB"),
    ("model_loading_gib", r"Loading model weights took\s+" + _NUM + r"\s*GB", "GiB"),
    ("available_kv_gib", r"Available KV cache memory:\s*" + _NUM + r"\s*GiB", "GiB"),
    ("available_kv_gib", r"kv_cache_size=\s*" + _NUM + r"\s*GiB", "GiB"),
    ("available_kv_gib", r"reserved for KV Cache is\s+" + _NUM + r"\s*GiB", "GiB"),
    ("kv_cache_tokens", r"GPU KV cache size:\s*" + _NUM + r"\s*tokens", "int"),
    ("max_concurrency_len", r"Maximum concurrency for\s+" + _NUM + r"\s*tokens per request", "int"),
    ("max_concurrency", r"tokens per request:\s*" + _NUM + r"\s*x", "float"),
    ("num_gpu_blocks", r"#\s*(?:GPU|cuda) blocks:\s*" + _NUM, "int"),
    ("num_gpu_blocks", r"num_gpu_blocks(?: is)?[:=]\s*" + _NUM, "int"),
    ("num_cpu_blocks", r"#\s*CPU blocks:\s*" + _NUM, "int"),
    ("total_gpu_memory_gib", r"total_gpu_memory=\s*" + _NUM + r"\s*GiB", "GiB"),
    ("total_gpu_memory_gib", r"Free memory on device \(\s*[\d.]+\s*/\s*" + _NUM + r"\s*GiB\)", "GiB"),
    ("total_gpu_memory_gib", r"total memory\s*(?:of|=|:)?\s*" + _NUM + r"\s*GiB", "GiB"),
    ("gpu_memory_utilization", r"gpu_memory_utilization\s*[=:]\s*" + _NUM, "float"),
    ("peak_torch_memory_gib", r"peak_torch_memory=\s*" + _NUM + r"\s*GiB", "GiB"),
    ("non_torch_memory_gib", r"non_torch_memory=\s*" + _NUM + r"\s*GiB", "GiB"),
    ("non_torch_memory_gib", r"non_torch_memory\s*(?:takes)?\s*" + _NUM + r"\s*GiB", "GiB"),
    ("activation_gib", r"activation peak memory(?: takes)?\s*" + _NUM + r"\s*GiB", "GiB"),
    ("cudagraph_gib", r"Graph capturing finished in\s*[\d.]+\s*secs?,\s*took\s*" + _NUM + r"\s*GiB", "GiB"),
    ("cudagraph_gib", r"CUDA graph(?: pool)? memory(?::| takes)?\s*" + _NUM + r"\s*GiB", "GiB"),
    ("block_size", r"block_size\s*[=:]\s*" + _NUM, "int"),
    ("max_model_len", r"max_model_len\s*[=:]\s*" + _NUM, "int"),
    ("tensor_parallel_size", r"tensor_parallel_size\s*[=:]\s*" + _NUM, "int"),
]


def parse_vllm_log(text: str) -> dict[str, float | int]:
    """Extract the figures a vLLM start-up log prints.

    Recognised (first match wins): ``model_loading_gib`` ("Model loading took X GiB",
    V0 "Loading model weights took X GB"), ``available_kv_gib`` ("Available KV cache
    memory: Y GiB", V0 ``kv_cache_size=``), ``kv_cache_tokens`` ("GPU KV cache size: N
    tokens"), ``max_concurrency`` and ``max_concurrency_len``, ``num_gpu_blocks``,
    ``num_cpu_blocks``, ``total_gpu_memory_gib``, ``gpu_memory_utilization``,
    ``peak_torch_memory_gib``, ``non_torch_memory_gib``, ``activation_gib``,
    ``cudagraph_gib``, ``block_size``, ``max_model_len``, ``tensor_parallel_size``.

    Returns
    -------
    dict
        Only the keys found; GiB figures as float, counts as int.
    """
    if not isinstance(text, str):
        raise SpecError("must be text", field="log")
    out: dict[str, float | int] = {}
    for key, pat, unit in _LOG_PATTERNS:
        if key in out:
            continue
        m = re.search(pat, text, flags=re.IGNORECASE)
        if not m:
            continue
        raw = m.group(1).replace(",", "")
        try:
            out[key] = int(float(raw)) if unit == "int" else float(raw)
        except ValueError:
            continue
    return out


def calibration_from_log(parsed: dict[str, float | int]) -> dict[str, float]:
    """Deployment overrides from :func:`parse_vllm_log` output:
    ``weights_gib``, ``available_kv_gib``, ``activation_gib``, ``non_torch_gib``, ``cudagraph_gib``."""
    mapping = {
        "model_loading_gib": "weights_gib",
        "available_kv_gib": "available_kv_gib",
        "activation_gib": "activation_gib",
        "non_torch_memory_gib": "non_torch_gib",
        "cudagraph_gib": "cudagraph_gib",
    }
    return {dst: float(parsed[src]) for src, dst in mapping.items() if src in parsed}


def calibrate(deployment: DeploymentSpec, log_text: str) -> DeploymentSpec:
    """A copy of ``deployment`` with the figures of a pasted vLLM log as overrides."""
    return replace(deployment, **calibration_from_log(parse_vllm_log(log_text)))


__all__ = ["calibrate", "calibration_from_log", "parse_vllm_log"]
