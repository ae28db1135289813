"""Run one chunk of sweep points as ONE batched simulation and summarize it.

No ORM here: a chunk's workload variant and point configs (plain dicts) go in,
plain JSON-ready dicts come out. Called by the Celery task adapter, the
synchronous ``/api/simulations/`` endpoint and the cliff finder.

Units. Steps are engine iterations. Seconds come from the config's cost
model: the roofline of the model on the GPU when the sweep names both
(``planner.sweeps.specs.roofline_terms``), else the linear
``step_time_model`` (``base_s + per_token_s x tokens + per_req_s x requests``
per step), so they are exactly as good as those coefficients.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from planner.sweeps import data_parallel as dpg
from planner.sweeps import disaggregated as disagg
from planner.sweeps.points import engine_config
from planner.sweeps.speculative import spec_metrics
from simulator.engine import EngineConfig
from simulator.workload import Workload, WorkloadSpec, generate_workload

#: Points kept per time series for the "over time" figure.
SERIES_POINTS = 120


def build_workload(variant: dict, trace_text: str | None = None, trace_format: str = "csv",
                   trace_options: dict | None = None) -> Workload:
    """The :class:`Workload` of a variant (generated from its spec and seed, or read from its trace in any
    format the planner takes, with its options), then scaled."""
    if variant["source"] == "spec":
        wl = generate_workload(WorkloadSpec.from_dict(variant["spec"]), seed=int(variant.get("seed", 0)))
    else:
        from planner.sweeps.sections import read_workload_trace

        wl = read_workload_trace(trace_text or "", trace_format, trace_options)[0]
    return scale_lengths(wl, float(variant.get("prompt_scale", 1.0)), float(variant.get("output_scale", 1.0)))


def workload_of(variant: dict, base: dict) -> Workload:
    """A point's workload ``variant`` built on its definition's workload part ``base`` (which holds the
    trace text, its format and options)."""
    return build_workload(variant, base.get("trace"), base.get("format", "csv"), base.get("options"))


def scale_lengths(wl: Workload, prompt_scale: float, output_scale: float) -> Workload:
    """Scale each request's unique prompt tokens and its output tokens (shared prefixes unchanged).

    A follow-up turn keeps re-sending its (scaled) parent's whole context, or where it shares only the
    parent's leading ``parent_len`` tokens (a public trace's shared blocks) those tokens, at most the
    parent's new context; contexts are rebuilt in request order. Every length stays >= 1 token.
    """
    if prompt_scale == 1.0 and output_scale == 1.0:
        return wl
    output = np.maximum(1, np.round(wl.output_len * output_scale)).astype(np.int64)
    shared = wl.shared_len()
    unique = np.maximum(1, np.round((wl.prompt_len - shared) * prompt_scale)).astype(np.int64)
    prefix_part = np.where(wl.prefix_id >= 0, wl.prefix_len[np.maximum(wl.prefix_id, 0)], 0) \
        if wl.prefix_len.size else np.zeros(wl.n, np.int64)
    prompt = np.empty(wl.n, np.int64)
    has_parent = wl.parent >= 0
    parent_len = np.array(wl.parent_len, np.int64)
    if not has_parent.any():
        prompt[:] = prefix_part + unique
    else:
        for r in range(wl.n):  # parents come earlier, so one pass suffices
            p = int(wl.parent[r])
            head = prefix_part[r]
            if p >= 0:  # all of the parent's (scaled) context, or the same leading tokens of it
                head = prompt[p] + output[p] if parent_len[r] < 0 else min(int(parent_len[r]), prompt[p] + output[p])
                parent_len[r] = -1 if parent_len[r] < 0 else head
            prompt[r] = head + unique[r]
    return Workload(prompt_len=prompt, output_len=output, arrival=wl.arrival, arrival_unit=wl.arrival_unit,
                    prefix_id=wl.prefix_id, prefix_len=wl.prefix_len, parent=wl.parent, ids=wl.ids,
                    prefix_names=wl.prefix_names, parent_len=parent_len)


def simulate_points(wl: Workload, points: list[dict], *, record_steps: bool = True,
                    progress: Callable[[float], None] | None = None, finished: list | None = None) -> list[dict]:
    """Simulate ``points`` (each ``{"index", "params", "config", "meta"}``; a
    :class:`~planner.sweeps.points.Point` with the configuration it carries) in one batched call.

    Returns one ``{"index", "params", "meta", "metrics", "totals", "series"}`` per point. ``finished``, when
    given, receives each point's result as soon as its simulation ends, so that a batch stopped part-way
    (a cancelled sweep, from ``progress``) keeps its finished points.
    """
    from simulator.batch import simulate

    configs = [engine_config(p) for p in points]  # a stored point's built from its JSON, once
    results = _disaggregated_results(wl, points, configs)  # None where the point is not disaggregated
    groups = _dp_results(wl, points, configs, results)  # each DP group's result (None for a single engine)
    batch = [i for i, r in enumerate(results) if r is None]
    if finished is not None:
        finished.extend(point_result(wl, points[i], configs[i], r, record_steps, groups[i])
                        for i, r in enumerate(results) if r is not None)
    items = [_item(wl, configs[i], points[i].get("meta", {}).get("cluster")) for i in batch]

    def landed(b: int, r) -> None:
        if finished is not None:
            i = batch[b]
            finished.append(point_result(wl, points[i], configs[i], _as_point_result(r), record_steps))

    if items:
        got = simulate(wl, items, record_steps=record_steps, max_step_points=SERIES_POINTS if record_steps else None,
                       progress=progress, on_result=landed)
        for i, r in zip(batch, got):
            results[i] = _as_point_result(r)
    return [point_result(wl, p, cfg, res, record_steps, g) for p, cfg, res, g in zip(points, configs, results, groups)]


def point_result(wl: Workload, p: dict, cfg: EngineConfig, res, record_steps: bool = True, group=None) -> dict:
    """One point's stored result: ``{"index", "params", "meta", "metrics", "totals", "series"}``, and
    ``data_parallel`` (its ranks: :func:`planner.sweeps.data_parallel.ranks`) for a DP group's point (``group``:
    its :class:`simulator.cluster.data_parallel.DPResult`)."""
    totals = {k: _json_num(v) for k, v in res.totals.items() if _is_scalar(v)}
    metrics = summarize(res, wl, cfg, p.get("meta", {}))
    cl = p.get("meta", {}).get("cluster")
    if group is not None:
        metrics.update(request_imbalance=_json_num(res.totals.get("request_imbalance")),
                       **dpg.metrics(p["data_parallel"], group, metrics["kv_cache_tokens"]))
    if cl:
        metrics.update(num_instances=cl["num_instances"], routing=cl["routing"],
                       request_imbalance=_json_num(res.totals.get("request_imbalance")),
                       token_imbalance=_json_num(res.totals.get("token_imbalance")))
    dis = p.get("meta", {}).get("disaggregated")
    if dis:
        metrics.update(prefill_instances=dis["prefill_instances"], decode_instances=dis["decode_instances"],
                       **{k: _json_num(res.totals.get(k)) for k in disagg.METRICS})
    out = {
        "index": p["index"],
        "params": p["params"],
        "meta": p.get("meta", {}),
        "metrics": metrics,
        "totals": totals,
        "series": series(res.steps) if (record_steps and not cl and res.steps is not None) else None,
    }
    if group is not None:
        out["data_parallel"] = dpg.ranks(group)
    return out


def _dp_results(wl: Workload, points: list[dict], configs: list[EngineConfig], results: list) -> list:
    """Simulate the DP groups' points (:mod:`planner.sweeps.data_parallel`) into ``results`` (their cluster
    result, shaped as a SimResult); returns each point's :class:`DPResult`, None for the others."""
    out: list = [None] * len(points)
    for i, (p, cfg) in enumerate(zip(points, configs)):
        group = p.get("data_parallel")
        if group and results[i] is None:
            out[i] = dpg.run(wl, cfg, group, (p["meta"].get("cluster") or {}).get("num_instances", 1))
            results[i] = _as_point_result(out[i].cluster)
    return out


def _disaggregated_results(wl: Workload, points: list[dict], configs: list[EngineConfig]) -> list:
    """The disaggregated points' results (:mod:`planner.sweeps.disaggregated`), None for the others."""
    out: list = [None] * len(points)
    for i, (p, cfg) in enumerate(zip(points, configs)):
        dis = p.get("meta", {}).get("disaggregated")
        if dis:
            out[i] = disagg.as_point_result(disagg.deployment(cfg, dis, dis.get("prefill_engine")).run(wl))
    return out


def _item(wl: Workload, cfg: EngineConfig, cluster: dict | None):
    """A point's batch item: its configuration, or N replicas of it behind a router."""
    if not cluster:
        return cfg
    from simulator.cluster import Deployment

    return Deployment(cfg, int(cluster["num_instances"]), cluster["routing"],
                      float(cluster.get("router_delay_s", 0.0)) if wl.arrival_unit == "s" else 0.0)


def _as_point_result(res):
    """A cluster point's result shaped like a SimResult for :func:`summarize` (others as they are)."""
    from simulator.cluster import ClusterResult
    from simulator.engine import SimResult

    if not isinstance(res, ClusterResult):
        return res
    load = res.load

    totals = dict(res.totals)
    totals["request_imbalance"] = load.request_imbalance
    totals["token_imbalance"] = load.token_imbalance
    return SimResult(totals=totals, requests=res.requests, steps=None, arrival_unit=res.arrival_unit)


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (int, float, bool, str, np.integer, np.floating)) or v is None


def _json_num(v: Any) -> Any:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None
    return v


def _pct(a: np.ndarray | None, q: float) -> float | None:
    if a is None:
        return None
    a = a[np.isfinite(a)]
    return float(np.percentile(a, q)) if a.size else None


def summarize(res, wl: Workload, cfg: EngineConfig, meta: dict) -> dict:
    """The metrics the pages, advice and exports use (units in the names).

    ``res`` is a :class:`simulator.engine.results.SimResult` (columnar per-request arrays).
    TTFT in steps is ``first_token_step - arrival_step`` for step arrivals; TTFT
    and end-to-end latency in seconds exist for arrivals in seconds (the engine's
    clock). Throughput in tokens/s needs seconds: the simulated duration for
    arrivals in seconds, else ``num_steps x base_s`` when the step-time model is
    a constant (``per_token_s = per_req_s = 0``), else ``None``.
    """
    t = res.totals
    r = res.requests
    n = wl.n
    finished = int(t.get("finished", 0))
    preemptions = int(t.get("preemptions", 0))
    num_steps = int(t.get("num_steps", 0))
    first_tok = np.asarray(r["first_token_step"], np.float64)
    done_mask = np.asarray(r["finish_step"]) >= 0
    first_tok[first_tok < 0] = np.nan
    arrival = np.asarray(r["arrival"], np.float64)
    ttft_steps = first_tok - arrival if wl.arrival_unit == "step" else None
    ttft_s = e2e_s = None
    if wl.arrival_unit == "s":
        ttft_s = np.asarray(r["first_token_time_s"], np.float64) - arrival
        e2e_s = np.asarray(r["finish_time_s"], np.float64) - arrival
        # Steps from arrival to first token are not defined on a seconds clock; use first scheduled.
        ttft_steps = None
    lat = res.latency() if wl.arrival_unit == "s" else None
    itl = lat.itl if lat is not None and lat.itl.count else None
    out_tokens = float(np.asarray(r["num_output_tokens"])[done_mask].sum())
    duration_s = t.get("duration_s")
    stm = cfg.step_time_model
    if duration_s is None and num_steps and cfg.cost_model is None and stm.per_token_s == 0 and stm.per_req_s == 0:
        duration_s = num_steps * stm.base_s
    tput_s = (out_tokens / duration_s) if duration_s else None
    price = meta.get("price_per_hour")
    metrics = {
        "requests": n,
        "finished": finished,
        "dropped_unservable": int(t.get("dropped_unservable", 0)),
        "preemptions": preemptions,
        "preemptions_per_request": preemptions / n if n else 0.0,
        "requests_preempted": int(t.get("requests_preempted_at_least_once", 0)),
        "recomputed_tokens": int(t.get("recomputed_tokens", 0)),
        "prefix_cache_hit_rate": t.get("prefix_cache_hit_rate"),
        "clock": "cost_model" if cfg.cost_model is not None else "step_time_model",
        "clock_note": meta.get("clock_note"),
        "cpu_tier_gib": (cfg.cpu_tier.size_gib if cfg.cpu_tier is not None and cfg.cpu_tier.size_gib is not None
                         else 0.0),
        "cpu_tier_hit_tokens": t.get("cpu_tier_hit_tokens"),
        "tier_bytes_onboarded": t.get("tier_bytes_onboarded"),
        "tier_onboard_time_s": t.get("tier_onboard_time_s"),
        "peak_kv_usage": t.get("peak_kv_usage"),
        "mean_kv_usage": t.get("mean_kv_usage"),
        "peak_running": int(t.get("peak_running", 0)),
        "peak_waiting": int(t.get("peak_waiting", 0)),
        "num_steps": num_steps,
        "ttft_p50_steps": _pct(ttft_steps, 50),
        "ttft_p99_steps": _pct(ttft_steps, 99),
        "ttft_p50_s": _pct(ttft_s, 50),
        "ttft_p99_s": _pct(ttft_s, 99),
        "e2e_p50_s": _pct(e2e_s, 50),
        "e2e_p99_s": _pct(e2e_s, 99),
        "output_tokens": out_tokens,
        "duration_s": duration_s,
        "throughput_tok_s": tput_s,
        "throughput_tok_per_step": (out_tokens / num_steps) if num_steps else None,
        "ttft_p90_s": _pct(ttft_s, 90),
        "itl_mean_s": itl.mean if itl else None,
        "itl_p50_s": itl.p50 if itl else None,
        "itl_p90_s": itl.p90 if itl else None,
        "itl_p99_s": itl.p99 if itl else None,
        "num_gpu_blocks": cfg.num_gpu_blocks,
        "kv_cache_tokens": (cfg.num_gpu_blocks - 1) * cfg.block_size,
        "cost_per_hour": price,
        "cost_per_m_output_tokens": (price / (tput_s * 3600) * 1e6) if (price and tput_s) else None,
    }
    metrics.update(spec_metrics(t))
    return {k: _json_num(v) for k, v in metrics.items()}


def series(steps: dict | None) -> dict | None:
    """KV usage, running and waiting over time (already downsampled by the engine)."""
    if not steps:
        return None
    out: dict[str, list] = {}
    for name in ("step", "time_s", "num_running", "num_waiting", "kv_usage"):
        if name in steps:
            col = np.asarray(steps[name])
            if name in ("kv_usage", "time_s"):
                out[name] = [round(float(v), 5) for v in col]
            else:
                out[name] = [int(v) for v in col]
    return out or None
