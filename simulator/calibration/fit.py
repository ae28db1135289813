"""Calibration of the step clock from a user's own measurements.

Three inputs are read (each parser raises :class:`CalibrationError` naming the
row and field of the first bad value):

* the JSON ``vllm bench serve --save-result`` writes (its summary: ``mean_ttft_ms``,
  ``mean_itl_ms`` or ``mean_tpot_ms``, ``mean_e2el_ms``, ``total_input_tokens``,
  ``total_output_tokens``, ``completed``, ``request_rate``; with
  ``--save-detailed`` also the per-request ``input_lens``, ``output_lens``, ``ttfts``);
* a CSV of one request a row: ``arrival_time`` (s), ``prompt_tokens``,
  ``output_tokens``, ``ttft_s`` and ``e2e_s`` (or ``ttft_ms`` / ``e2e_ms``);
* a Prometheus text scrape of vLLM's ``/metrics``: the ``_sum`` and ``_count`` of
  ``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds`` (or
  ``vllm:time_per_output_token_seconds``), ``vllm:e2e_request_latency_seconds``,
  and ``vllm:prompt_tokens_total`` / ``vllm:generation_tokens_total``.

:func:`fit` replays the measured load through the simulator with the roofline
clock of the user's (model, GPU, deployment) and fits a few physically meaningful
coefficients (``bandwidth_efficiency``, ``mfu``, ``serve_request_s`` by default)
with :func:`scipy.optimize.least_squares`, bounded and deterministic (seeded
workload, fixed start point and finite-difference step).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulator.base.errors import FieldError
from simulator.base.json_input import loads_checked
from simulator.batch import budget, simulate
from simulator.batch.budget import Price, WorkloadSize
from simulator.clock import RooflineStepTime, model_coefficients
from simulator.engine import EngineConfig
from simulator.sizing import plan
from simulator.workload import parse_trace

#: Coefficients a calibration may fit, with their bounds (physical ranges).
FIT_BOUNDS = {
    "mfu": (0.2, 1.0),
    "attention_efficiency": (0.1, 1.0),
    "bandwidth_efficiency": (0.3, 1.0),
    "kv_bandwidth_efficiency": (0.3, 1.0),
    "step_overhead_s": (0.0, 0.02),
    "per_request_overhead_s": (0.0, 1e-3),
    "serve_request_s": (0.0, 1.0),
    "serve_output_token_s": (0.0, 0.01),
}
DEFAULT_FIT = ("bandwidth_efficiency", "mfu", "serve_request_s")
#: Values beyond these are refused as absurd.  # s, tokens
MAX_LATENCY_S = 3600.0
MAX_TOKENS = 10_000_000
MAX_SIMULATED = 2000


class CalibrationError(FieldError):
    """An unusable measurement file or fit request; the message names the row and field."""


@dataclass
class Measurement:
    """What a user measured: run-wide means and, where known, the requests one by one."""

    source: str  # "vllm-bench", "csv" or "prometheus"
    model: str | None
    requests: int
    mean_prompt_tokens: float
    mean_output_tokens: float
    mean_ttft_s: float
    mean_itl_s: float
    mean_e2e_s: float
    request_rate: float | None = None  # requests/s, when the file says
    rows: dict[str, np.ndarray] | None = None  # arrival_time, prompt_tokens, output_tokens, ttft_s, e2e_s
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "model": self.model, "requests": self.requests,
                "mean_prompt_tokens": self.mean_prompt_tokens, "mean_output_tokens": self.mean_output_tokens,
                "mean_ttft_s": self.mean_ttft_s, "mean_itl_s": self.mean_itl_s, "mean_e2e_s": self.mean_e2e_s,
                "request_rate": self.request_rate, "per_request": self.rows is not None, "notes": self.notes}


def _number(value: Any, where: str, lo: float, hi: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        shown = "a number too large" if isinstance(value, int) else repr(value)[:60]
        raise CalibrationError(f"must be a number, got {shown}", field=where) from None
    if not math.isfinite(v) or not lo <= v <= hi:
        raise CalibrationError(f"{v:g} is outside [{lo:g}, {hi:g}]", field=where)
    return v


def _latencies(ttft: float, itl: float, e2e: float, where: str) -> None:
    if e2e < ttft:
        raise CalibrationError(f"mean E2E ({e2e:g} s) is shorter than mean TTFT ({ttft:g} s)", field=where)
    if itl <= 0:
        raise CalibrationError("the inter-token latency must be > 0", field=where)


# --------------------------------------------------------------------------- parsers


def parse_vllm_bench(text: str) -> Measurement:
    """The JSON of ``vllm bench serve --save-result``."""
    try:
        d = loads_checked(text)
    except json.JSONDecodeError as exc:
        raise CalibrationError(f"not JSON ({exc.msg} at line {exc.lineno})", field="file") from None
    except ValueError as exc:  # JsonInputError: too deep, a number too large, NUL ... (the request body's checks)
        raise CalibrationError(f"{exc}", field="file") from None
    if not isinstance(d, dict):
        raise CalibrationError("a vllm bench serve result is a JSON object", field="file")
    for key in ("mean_ttft_ms", "mean_e2el_ms", "completed", "total_input_tokens", "total_output_tokens"):
        if key not in d:
            raise CalibrationError("missing (is this the JSON of vllm bench serve --save-result?)", field=key)
    n = int(_number(d["completed"], "completed", 1, 1e9))
    ttft = _number(d["mean_ttft_ms"], "mean_ttft_ms", 0, MAX_LATENCY_S * 1e3) / 1e3
    e2e = _number(d["mean_e2el_ms"], "mean_e2el_ms", 0, MAX_LATENCY_S * 1e3) / 1e3
    itl_key = "mean_itl_ms" if "mean_itl_ms" in d else "mean_tpot_ms"
    if itl_key not in d:
        raise CalibrationError("missing (nor mean_tpot_ms)", field="mean_itl_ms")
    itl = _number(d[itl_key], itl_key, 0, MAX_LATENCY_S * 1e3) / 1e3
    _latencies(ttft, itl, e2e, "file")
    rate = d.get("request_rate")
    rate = None if rate in (None, "inf") or (isinstance(rate, float) and math.isinf(rate)) else \
        _number(rate, "request_rate", 1e-6, 1e6)
    m = Measurement("vllm-bench", d.get("model_id"), n,
                    _number(d["total_input_tokens"], "total_input_tokens", 1, MAX_TOKENS * 1e3) / n,
                    _number(d["total_output_tokens"], "total_output_tokens", 1, MAX_TOKENS * 1e3) / n,
                    ttft, itl, e2e, rate)
    if all(k in d for k in ("input_lens", "output_lens", "ttfts")) and rate:
        m.notes.append("per-request lengths read; arrivals regenerated as Poisson at request_rate")
    return m


_CSV_REQUIRED = ("arrival_time", "prompt_tokens", "output_tokens")


def parse_request_csv(text: str) -> Measurement:
    """One request a row: arrival_time, prompt_tokens, output_tokens, ttft_s|ttft_ms, e2e_s|e2e_ms."""
    reader = csv.DictReader(io.StringIO(text))
    cols = [c.strip() for c in (reader.fieldnames or [])]
    for c in _CSV_REQUIRED:
        if c not in cols:
            raise CalibrationError(f"column {c}: missing (need {', '.join(_CSV_REQUIRED)}, ttft_s, e2e_s)")
    unit = {}
    for name in ("ttft", "e2e"):
        unit[name] = 1.0 if f"{name}_s" in cols else 1e-3 if f"{name}_ms" in cols else None
        if unit[name] is None:
            raise CalibrationError(f"column {name}_s: missing (or {name}_ms)")
    out: dict[str, list[float]] = {k: [] for k in ("arrival_time", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s")}
    for i, row in enumerate(reader, start=2):
        row = {(k or "").strip(): v for k, v in row.items()}
        where = f"row {i}"
        out["arrival_time"].append(_number(row.get("arrival_time"), f"{where}, arrival_time", 0, 1e9))
        out["prompt_tokens"].append(_number(row.get("prompt_tokens"), f"{where}, prompt_tokens", 1, MAX_TOKENS))
        out["output_tokens"].append(_number(row.get("output_tokens"), f"{where}, output_tokens", 1, MAX_TOKENS))
        for name in ("ttft", "e2e"):
            col = f"{name}_s" if unit[name] == 1.0 else f"{name}_ms"
            out[f"{name}_s"].append(_number(row.get(col), f"{where}, {col}", 0, MAX_LATENCY_S / unit[name]) * unit[name])
        if out["e2e_s"][-1] < out["ttft_s"][-1]:
            raise CalibrationError(f"{where}, e2e: shorter than its TTFT")
    if not out["arrival_time"]:
        raise CalibrationError("no request rows", field="file")
    rows = {k: np.array(v) for k, v in out.items()}
    order = np.argsort(rows["arrival_time"], kind="stable")
    rows = {k: v[order] for k, v in rows.items()}
    rows["arrival_time"] = rows["arrival_time"] - rows["arrival_time"][0]
    multi = rows["output_tokens"] > 1
    if not multi.any():
        raise CalibrationError("every request has one output token; no inter-token latency to fit", field="output_tokens")
    itl = float(np.mean((rows["e2e_s"] - rows["ttft_s"])[multi] / (rows["output_tokens"][multi] - 1)))
    m = Measurement("csv", None, len(order), float(rows["prompt_tokens"].mean()), float(rows["output_tokens"].mean()),
                    float(rows["ttft_s"].mean()), itl, float(rows["e2e_s"].mean()), rows=rows)
    _latencies(m.mean_ttft_s, max(m.mean_itl_s, 1e-12), m.mean_e2e_s, "file")
    span = rows["arrival_time"][-1]
    m.request_rate = (len(order) - 1) / span if span > 0 else None
    return m


_PROM_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')


def parse_prometheus(text: str) -> Measurement:
    """A text scrape of vLLM's ``/metrics`` (histogram sums and counts, token counters)."""
    sums: dict[str, float] = {}
    models: set[str] = set()
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        m = _PROM_LINE.match(line)
        if not m:
            raise CalibrationError(f"line {i}: not a Prometheus sample")
        name, labels, value = m.groups()
        if not name.startswith("vllm:"):
            continue
        mm = re.search(r'model_name="([^"]*)"', labels or "")
        if mm:
            models.add(mm.group(1))
        if name.endswith(("_sum", "_count", "_total")):
            sums[name] = sums.get(name, 0.0) + _number(value, f"line {i}, {name}", 0, 1e15)
    if len(models) > 1:
        raise CalibrationError(f"the scrape mixes models ({', '.join(sorted(models))}); scrape one", field="model_name")

    def mean(base: str, *alts: str) -> float:
        for b in (base, *alts):
            s, c = sums.get(f"vllm:{b}_sum"), sums.get(f"vllm:{b}_count")
            if s is not None and c:
                return s / c
        raise CalibrationError("no _sum/_count samples with a count > 0", field=f"vllm:{base}")
    ttft = mean("time_to_first_token_seconds")
    itl = mean("inter_token_latency_seconds", "time_per_output_token_seconds")
    e2e = mean("e2e_request_latency_seconds")
    n = sums.get("vllm:e2e_request_latency_seconds_count") or 0
    prompt, gen = sums.get("vllm:prompt_tokens_total"), sums.get("vllm:generation_tokens_total")
    if not prompt or not gen:
        raise CalibrationError("vllm:prompt_tokens_total: missing (and vllm:generation_tokens_total)")
    _latencies(ttft, itl, e2e, "file")
    return Measurement("prometheus", next(iter(models), None), int(n), prompt / n, gen / n, ttft, itl, e2e,
                       notes=["a scrape has no arrival times: give the request rate the run used"])


def parse_measurement(text: str, fmt: str | None = None) -> Measurement:
    """Parse ``text`` as ``fmt`` ("vllm-bench", "csv", "prometheus") or guess it from its first characters."""
    head = text.lstrip()[:200]
    if fmt is None:
        fmt = "vllm-bench" if head.startswith("{") else "prometheus" if (head.startswith("#") or "vllm:" in head) \
            else "csv"
    parsers = {"vllm-bench": parse_vllm_bench, "csv": parse_request_csv, "prometheus": parse_prometheus}
    if fmt not in parsers:
        raise CalibrationError(f"must be one of {', '.join(parsers)}, got {fmt!r}", field="format")
    return parsers[fmt](text)


# --------------------------------------------------------------------------- fitting


@dataclass
class FitResult:
    """Fitted coefficients, the error before and after, and measured against predicted."""

    coefficients: dict[str, float]  # the full RooflineCoefficients after the fit
    fitted: dict[str, float]  # the ones the fit moved
    measured: dict[str, float]  # s
    predicted_before: dict[str, float]  # s, default coefficients
    predicted: dict[str, float]  # s, fitted
    error_before_pct: dict[str, float]
    error_pct: dict[str, float]
    simulated_requests: int
    evaluations: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def replay_workload(meas: Measurement, request_rate: float | None = None, max_requests: int = MAX_SIMULATED,
                    seed: int = 0):
    """The measured load as a simulator workload: the rows themselves, or Poisson arrivals at the rate."""
    if meas.rows is not None:
        r = meas.rows
        n = min(len(r["arrival_time"]), max_requests)
        lines = ["arrival_time,prompt_tokens,output_tokens"] + [
            f"{a:.6f},{int(p)},{int(o)}" for a, p, o in zip(r["arrival_time"][:n], r["prompt_tokens"][:n],
                                                           r["output_tokens"][:n])]
        return parse_trace("\n".join(lines) + "\n", fmt="csv", name="measurement")
    rate = request_rate or meas.request_rate
    if not rate:
        raise CalibrationError("the file has no arrival times; give the request rate of the run", field="request_rate")
    rng = np.random.default_rng(seed)
    n = max(min(meas.requests, max_requests), 1)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
    p, o = max(int(round(meas.mean_prompt_tokens)), 1), max(int(round(meas.mean_output_tokens)), 1)
    lines = ["arrival_time,prompt_tokens,output_tokens"] + [f"{a:.6f},{p},{o}" for a in arrivals]
    return parse_trace("\n".join(lines) + "\n", fmt="csv", name="measurement")


def _predict(workload, engine: dict, model, gpu, deployment, coefficients: dict) -> dict[str, float]:
    clock = RooflineStepTime.from_specs(model, gpu, coefficients=coefficients, deployment=deployment)
    cfg = EngineConfig.from_dict({**engine, "cost_model": {"kind": "terms", **clock.terms.to_dict()}})
    res = simulate(workload, [cfg])[0]
    req = res.requests
    done = np.array([s == "finished" for s in req["status"]])
    if not done.any():
        return {"ttft_s": math.inf, "itl_s": math.inf, "e2e_s": math.inf}
    arr = np.asarray(req["arrival"], np.float64)[done]
    ttft = np.asarray(req["first_token_time_s"])[done] - arr
    e2e = np.asarray(req["finish_time_s"])[done] - arr
    out = np.asarray(req["num_output_tokens"], np.float64)[done]
    multi = out > 1
    itl = float(np.mean((e2e - ttft)[multi] / (out[multi] - 1))) if multi.any() else 0.0
    return {"ttft_s": float(ttft.mean()), "itl_s": itl, "e2e_s": float(e2e.mean())}


def _errors(pred: dict[str, float], meas: dict[str, float]) -> dict[str, float]:
    return {k: (pred[k] - meas[k]) / meas[k] * 100.0 for k in meas}


def _fit_setup(meas: Measurement, model, gpu, deployment, fit_params: tuple[str, ...], request_rate: float | None,
               max_requests: int) -> tuple[dict, Any]:
    """The engine (its KV cache sized by :func:`simulator.sizing.closed_form.plan`) and the replayed workload."""
    for p in fit_params:
        if p not in FIT_BOUNDS:
            raise CalibrationError(f"{p!r} cannot be fitted (choose from {', '.join(FIT_BOUNDS)})", field="fit")
    size = plan(model, gpu, deployment)
    if not size.fits:
        raise CalibrationError(f"does not start ({size.reason})", field="deployment")
    engine = {"num_gpu_blocks": int(size.num_gpu_blocks), "block_size": deployment.block_size or 16,
              "max_num_seqs": size.max_num_seqs, "max_num_batched_tokens": size.max_num_batched_tokens,
              "enable_prefix_caching": True, "enable_chunked_prefill": True}
    return engine, replay_workload(meas, request_rate, max_requests)


def price_fit(meas: Measurement, model, gpu, deployment, *, fit_params: tuple[str, ...] = DEFAULT_FIT,
              request_rate: float | None = None, max_requests: int = MAX_SIMULATED,
              max_evaluations: int = 60) -> Price:
    """The estimated memory and time of :func:`fit` with the same arguments, before it runs
    (:func:`simulator.batch.budget.price_fit`: the replayed workload's size, the sized engine, and the most
    simulations the fit can make). Raises :class:`CalibrationError` where :func:`fit` would."""
    engine, workload = _fit_setup(meas, model, gpu, deployment, fit_params, request_rate, max_requests)
    return budget.price_fit(WorkloadSize.of(workload), EngineConfig.from_dict(engine),
                            budget.fit_simulations(len(fit_params), max_evaluations))


def fit(meas: Measurement, model, gpu, deployment, *, fit_params: tuple[str, ...] = DEFAULT_FIT,
        request_rate: float | None = None, start: dict | None = None, max_requests: int = MAX_SIMULATED,
        max_evaluations: int = 60) -> FitResult:
    """Fit ``fit_params`` of the roofline clock so the simulated run matches ``meas`` (see the module docstring).

    ``deployment`` is a :class:`simulator.base.specs.DeploymentSpec` (its KV cache is sized with
    :func:`simulator.sizing.closed_form.plan`); ``start`` = coefficients to start from (default: the defaults).
    """
    from scipy.optimize import least_squares

    engine, workload = _fit_setup(meas, model, gpu, deployment, fit_params, request_rate, max_requests)
    base = model_coefficients(model, start, gpu, deployment.tensor_parallel_size)  # (the GPU's measured physics too)
    target = {"ttft_s": meas.mean_ttft_s, "itl_s": meas.mean_itl_s, "e2e_s": meas.mean_e2e_s}
    lo = np.array([FIT_BOUNDS[p][0] for p in fit_params])
    hi = np.array([FIT_BOUNDS[p][1] for p in fit_params])
    x0 = np.clip(np.array([float(base[p]) for p in fit_params]), lo, hi)
    evals = 0

    def coeffs(x) -> dict:
        return {**base, **{p: float(v) for p, v in zip(fit_params, x)}}

    def residuals(x) -> np.ndarray:
        nonlocal evals
        evals += 1
        pred = _predict(workload, engine, model, gpu, deployment, coeffs(x))
        return np.array([min((pred[k] - target[k]) / target[k], 1e3) for k in target])

    before = _predict(workload, engine, model, gpu, deployment, base)
    sol = least_squares(residuals, x0, bounds=(lo, hi), x_scale=np.maximum(hi - lo, 1e-9), diff_step=1e-2,
                        max_nfev=max_evaluations, method="trf")
    best = coeffs(sol.x)
    after = _predict(workload, engine, model, gpu, deployment, best)
    return FitResult(coefficients=best, fitted={p: best[p] for p in fit_params}, measured=target,
                     predicted_before=before, predicted=after, error_before_pct=_errors(before, target),
                     error_pct=_errors(after, target), simulated_requests=workload.n, evaluations=evals)
