"""Sweep axes, values and metrics as a person reads them, with units (pure text, no figures).

Shared by the figures, the advice sentences, the forms and the exports, so a
value reads the same everywhere: "Request rate 4 requests/s", "2,400 KV blocks".
"""

from __future__ import annotations

import math

from planner.sweeps.axes import AXES
from simulator.base import figure

#: Axis names as a person reads them, with units (the definition's own labels are the knob names).
AXIS_LABELS = {
    "num_gpu_blocks": ("KV blocks", "blocks"),
    "gpu_memory_utilization": ("GPU memory utilization", "fraction"),
    "rate": ("Request rate", "requests/step"),
    "block_size": ("Block size", "tokens"),
    "max_num_seqs": ("Max running requests (max_num_seqs)", "requests"),
    "max_num_batched_tokens": ("Max batched tokens (max_num_batched_tokens)", "tokens"),
    "long_prefill_token_threshold": ("Long-prefill threshold (long_prefill_token_threshold)", "tokens"),
    "enable_prefix_caching": ("Prefix caching", ""),
    "prompt_scale": ("Prompt length scale", "x"),
    "output_scale": ("Output length scale", "x"),
    "shared_prefix_fraction": ("Shared-prefix fraction", "fraction"),
    "gpu": ("GPU type", ""),
    "tensor_parallel_size": ("GPUs (tensor parallel)", "GPUs"),
    "data_parallel_size": ("Data-parallel ranks (DP)", "ranks"),
    "enable_expert_parallel": ("Expert parallelism", ""),
    "cpu_tier_gib": ("CPU KV tier", "GiB"),
    "num_instances": ("Replicas", "instances"),
    "routing": ("Routing policy", ""),
}
#: Metrics as a person reads them: (label, unit).
METRIC_LABELS = {
    "preemptions_per_request": ("Preemptions per request", "events/request"),
    "ttft_p50_steps": ("TTFT p50", "steps"), "ttft_p99_steps": ("TTFT p99", "steps"),
    "ttft_p50_s": ("TTFT p50", "ms"), "ttft_p90_s": ("TTFT p90", "ms"), "ttft_p99_s": ("TTFT p99", "ms"),
    "itl_mean_s": ("ITL mean", "ms"),
    "itl_p50_s": ("ITL p50", "ms"), "itl_p90_s": ("ITL p90", "ms"), "itl_p99_s": ("ITL p99", "ms"),
    "e2e_p50_s": ("E2E latency p50", "s"), "e2e_p99_s": ("E2E latency p99", "s"),
    "throughput_tok_s": ("Throughput", "tokens/s"), "throughput_tok_per_step": ("Throughput", "tokens/step"),
    "mean_kv_usage": ("Mean KV usage", "%"), "peak_kv_usage": ("Peak KV usage", "%"),
    "prefix_cache_hit_rate": ("Prefix-cache hit rate", "%"),
    "request_imbalance": ("Request imbalance", "max/mean"), "cpu_tier_hit_tokens": ("CPU tier hits", "tokens"),
    "deployment_shape": ("Deployment", ""), "dp_dummy_steps": ("Dummy steps (idle DP ranks)", "steps"),
    "cost_per_hour": ("Cost", "USD/hour"), "cost_per_m_output_tokens": ("Cost", "USD per M output tokens"),
}


#: Latencies the points store in seconds (``*_s``) that pages show in milliseconds, as the advice, the replicas
#: and search pages and the latency targets give them; downloads keep seconds and name the unit.
MS_METRICS = frozenset(m for m, (_, unit) in METRIC_LABELS.items() if unit == "ms")


def display_value(metric: str, value):
    """``value`` of ``metric`` in the unit :data:`METRIC_LABELS` shows it in (seconds to ms); None stays None."""
    if metric in MS_METRICS and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value * 1000
    return value


def axis_label(param: str, arrival_unit: str = "step") -> tuple[str, str]:
    """``(label, unit)`` of a sweep axis; the request rate is per step or per second as the workload says."""
    info = AXES.get(param, {"label": param, "unit": ""})
    label, unit = AXIS_LABELS.get(param, (info["label"], info["unit"]))
    if param == "rate":
        unit = "requests/s" if arrival_unit == "s" else "requests/step"
    return label, unit


def axis_title(param: str, arrival_unit: str = "step") -> str:
    """An axis title with its unit: "KV blocks (blocks)"."""
    label, unit = axis_label(param, arrival_unit)
    return f"{label} ({unit})" if unit else label


def metric_title(metric: str) -> str:
    """A metric with its unit: "TTFT p99 (steps)"."""
    label, unit = METRIC_LABELS.get(metric, (metric.replace("_", " "), ""))
    return f"{label} ({unit})" if unit else label


def value_text(param: str, value, arrival_unit: str = "step") -> str:
    """One axis value as a person reads it: "Request rate 4 requests/s", "Prefix caching on"."""
    label, unit = axis_label(param, arrival_unit)
    if param in ("num_gpu_blocks", "num_instances") and isinstance(value, int) and not isinstance(value, bool):
        noun = "KV blocks" if param == "num_gpu_blocks" else "replicas"
        return f"{value:,} {noun if value != 1 else noun[:-1]}"
    if param == "routing":
        return f"{value} routing"
    if param == "data_parallel_size" and isinstance(value, int) and not isinstance(value, bool):
        return f"DP {value:,}"
    if isinstance(value, bool):
        return f"{label} {'on' if value else 'off'}"
    if isinstance(value, (int, float)):
        num = f"{int(value):,}" if float(value).is_integer() else f"{value:,.4g}"
        if unit == "x":
            return f"{label} {num}x"
        return f"{label} {num}" if unit in ("", "fraction") else f"{label} {num} {unit}"
    return f"{label} {value}"


def cell_text(value, *, percent: bool = False) -> str:
    """A value for reading in a table cell or a sentence: thousands separators, 3 significant digits below
    1,000, fractions as % (``percent``), booleans as on/off, "–" for none."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, str):
        return value
    if percent:
        return f"{value * 100:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return figure(value)
