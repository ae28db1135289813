"""The DP / EP clock against AIConfigurator, step by step (issue 34, item 4).

For each case of :data:`MOE_CASES` (an MoE model on ``DP`` ranks of TP 1 with expert parallelism, EP = DP) this
module compares :func:`simulator.clock.expert_parallel.step_time_dp`'s forward pass (every rank running the same
batch; the sampler and the CPU side left out, as AIConfigurator times neither) with AIConfigurator's vLLM backend at
the same shapes (``attention_dp_size = moe_ep_size = DP``): decode batches per rank at 1,024 and 4,096 tokens of
context (:data:`MOE_DECODE_POINTS`) and one prefill per rank (:data:`MOE_PREFILL_POINTS`). The reference is the
installed ``aiconfigurator-core`` when there is one, else ``simulator/data/aic_moe_steps.json`` (made by
``tools/aic/aic_moe_steps.py`` with the same calls). AIConfigurator's MoE rows at EP 8 are measured (its vLLM 0.24.0
fused-MoE and all-to-all tables were collected on one 8-GPU node); past one node its communication is modelled
(``per_op_source`` "mixed"), so the EP 16 / 32 rows compare two models, not a model and a measurement.

``python -m simulator validate --against aiconfigurator-moe`` prints the table.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from simulator.base import DeploymentSpec
from simulator.calibration.crosscheck import AIC_MODELS, GPUS, GroupRatio, _models, phase_ratios, reference_table
from simulator.clock.expert_parallel import DPClock, DPShape, RankBatch, step_time_dp
from simulator.sizing import parse_hf_config

AIC_MOE_STEPS = Path(__file__).resolve().parent.parent / "data" / "aic_moe_steps.json"

#: Decode steps per DP rank: (requests, context tokens of each); prefill steps: one prompt of that many tokens a rank.
MOE_DECODE_POINTS = [(1, 1024), (8, 1024), (32, 1024), (128, 1024), (256, 1024), (64, 4096)]
MOE_PREFILL_POINTS = [512, 2048]


@dataclass(frozen=True)
class MoECase:
    """One MoE model on ``dp`` DP ranks of TP 1 with EP = DP, on one GPU kind, at one precision."""

    model: str
    gpu: str
    dp: int
    precision: str

    def key(self) -> dict[str, Any]:
        return {"model": self.model, "gpu": self.gpu, "dp": self.dp, "precision": self.precision}

    @property
    def group(self) -> str:
        return f"{self.model} {self.gpu} DP{self.dp}+EP{self.dp} {self.precision}"

    @property
    def nodes(self) -> int:
        return -(-self.dp // 8)


MOE_CASES = ([MoECase("Qwen3 30B-A3B", gpu, dp, "bf16") for gpu in ("H100", "H200") for dp in (2, 4, 8)]
             + [MoECase("DeepSeek-V3", gpu, dp, "fp8-block") for gpu in ("H100", "H200") for dp in (8, 16, 32)])


def case_dp_clock(case: MoECase) -> DPClock:
    """The DP / EP clock of one case (the model's own sampler path, bf16 KV cache, vLLM's default all-to-all)."""
    model = parse_hf_config(_models()[case.model]["config"], name=case.model)
    if case.precision == "fp8-block" and model.quantization is None:
        model = replace(model, quantization="fp8", quant_scheme="fp8-block", quant_group_size=128)
    shape = DPShape(DeploymentSpec(data_parallel_size=case.dp, enable_expert_parallel=True))
    return DPClock.build(model, GPUS[case.gpu][0], shape)


def clock_moe_steps(case: MoECase) -> dict[str, float]:
    """The DP / EP clock's forward pass at every point, ms (``{"decode b8 c1024": ..., "prefill 2048": ...}``)."""
    clock = case_dp_clock(case)
    out = {}
    for b, ctx in MOE_DECODE_POINTS:
        out[f"decode b{b} c{ctx}"] = step_time_dp([RankBatch.decode(b, ctx)] * case.dp, clock).forward * 1e3
    for n in MOE_PREFILL_POINTS:
        out[f"prefill {n}"] = step_time_dp([RankBatch.prefill(n)] * case.dp, clock).forward * 1e3
    return out


def aic_moe_steps(case: MoECase) -> dict[str, float]:
    """AIConfigurator's forward pass at every point, ms (needs the optional ``aiconfigurator-core`` package)."""
    from aiconfigurator_core.sdk.engine import EngineHandle

    kw: dict[str, Any] = {"tp_size": 1, "attention_dp_size": case.dp, "moe_tp_size": 1, "moe_ep_size": case.dp}
    if case.precision == "fp8-block" and case.model != "DeepSeek-V3":  # (DeepSeek-V3's own format)
        kw.update(gemm_quant_mode="fp8_block", moe_quant_mode="fp8_block")
    if case.precision != "fp8-block":
        kw["kvcache_quant_mode"] = "bfloat16"
    engine = EngineHandle.compile(AIC_MODELS[case.model], GPUS[case.gpu][1], "vllm", **kw)
    out = {}
    for b, ctx in MOE_DECODE_POINTS:
        out[f"decode b{b} c{ctx}"] = float(engine.decode_step_latency(b, ctx, 2))
    for n in MOE_PREFILL_POINTS:
        out[f"prefill {n}"] = float(engine.predict_prefill_latency(1, n))
    return out


def moe_reference_steps(live: bool | None = None) -> tuple[str, dict[MoECase, dict[str, float] | str]]:
    """The reference of :data:`MOE_CASES` (:func:`~simulator.calibration.crosscheck.reference_table` over
    ``simulator/data/aic_moe_steps.json``)."""
    return reference_table(MOE_CASES, live, aic_moe_steps, AIC_MOE_STEPS,
                           lambda row: MoECase(row["model"], row["gpu"], row["dp"], row["precision"]))


def moe_cross_check(live: bool | None = None) -> tuple[str, list[GroupRatio], list[tuple[str, str]]]:
    """``(source, per case and phase the median and worst clock / reference ratio, skipped cases)``."""
    source, ref = moe_reference_steps(live)
    return (source, *phase_ratios(MOE_CASES, ref, clock_moe_steps))


def moe_summary(rows: list[GroupRatio]) -> dict[str, tuple[float, float, int]]:
    """Per model x GPU, one node (EP <= 8: AIConfigurator's measured tables) and across nodes apart: the median
    and the worst ``|clock / reference - 1|`` (%) over every step of the bucket, and its number of steps."""
    buckets: dict[str, list[float]] = {}
    for r in rows:
        c = r.case
        where = "one node" if c.nodes == 1 else "2-4 nodes"
        buckets.setdefault(f"{c.model} {c.gpu} {where}", []).extend(abs(x - 1.0) * 100 for x in r.ratios)
        buckets.setdefault(f"all, {where}", []).extend(abs(x - 1.0) * 100 for x in r.ratios)
    return {key: (statistics.median(dev), max(dev), len(dev)) for key, dev in buckets.items()}


def format_moe_cross_check(source: str, rows: list[GroupRatio], skipped: list[tuple[str, str]]) -> str:
    lines = [f"reference: {source}",
             "ratio = the DP / EP clock's forward pass (step_time_dp, every rank the same batch) / AIConfigurator's "
             "(sampler and CPU time left out)", "",
             f"{'group':42s} {'phase':8s} {'median':>7s} {'worst':>7s} {'points':>6s}"]
    for r in rows:
        lines.append(f"{r.case.group:42s} {r.phase:8s} {r.median:7.2f} {r.worst:7.2f} {len(r.ratios):6d}")
    lines += ["", f"{'summary (every step of the bucket)':42s} {'median':>8s} {'worst':>8s} {'steps':>6s}",
              f"{'':42s} {'|r-1| %':>8s} {'|r-1| %':>8s}"]
    for key, (med, worst, n) in sorted(moe_summary(rows).items()):
        lines.append(f"{key:42s} {med:8.1f} {worst:8.1f} {n:6d}")
    for group, why in skipped:
        lines.append(f"not compared: {group}: {why}")
    return "\n".join(lines)


__all__ = ["AIC_MOE_STEPS", "MOE_CASES", "MOE_DECODE_POINTS", "MOE_PREFILL_POINTS", "MoECase",
           "aic_moe_steps", "case_dp_clock", "clock_moe_steps", "format_moe_cross_check", "moe_cross_check",
           "moe_reference_steps", "moe_summary"]
