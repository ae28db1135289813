"""Validation of the step clock against real vLLM runs: the sim-to-real study's training split.

``simulator/data/latency_trainval/experiments.json`` holds the 13 training runs
(``results_trainval``) of inference-sim/sim-to-real-accuracy-validation (vLLM
0.15.1 on H100): each run's model config, GPU, vLLM knobs, workload profile,
measured TTFT / ITL / E2E and BLIS's errors on the same run (the folder's README
names every source). :func:`validate` regenerates each run's workload (inference-perf
``shared_prefix``: fixed prompts sent round-robin, Poisson arrivals in stages),
sizes the KV cache with :func:`simulator.sizing.closed_form.plan`, times the steps with the
roofline clock and scores the run-wide means against the measurements.

The study's held-out runs (``results_iter36``) are not here and never used.
"""

from __future__ import annotations

import json
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simulator.base import DeploymentSpec, GpuSpec
from simulator.base.errors import FieldError
from simulator.batch import simulate
from simulator.clock import RooflineStepTime
from simulator.engine import EngineConfig
from simulator.sizing import parse_hf_config, plan
from simulator.workload import parse_trace

DATA = Path(__file__).resolve().parent.parent / "data" / "latency_trainval" / "experiments.json"
METRICS = ("ttft_mean", "itl_mean", "e2e_mean", "e2e_p90")
#: vLLM 0.15.1 defaults the campaign ran with (block size 16, prefix caching, chunked prefill, async scheduling).
BLOCK_SIZE = 16
VLLM_VERSION = "0.15.1"
#: BLIS's columns: blis-evolved (fitted on these same runs, in-sample) and blis-roofline (nothing fitted).
BLIS = ("blis-evolved", "blis-roofline")


class ValidationError(FieldError):
    """A validation input that cannot be used (the message names it)."""


@dataclass
class ExperimentScore:
    name: str
    exp_id: int
    model: str
    tp: int
    workload: str
    requests: int
    measured: dict[str, float]
    predicted: dict[str, float]
    mape: dict[str, float]
    blis_mape: dict[str, dict[str, float]] = field(default_factory=dict)


def load_experiments(path: Path = DATA) -> list[dict[str, Any]]:
    return json.loads(Path(path).read_text())


def _specs(exp: dict[str, Any]):
    model = parse_hf_config(exp["model_config"], name=exp["model"], num_parameters=exp.get("num_parameters"),
                            num_active_parameters=exp.get("num_active_parameters"))
    return model, GpuSpec.from_dict(exp["gpu"])


def stage_counts(stages: list, max_requests: int | None) -> list[tuple[float, int, float]]:
    """(rate, requests, seconds) per stage; with ``max_requests`` each stage keeps its rate and its share."""
    full = [int(rate * dur) for rate, dur in stages]
    if not max_requests or max_requests >= sum(full):
        return [(float(rate), n, float(dur)) for (rate, dur), n in zip(stages, full)]
    out = []
    for (rate, _), n in zip(stages, full):
        k = max(1, int(round(max_requests * n / sum(full))))
        out.append((float(rate), k, k / rate))
    return out


def trace_csv(workload: dict[str, Any], max_requests: int | None = None, seed: int = 0) -> str:
    """The run's requests as a trace CSV: every prompt of the set repeats (its whole length is a shared prefix)."""
    rng = np.random.default_rng(seed)
    arrivals = []
    t0 = 0.0
    for rate, n, dur in stage_counts(workload["stages"], max_requests):
        gaps = rng.exponential(1.0 / rate, n)
        gaps *= dur / gaps.sum()
        arrivals.append(t0 + np.cumsum(gaps))
        t0 += dur
    prompts = workload["groups"] * workload["users"]
    order = list(range(prompts))
    random.Random(seed).shuffle(order)
    plen, out = workload["prompt_tokens"], workload["output_tokens"]
    lines = ["arrival_time,prompt_tokens,output_tokens,prefix_id,prefix_len"]
    for i, at in enumerate(np.concatenate(arrivals)):
        lines.append(f"{at:.6f},{plen},{out},p{order[i % prompts]},{plen}")
    return "\n".join(lines) + "\n"


def build_run(exp: dict[str, Any], max_requests: int | None = None, coefficients: dict | None = None):
    """``(Workload, EngineConfig)`` of one experiment with the roofline clock of ``coefficients``.

    The sampler's time is the model's own path (``ModelSpec.sampling``, from the shipped defaults of its
    ``generation_config.json``: what vLLM does for requests without sampling parameters, as inference-perf
    sends them); an explicit ``sampling_*`` coefficient wins.
    """
    model, gpu = _specs(exp)
    dep = DeploymentSpec(tensor_parallel_size=exp["tp"], gpu_memory_utilization=exp["gpu_memory_utilization"],
                         block_size=BLOCK_SIZE, max_model_len=exp["max_model_len"],
                         max_num_batched_tokens=exp["max_num_batched_tokens"], max_num_seqs=exp["max_num_seqs"],
                         vllm_version=VLLM_VERSION)
    size = plan(model, gpu, dep)
    if not size.fits:
        raise ValidationError(f"the deployment does not start ({size.reason})", field=exp['name'])
    clock = RooflineStepTime.from_specs(model, gpu, coefficients=coefficients, deployment=dep,
                                        cpu_offload=bool(exp.get("cpu_offload", False)))
    config = EngineConfig.from_dict({
        "num_gpu_blocks": int(size.num_gpu_blocks), "block_size": BLOCK_SIZE, "max_num_seqs": exp["max_num_seqs"],
        "max_num_batched_tokens": exp["max_num_batched_tokens"], "enable_prefix_caching": True,
        "enable_chunked_prefill": True, "long_prefill_token_threshold": 0, "async_scheduling": True,
        "max_model_len": exp["max_model_len"], "cost_model": {"kind": "terms", **clock.terms.to_dict()}})
    workload = parse_trace(trace_csv(exp["workload"], max_requests), fmt="csv", name=exp["name"])
    return workload, config


def predicted_metrics(result, output_tokens: int) -> dict[str, float]:
    """Run-wide TTFT / ITL / E2E in ms, as the study measures them (ITL = (E2E - TTFT) / (output - 1))."""
    req = result.requests
    done = np.array([s == "finished" for s in req["status"]])
    if not done.any():
        raise ValidationError("no request finished")
    arr = np.asarray(req["arrival"], np.float64)[done]
    ttft = (np.asarray(req["first_token_time_s"])[done] - arr) * 1e3
    e2e = (np.asarray(req["finish_time_s"])[done] - arr) * 1e3
    return {"ttft_mean": float(ttft.mean()), "e2e_mean": float(e2e.mean()),
            "e2e_p90": float(np.percentile(e2e, 90)),
            "itl_mean": float((e2e.mean() - ttft.mean()) / max(output_tokens - 1, 1))}


def run_experiment(exp: dict[str, Any], max_requests: int | None = None,
                   coefficients: dict | None = None) -> ExperimentScore:
    workload, config = build_run(exp, max_requests, coefficients)
    result = simulate(workload, [config])[0]
    pred = predicted_metrics(result, exp["workload"]["output_tokens"])
    meas = {m: exp["measured_ms"][m] for m in METRICS}
    return ExperimentScore(
        name=exp["name"], exp_id=exp["exp_id"], model=exp["model"].split("/")[-1], tp=exp["tp"],
        workload=exp["workload"]["name"], requests=workload.n, measured=meas, predicted=pred,
        mape={m: abs(pred[m] - meas[m]) / meas[m] * 100.0 for m in METRICS},
        blis_mape={s: {m: exp["blis_mape"][s][m] for m in METRICS} for s in BLIS if s in exp["blis_mape"]})


def _one(job):
    return run_experiment(*job)


def validate(max_requests: int | None = None, coefficients: dict | None = None, processes: int = 1,
             experiments: list[dict[str, Any]] | None = None) -> list[ExperimentScore]:
    """Score every training-split experiment (``processes`` > 1 runs them in worker processes)."""
    exps = load_experiments() if experiments is None else experiments
    jobs = [(e, max_requests, coefficients) for e in exps]
    if processes == 0:
        import os

        processes = os.cpu_count() or 1
    if processes > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(processes) as pool:
            return list(pool.map(_one, jobs))
    return [_one(j) for j in jobs]


def medians(scores: list[ExperimentScore], source: str | None = None) -> dict[str, float]:
    """Median MAPE per metric: KV Planner's (``source`` None) or a BLIS column's on the same runs."""
    if source is None:
        return {m: statistics.median(s.mape[m] for s in scores) for m in METRICS}
    return {m: statistics.median(s.blis_mape[source][m] for s in scores) for m in METRICS}


def format_table(scores: list[ExperimentScore]) -> str:
    """Per-experiment and median MAPE, KV Planner next to BLIS-evolved (fitted on these runs)."""
    head = (f"{'id':>8} {'model':24s} {'tp':>2} {'workload':14s} {'reqs':>5}  {'TTFT ms meas/pred':>17} "
            f"{'MAPE':>5} {'BLIS':>5}  {'ITL ms meas/pred':>15} {'MAPE':>5} {'BLIS':>5}  "
            f"{'E2E ms meas/pred':>15} {'MAPE':>5} {'BLIS':>5}  {'p90':>5} {'BLIS':>5}")
    lines = [head]
    for s in scores:
        b = s.blis_mape.get("blis-evolved", {})

        def cell(m: str, fmt: str, s=s, b=b) -> str:
            return (f"{format(s.measured[m], fmt)}/{format(s.predicted[m], fmt)} {s.mape[m]:5.1f} "
                    f"{b.get(m, float('nan')):5.1f}")
        lines.append(f"{str(s.exp_id):>8} {s.model[:24]:24s} {s.tp:>2} {s.workload:14s} {s.requests:>5}  "
                     f"{cell('ttft_mean', '8.1f')}  {cell('itl_mean', '7.2f')}  {cell('e2e_mean', '7.0f')}  "
                     f"{s.mape['e2e_p90']:5.1f} {b.get('e2e_p90', float('nan')):5.1f}")
    lines.append("")
    lines.append(f"{'median MAPE (%)':34s} {'TTFT':>6} {'ITL':>6} {'E2E':>6} {'E2E p90':>8}")
    rows = [("KV Planner", medians(scores))]
    rows += [(f"{src} (same runs)", medians(scores, src)) for src in BLIS if all(src in s.blis_mape for s in scores)]
    for label, med in rows:
        lines.append(f"{label:34s} {med['ttft_mean']:6.1f} {med['itl_mean']:6.1f} {med['e2e_mean']:6.1f} "
                     f"{med['e2e_p90']:8.1f}")
    return "\n".join(lines)
