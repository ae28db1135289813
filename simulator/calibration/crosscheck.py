"""The clock against a second source, step by step: NVIDIA AIConfigurator's measured operators.

AIConfigurator (PyPI ``aiconfigurator-core``, Apache-2.0) times a forward pass of a model on a GPU as the sum of
operators NVIDIA measured under vLLM (GEMMs, attention, fused MoE, MLA modules, all-reduces). For each case of
:data:`CASES` (model x GPU x TP x precision) this module compares the clock's forward pass (its GPU groups less
the sampler, which AIConfigurator does not time, and without the CPU side) with AIConfigurator's at the same step
shapes: decode batches at 1,024 and 4,096 tokens of context (:data:`DECODE_POINTS`) and single prefills
(:data:`PREFILL_POINTS`). The reference is the installed package when there is one (``source="live"``), else the
table shipped in ``simulator/data/aic_steps.json`` (made by ``tools/aic/aic_steps.py`` with the same calls).

``python -m simulator validate --against aiconfigurator`` prints the median and worst ratio (clock / reference)
per group.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from simulator.base import DeploymentSpec, GpuSpec
from simulator.clock import RooflineStepTime
from simulator.sizing import parse_hf_config

Case = TypeVar("Case")

DATA = Path(__file__).resolve().parent.parent / "data"
AIC_STEPS = DATA / "aic_steps.json"
MODELS_FILE = DATA / "crosscheck_models.json"

#: Decode steps: (requests, context tokens of each); prefill steps: prompt tokens of one request.
DECODE_POINTS = [(1, 1024), (8, 1024), (32, 1024), (128, 1024), (256, 1024), (8, 4096), (64, 4096)]
PREFILL_POINTS = [512, 2048, 8192]

#: The cross-check's GPUs: the catalog's data-sheet figures (gpuprofiles/data/gpus.csv) and AIConfigurator's
#: system name.
GPUS = {
    "H100": (GpuSpec(name="H100 SXM5 80GB", memory_gib=79.18, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
                     interconnect_gbps=900), "h100_sxm"),
    "H200": (GpuSpec(name="H200 SXM 141GB", memory_gib=140.4, bandwidth_tbps=4.8, bf16_tflops=989, fp8_tflops=1979,
                     interconnect_gbps=900), "h200_sxm"),
    "A100": (GpuSpec(name="A100 SXM4 80GB", memory_gib=79.15, bandwidth_tbps=2.039, bf16_tflops=312,
                     interconnect_gbps=600), "a100_sxm"),
    "L40S": (GpuSpec(name="L40S", memory_gib=44.42, bandwidth_tbps=0.864, bf16_tflops=362.05, fp8_tflops=733,
                     interconnect_gbps=64), "l40s"),
}


@dataclass(frozen=True)
class CrossCase:
    """One model on ``tp`` GPUs of one kind at one precision (``bf16``, ``fp8``: W8A8 per tensor, or
    ``fp8-block``: the checkpoint's own 128 x 128 block-scaled fp8)."""

    model: str
    gpu: str
    tp: int
    precision: str

    def key(self) -> dict[str, Any]:
        return {"model": self.model, "gpu": self.gpu, "tp": self.tp, "precision": self.precision}

    @property
    def group(self) -> str:
        return f"{self.model} {self.gpu} TP{self.tp} {self.precision}"


def _cases() -> list[CrossCase]:
    out = []
    for gpu in ("H100", "H200", "A100", "L40S"):
        precisions = ("bf16",) if gpu == "A100" else ("bf16", "fp8")  # (the A100 has no fp8 tensor cores)
        for precision in precisions:
            out += [CrossCase("Llama 3.1 8B", gpu, tp, precision) for tp in (1, 2)]
            if gpu != "L40S":
                out += [CrossCase("Llama 3.1 70B", gpu, tp, precision) for tp in (4, 8)]
                # (Qwen's FP8 checkpoint is block-scaled, and vLLM runs it so)
                moe_precision = "fp8-block" if precision == "fp8" else precision
                out += [CrossCase("Qwen3 30B-A3B", gpu, tp, moe_precision) for tp in (1, 2)]
    out += [CrossCase("DeepSeek-V3", gpu, 8, "fp8-block") for gpu in ("H100", "H200")]
    return out


CASES = _cases()

#: Model name -> AIConfigurator's model id.
AIC_MODELS = {"Llama 3.1 8B": "meta-llama/Meta-Llama-3.1-8B", "Llama 3.1 70B": "meta-llama/Meta-Llama-3.1-70B",
              "Qwen3 30B-A3B": "Qwen/Qwen3-30B-A3B", "DeepSeek-V3": "deepseek-ai/DeepSeek-V3"}


#: The cross-check's MoE models (summarised on their own; the dense Llama rows are pooled per GPU and precision).
MOE_MODELS = ("Qwen3 30B-A3B", "DeepSeek-V3")


def _models() -> dict[str, dict]:
    return json.loads(MODELS_FILE.read_text())["models"]


def case_clock(case: CrossCase) -> RooflineStepTime:
    """The clock of one case (the model's own sampler path; bf16 KV cache)."""
    entry = _models()[case.model]
    model = parse_hf_config(entry["config"], name=case.model)
    if case.precision == "fp8":
        model = replace(model, quantization="fp8", quant_scheme="fp8-dynamic")
    elif case.precision == "fp8-block" and model.quantization is None:
        model = replace(model, quantization="fp8", quant_scheme="fp8-block", quant_group_size=128)
    gpu = GPUS[case.gpu][0]
    return RooflineStepTime.from_specs(model, gpu, deployment=DeploymentSpec(tensor_parallel_size=case.tp))


def _forward(clock: RooflineStepTime, P: float, A: float, D: float, C: float, R: float, PK: float) -> float:
    """Seconds of a step's forward pass on the GPU: the clock's GPU groups less the sampler.  # s"""
    co, t = clock.coefficients, clock.terms
    comp = clock.components(P, A, D, C, R, prefill_kv_tokens=PK)
    gpu = comp["gemm"] + comp["attention"] + comp["moe"] + comp["comm"] + comp["fixed"]
    sampler = (co.sampling_step_s + co.sampling_vocab_s * clock.model.vocab_size) * co.sampler_scale + t.gpu_req_s * R
    return float(gpu - sampler)


def clock_case_steps(case: CrossCase) -> dict[str, float]:
    """The clock's forward pass at every point, ms: ``{"decode b1 c1024": ..., "prefill 2048": ...}``."""
    clock = case_clock(case)
    out = {}
    for b, ctx in DECODE_POINTS:
        out[f"decode b{b} c{ctx}"] = _forward(clock, 0, 0, b, b * (ctx + 1), b, 0) * 1e3
    for n in PREFILL_POINTS:
        out[f"prefill {n}"] = _forward(clock, n, n * (n + 1) / 2, 0, 0, 1, n) * 1e3
    return out


def aic_case_steps(case: CrossCase) -> dict[str, float]:
    """AIConfigurator's forward pass at every point, ms (needs the optional ``aiconfigurator-core`` package)."""
    from aiconfigurator_core.sdk.engine import EngineHandle

    kw: dict[str, Any] = {"tp_size": case.tp, "moe_tp_size": case.tp, "moe_ep_size": 1}
    if case.precision == "fp8":
        kw.update(gemm_quant_mode="fp8", moe_quant_mode="fp8")
    elif case.precision == "fp8-block" and case.model != "DeepSeek-V3":  # (DeepSeek-V3's own format)
        kw.update(gemm_quant_mode="fp8_block", moe_quant_mode="fp8_block")
    if case.precision != "fp8-block":
        kw["kvcache_quant_mode"] = "bfloat16"
    engine = EngineHandle.compile(AIC_MODELS[case.model], GPUS[case.gpu][1], "vllm", **kw)
    out = {}
    for b, ctx in DECODE_POINTS:
        out[f"decode b{b} c{ctx}"] = float(engine.decode_step_latency(b, ctx, 2))
    for n in PREFILL_POINTS:
        out[f"prefill {n}"] = float(engine.predict_prefill_latency(1, n))
    return out


def aic_installed() -> bool:
    """Whether the optional ``aiconfigurator-core`` package can be imported."""
    try:
        import aiconfigurator_core.sdk.engine  # noqa: F401
    except Exception:  # the optional package is absent or broken: the shipped table stands in
        return False
    return True


def reference_table(cases: Sequence[Case], live: bool | None, query: Callable[[Case], dict[str, float]],
                    table: Path, case_of_row: Callable[[dict], Case]) -> tuple[str, dict[Case, dict[str, float] | str]]:
    """``(source, {case: steps or the reason it has none})``: ``query(case)`` for each case when the package is
    installed (``live`` None) or asked for, else the shipped ``table`` (rows made into cases by ``case_of_row``)."""
    if live is None:
        live = aic_installed()
    elif live and not aic_installed():
        raise ValueError("--reference live: the optional aiconfigurator-core package is not installed "
                         "(pip install aiconfigurator-core), or use the shipped table (--reference shipped)")
    out: dict[Case, dict[str, float] | str] = {}
    if live:
        for case in cases:
            try:
                out[case] = query(case)
            except Exception as exc:  # a case AIConfigurator cannot time: reported, not fatal
                out[case] = f"{type(exc).__name__}: {exc}"[:200]
        return "aiconfigurator-core (installed, queried live)", out
    data = json.loads(table.read_text())
    for row in data["cases"]:
        out[case_of_row(row)] = row.get("steps") or row.get("error", "no steps")
    return f"{data['source']}, shipped table simulator/data/{table.name}", out


def reference_steps(live: bool | None = None) -> tuple[str, dict[CrossCase, dict[str, float] | str]]:
    """The reference of :data:`CASES` (:func:`reference_table` over ``simulator/data/aic_steps.json``)."""
    return reference_table(CASES, live, aic_case_steps, AIC_STEPS,
                           lambda row: CrossCase(row["model"], row["gpu"], row["tp"], row["precision"]))


@dataclass
class GroupRatio:
    case: Any  # a CrossCase, or crosscheck_moe's MoECase: anything with a ``group``
    phase: str  # decode / prefill
    median: float
    worst: float
    points: int
    ratios: tuple[float, ...] = ()

    @property
    def group(self) -> str:
        return self.case.group


def phase_ratios(cases: Sequence[Case], ref: dict, ours_of: Callable[[Case], dict[str, float]]
                 ) -> tuple[list[GroupRatio], list[tuple[str, str]]]:
    """Per case and phase (decode, prefill) the median and worst ``ours / reference`` ratio over the points both
    time, and the cases the reference has no steps for (their group and why)."""
    rows, skipped = [], []
    for case in cases:
        steps = ref.get(case)
        if not isinstance(steps, dict):
            skipped.append((case.group, steps or "not in the reference"))
            continue
        ours = ours_of(case)
        for phase in ("decode", "prefill"):
            ratios = [ours[k] / v for k, v in steps.items() if k.startswith(phase) and k in ours and v > 0]
            if ratios:
                worst = max(ratios, key=lambda r: abs(r - 1.0))
                rows.append(GroupRatio(case, phase, statistics.median(ratios), worst, len(ratios), tuple(ratios)))
    return rows, skipped


def cross_check(live: bool | None = None) -> tuple[str, list[GroupRatio], list[tuple[str, str]]]:
    """``(source, per group and phase the median and worst clock / reference ratio, skipped cases)``."""
    source, ref = reference_steps(live)
    return (source, *phase_ratios(CASES, ref, clock_case_steps))


def summary(rows: list[GroupRatio]) -> dict[str, tuple[float, float, int]]:
    """Per GPU x precision (the dense Llama cases pooled; each MoE model on its own): the median and the worst
    ``|clock / reference - 1|`` over every step of the bucket (%), and its number of steps."""
    buckets: dict[str, list[float]] = {}
    for r in rows:
        c = r.case
        key = f"{c.model} {c.gpu} {c.precision}" if c.model in MOE_MODELS else f"dense {c.gpu} {c.precision}"
        buckets.setdefault(key, []).extend(abs(x - 1.0) * 100 for x in r.ratios)
    return {key: (statistics.median(dev), max(dev), len(dev)) for key, dev in buckets.items()}


def format_cross_check(source: str, rows: list[GroupRatio], skipped: list[tuple[str, str]]) -> str:
    lines = [f"reference: {source}", "ratio = the clock's forward pass / AIConfigurator's (sampler and CPU time left out)",
             "", f"{'group':38s} {'phase':8s} {'median':>7s} {'worst':>7s} {'points':>6s}"]
    for r in rows:
        lines.append(f"{r.group:38s} {r.phase:8s} {r.median:7.2f} {r.worst:7.2f} {r.points:6d}")
    lines += ["", f"{'summary (every step of the bucket)':38s} {'median':>8s} {'worst':>8s} {'steps':>6s}",
              f"{'':38s} {'|r-1| %':>8s} {'|r-1| %':>8s}"]
    for key, (med, worst, n) in sorted(summary(rows).items()):
        lines.append(f"{key:38s} {med:8.1f} {worst:8.1f} {n:6d}")
    for group, why in skipped:
        lines.append(f"not compared: {group}: {why}")
    return "\n".join(lines)


__all__ = ["CASES", "CrossCase", "GroupRatio", "aic_case_steps", "aic_installed", "clock_case_steps", "cross_check",
           "format_cross_check", "phase_ratios", "reference_steps", "reference_table", "summary"]
