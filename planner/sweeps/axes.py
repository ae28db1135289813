"""The parameters a sweep may vary (its axes), and the check that turns one axis into its list of values.

An axis is ``{"param": "num_gpu_blocks", "values": [2000, 4000]}`` or a range
``{"param": "rate", "start": 1, "stop": 16, "steps": 5, "scale": "log"}``.
"""

from __future__ import annotations

import math
from typing import Any

from planner.errors import FieldErrors
from planner.sweeps import data_parallel as dpg
from planner.sweeps import disaggregated as disagg
from planner.sweeps.limits import MAX_SWEEP_INSTANCES, max_points
from planner.sweeps.speculative import axis_problem
from simulator.base import unknown_message
from simulator.cluster import ClusterError, parse_routing

#: Axis parameters, what they change and their value type.
AXES: dict[str, dict[str, Any]] = {
    "num_gpu_blocks": {"kind": "engine", "type": int, "label": "KV blocks", "unit": "blocks", "cliff": True},
    "gpu_memory_utilization": {"kind": "sizing", "type": float, "label": "GPU memory utilization",
                               "unit": "fraction", "cliff": True},
    "rate": {"kind": "workload", "type": float, "label": "Request rate", "unit": "req/unit", "cliff": True},
    "block_size": {"kind": "engine", "type": int, "label": "Block size", "unit": "tokens"},
    "max_num_seqs": {"kind": "engine", "type": int, "label": "max_num_seqs", "unit": "requests"},
    "max_num_batched_tokens": {"kind": "engine", "type": int, "label": "max_num_batched_tokens",
                               "unit": "tokens"},
    "long_prefill_token_threshold": {"kind": "engine", "type": int, "label": "long_prefill_token_threshold",
                                     "unit": "tokens"},
    "enable_prefix_caching": {"kind": "engine", "type": bool, "label": "Prefix caching", "unit": ""},
    "prompt_scale": {"kind": "workload", "type": float, "label": "Prompt length scale", "unit": "x"},
    "output_scale": {"kind": "workload", "type": float, "label": "Output length scale", "unit": "x"},
    "shared_prefix_fraction": {"kind": "workload", "type": float, "label": "Shared-prefix fraction",
                               "unit": "fraction"},
    "gpu": {"kind": "sizing", "type": str, "label": "GPU type", "unit": ""},
    "tensor_parallel_size": {"kind": "sizing", "type": int, "label": "GPUs (tensor parallel)", "unit": "GPUs"},
    **dpg.AXES,  # data_parallel_size, enable_expert_parallel
    "cpu_tier_gib": {"kind": "tier", "type": float, "label": "CPU KV tier", "unit": "GiB"},
    "num_instances": {"kind": "cluster", "type": int, "label": "Replicas", "unit": "instances"},
    "routing": {"kind": "cluster", "type": str, "label": "Routing policy", "unit": ""},
    **disagg.AXES,  # prefill_instances, decode_instances
    "num_speculative_tokens": {"kind": "speculative", "type": int, "label": "Draft tokens per step (k)",
                               "unit": "tokens"},
    "acceptance_rate": {"kind": "speculative", "type": float, "label": "Draft acceptance rate",
                        "unit": "fraction"},
}
#: Axes the planner knows but cannot run yet, with the message a user gets.
LATER_AXES: dict[str, str] = {}
#: Integer axes that may take 0 (every other integer axis starts at 1).
ZERO_ALLOWED = ("long_prefill_token_threshold", "num_speculative_tokens")
_KIND_WORDS = {bool: "true or false", str: "a catalog slug or profile id", int: "a whole number", float: "a number"}


def axis_values(axis: Any, where: str, err: FieldErrors) -> tuple[str, list] | None:
    """Validate one axis and expand it to its list of values (None after adding the problem to ``err``)."""
    param = _param(axis, where, err)
    if param is None:
        return None
    typ = AXES[param]["type"]
    values = _listed(axis, where, err) if "values" in axis else _range(axis, param, typ, where, err)
    if values is None:
        return None
    out = _typed(values, typ, where, err)
    if out is None:
        return None
    problem = _values_problem(param, typ, out)
    if problem:
        err.add(f"{where}.values", problem)
        return None
    if param == "routing":
        for i, v in enumerate(out):
            try:
                out[i] = str(parse_routing(str(v)))
            except ClusterError as exc:
                err.add(f"{where}.values[{i}]", str(exc))
                return None
    return param, out


def _param(axis: Any, where: str, err: FieldErrors) -> str | None:
    """The axis's parameter, when the axis is an object naming a known one with known fields."""
    if not isinstance(axis, dict):
        err.add(where, "must be an object with 'param' and 'values' or 'start'/'stop'/'steps'")
        return None
    param = axis.get("param")
    if not isinstance(param, str):
        err.add(f"{where}.param", f"must be the name of a sweep axis (known: {', '.join(AXES)})")
        return None
    if param in LATER_AXES:
        err.add(f"{where}.param", LATER_AXES[param])
        return None
    if param not in AXES:
        err.add(f"{where}.param", unknown_message(param, AXES, what=f"sweep axis {param!r}"))
        return None
    if set(axis) - {"param", "values", "start", "stop", "steps", "scale"}:
        err.unknown(axis, ["param", "values", "start", "stop", "steps", "scale"], where)
        return None
    return param


def _listed(axis: dict, where: str, err: FieldErrors) -> list | None:
    values = axis["values"]
    if not isinstance(values, list) or not values:
        err.add(f"{where}.values", "must be a non-empty list")
        return None
    if len(values) > max_points():
        err.add(f"{where}.values", f"at most {max_points():,} values")
        return None
    return values


def _range(axis: dict, param: str, typ: type, where: str, err: FieldErrors) -> list | None:
    """The values of a ``start``/``stop``/``steps`` range, linear or log-spaced (integers rounded, deduplicated)."""
    if typ in (bool, str):
        err.add(f"{where}.values", f"{param} takes a list of values, not a range")
        return None
    start, stop, steps = axis.get("start"), axis.get("stop"), axis.get("steps")
    scale = axis.get("scale", "linear")
    bad = False
    for k, v in (("start", start), ("stop", stop)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            err.add(f"{where}.{k}", "must be a number (or give 'values')")
            bad = True
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= max_points():
        err.add(f"{where}.steps", f"must be a whole number from 1 to {max_points():,}")
        bad = True
    if scale not in ("linear", "log"):
        err.add(f"{where}.scale", "must be 'linear' or 'log'")
        bad = True
    if bad:
        return None
    if scale == "log" and (start <= 0 or stop <= 0):
        err.add(f"{where}.start", "a log range needs start and stop > 0")
        return None
    if steps == 1:
        values = [start]
    elif scale == "log":
        a, b = math.log(start), math.log(stop)
        values = [math.exp(a + (b - a) * i / (steps - 1)) for i in range(steps)]
    else:
        values = [start + (stop - start) * i / (steps - 1) for i in range(steps)]
    if typ is int:
        values = sorted(set(int(round(v)) for v in values), reverse=stop < start)
    return values


def _typed(values: list, typ: type, where: str, err: FieldErrors) -> list | None:
    """Each value checked against the axis's type (ints and floats normalized), or None at the first bad one."""
    out = []
    for i, v in enumerate(values):
        if typ is bool:
            ok = isinstance(v, bool)
        elif typ is str:
            ok = isinstance(v, (str, int)) and not isinstance(v, bool)
        elif typ is int:
            ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v == int(v)
            v = int(v) if ok else v
        else:
            ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
            v = float(v) if ok else v
        if not ok:
            err.add(f"{where}.values[{i}]", f"must be {_KIND_WORDS[typ]}, got {v!r}")
            return None
        out.append(v)
    return out


def _values_problem(param: str, typ: type, out: list) -> str | None:
    """What is wrong with an axis's typed values as a whole (distinct, within the parameter's range), or None."""
    if len(set(map(repr, out))) != len(out):
        return "values must be distinct"
    if param == "num_instances" and max(out) > MAX_SWEEP_INSTANCES:
        return f"at most {MAX_SWEEP_INSTANCES} replicas per point"
    if param == "cpu_tier_gib" and (min(out) < 0 or max(out) > 100_000):
        return "CPU tier sizes must be between 0 and 100,000 GiB (0 = no CPU tier)"
    if param in ("prompt_scale", "output_scale", "rate") and min(out) <= 0:
        return f"{param} values must be > 0"
    if param == "gpu_memory_utilization" and not all(0 < v <= 1 for v in out):
        return f"{param} values must be fractions in (0, 1]"
    if param == "shared_prefix_fraction" and not all(0 <= v <= 1 for v in out):
        return f"{param} values must be fractions in (0, 1]"
    if axis_problem(param, out):
        return axis_problem(param, out)
    if typ is int and param not in ZERO_ALLOWED and min(out) < 1:
        return f"{param} values must be >= 1"
    return None
