#!/usr/bin/env python3
"""Derive the fused-MoE kernel's figures under expert parallelism (``simulator/data/ep_physics.json``) from
AIConfigurator's measured vLLM fused-MoE rows.

Needs the optional ``aiconfigurator-core`` package (PyPI, Apache-2.0; 0.12.0 was used) and pandas / pyarrow /
scipy in the Python that runs this script (a scratch virtual environment, not the project's)::

    python tools/aic/derive_ep_physics.py simulator/data

writes ``ep_physics.json`` (the fit below, for shapes without measured rows) and ``ep_moe_rows.json`` (the measured
rows themselves: per GPU, expert shape, dtype and EP size, the fastest kernel's latency by tokens, routed evenly and
by AIConfigurator's default skew).

Only figures are read (``aiconfigurator_core/systems/data/<gpu>/moe/vllm/0.24.0/moe_perf.parquet``, the latency
of one fused-MoE layer NVIDIA measured under vLLM 0.24.0 by tokens, shape, dtype, MoE TP and EP size and routing
distribution). One fit per GPU and dtype over every row at TP 1 and EP 2-64 routed evenly (``balanced``; the
routing skew is the clock's separate imbalance factor), every token count, least squares of the log ratio::

    latency = max(touched local experts' bytes / (HBM x stream),
                  local FLOPs / (peak x expert_mfu) x (1 + half_tokens / tokens per touched expert))
              + fixed_per_expert x local experts + fixed_layer + per_token x tokens

``tokens`` are every token entering the layer across the EP group: under vLLM's default all-to-all
(``allgather_reducescatter``) each GPU runs the fused-MoE kernel over all of them (routing, alignment and
permutation of every token, the activations' quantization), whatever its share of the experts: at 16,384 tokens
a DeepSeek-V3 layer (fp8 block) takes 13.9 ms at EP 8 and still 10.7 ms at EP 64 on one H100.

The single-GPU fit (``tools/aic/derive_gpu_physics.py`` ``moe_fit``, EP 1) streams a layer's hundreds of MB of
experts near the dense rate; under EP a GPU holds a few experts (tens of MB) and the kernel's fixed part
dominates, which that fit does not see.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import aiconfigurator_core
import numpy as np
import pandas as pd
from scipy.optimize import least_squares

ROOT = Path(aiconfigurator_core.__file__).resolve().parent / "systems" / "data"
VERSION = "aiconfigurator-core 0.12.0"
#: AIConfigurator system -> (catalog name, HBM TB/s, bf16 TFLOPS, fp8 TFLOPS) (gpuprofiles/data/gpus.csv).
GPUS = {"h100_sxm": ("H100 SXM5 80GB", 3.35, 989.0, 1979.0), "h200_sxm": ("H200 SXM 141GB", 4.8, 989.0, 1979.0)}
DTYPES = {"bfloat16": ("bf16", 2.0), "fp8_block": ("fp8-block", 1.0 + 4.0 / (128 * 128))}


def fit(gpu: str, dtype: str) -> dict:
    name, tbps, bf16, fp8 = GPUS[gpu]
    label, eb = DTYPES[dtype]
    path = ROOT / gpu / "moe" / "vllm" / "0.24.0" / "moe_perf.parquet"
    df = pd.read_parquet(path)
    d = df[(df.moe_tp_size == 1) & (df.moe_ep_size.between(2, 64)) & (df.moe_dtype == dtype)
           & (df.distribution == "balanced") ]
    d = d.groupby(["hidden_size", "inter_size", "num_experts", "topk", "moe_ep_size", "num_tokens"]).latency.min().reset_index()
    T, E, k = (d[c].to_numpy(float) for c in ("num_tokens", "num_experts", "topk"))
    ep = d.moe_ep_size.to_numpy(float)
    per = 3 * d.hidden_size.to_numpy(float) * d.inter_size.to_numpy(float)  # parameters per expert
    local = np.ceil(E / ep)
    touched = 1 - (1 - k / E) ** T
    pairs = T * k / ep
    tpe = pairs / (local * touched)
    nbytes, flops = local * touched * per * eb, 2 * pairs * per
    peak, bw = (bf16 if dtype == "bfloat16" else fp8) * 1e12, tbps * 1e12
    lat = d.latency.to_numpy(float) * 1e-3

    def model(p):
        stream, emfu, h, fixed_e, fixed_l, per_tok = p
        return (np.maximum(nbytes / (bw * stream), flops / (peak * emfu) * (1 + h / tpe)) + fixed_e * local
                + fixed_l + per_tok * T)

    res = least_squares(lambda p: np.log(model(p) / lat), [0.5, 0.3, 20, 1e-7, 20e-6, 1e-8],
                        bounds=([0.05, 0.01, 0, 0, 0, 0], [1.0, 1.0, 2000, 1e-5, 1e-3, 1e-5]))
    err = np.abs(model(res.x) / lat - 1)
    stream, emfu, h, fixed_e, fixed_l, per_tok = (float(x) for x in res.x)
    return {"dtype": label, "expert_bandwidth_efficiency": round(stream, 3), "expert_mfu": round(emfu, 3),
            "expert_half_tokens": round(h, 1), "moe_expert_overhead_s": float(f"{fixed_e:.3g}") if fixed_e > 1e-12 else 0.0,
            "moe_layer_overhead_s": float(f"{fixed_l:.3g}"), "moe_token_overhead_s": float(f"{per_tok:.3g}"),
            "rows": int(len(lat)),
            "median_error": round(float(np.median(err)), 3), "p90_error": round(float(np.quantile(err, 0.9)), 3),
            "source": f"{VERSION} {path.relative_to(ROOT.parent.parent).as_posix()}: one fit of every {dtype} "
                      f"fused-MoE row at TP 1, EP 2-64, balanced routing, 1-16,384 tokens ({len(lat)} rows, median "
                      f"error {np.median(err) * 100:.0f} %)"}


#: AIConfigurator's MoE dtypes shipped as measured rows.
ROW_DTYPES = ("bfloat16", "fp8", "fp8_block", "w4a16_mxfp4")
#: Expert shapes (hidden, intermediate, experts, top-k) shipped as measured rows: the catalog's MoE models
#: (Qwen3-235B-A22B, Qwen3-30B-A3B, DeepSeek-V3 / R1, Gemma 4 26B-A4B, Mixtral 8x22B and 8x7B, gpt-oss-120b and
#: 20b) and the issue's Kimi K2 and Llama 4 Maverick.
ROW_SHAPES = {(4096, 1536, 128, 8), (2048, 768, 128, 8), (7168, 2048, 256, 8), (2816, 704, 128, 8),
              (6144, 16384, 8, 2), (4096, 14336, 8, 2), (2880, 2880, 128, 4), (2880, 2880, 32, 4),
              (7168, 2048, 384, 8), (5120, 8192, 128, 1)}


#: Routing distributions shipped: even, and AIConfigurator's default skew (``sdk/models/moe.py``: a power law of
#: exponent 1.2 over the experts), under which the measured GPU holds the hottest experts.
ROW_DISTRIBUTIONS = {"balanced": "balanced_us", "power_law_1.2": "skewed_us"}


def rows(gpu: str) -> dict:
    """``{"H,I,E,k,dtype": {"ep": {"tokens": [...], "balanced_us": [...], "skewed_us": [...]}}}`` at TP 1, EP
    2-256: the fastest kernel's latency by tokens entering the layer, routed evenly and by the default skew."""
    path = ROOT / gpu / "moe" / "vllm" / "0.24.0" / "moe_perf.parquet"
    df = pd.read_parquet(path)
    d = df[(df.moe_tp_size == 1) & (df.moe_ep_size > 1) & (df.moe_dtype.isin(ROW_DTYPES))
           & (df.distribution.isin(list(ROW_DISTRIBUTIONS)))]
    keys = ["hidden_size", "inter_size", "num_experts", "topk", "moe_dtype", "moe_ep_size"]
    d = d.pivot_table(index=[*keys, "num_tokens"], columns="distribution", values="latency", aggfunc="min")
    d = d.dropna().reset_index()
    out: dict = {}
    for (H, inter, E, k, dt, ep), g in d.groupby(keys):
        if (H, inter, E, k) not in ROW_SHAPES:
            continue
        g = g.sort_values("num_tokens")
        row = {"tokens": [int(t) for t in g.num_tokens]}
        for dist, field in ROW_DISTRIBUTIONS.items():
            row[field] = [round(float(x) * 1e3, 2) for x in g[dist]]
        out.setdefault(f"{H},{inter},{E},{k},{dt}", {})[str(int(ep))] = row
    return {"source": f"{VERSION} {path.relative_to(ROOT.parent.parent).as_posix()}", "shapes": out}


def main() -> int:
    outdir = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    out = {"about": __doc__.strip().splitlines()[0], "generated_by": "tools/aic/derive_ep_physics.py",
           "data": VERSION, "gpus": {}}
    for gpu, (name, *_rest) in GPUS.items():
        out["gpus"][name] = {"aiconfigurator_system": gpu,
                             "by_dtype": {DTYPES[dt][0]: fit(gpu, dt) for dt in DTYPES}}
    measured = {"about": "AIConfigurator's measured vLLM 0.24.0 fused-MoE layers at TP 1 and EP 2-256: "
                         "hidden,intermediate,experts,top-k,dtype -> EP -> the fastest kernel's latency (us) by "
                         "tokens entering the layer across the EP group, routed evenly (balanced_us) and by "
                         "AIConfigurator's default skew, a power law of exponent 1.2 (skewed_us)",
                "generated_by": "tools/aic/derive_ep_physics.py", "data": VERSION,
                "gpus": {name: rows(gpu) for gpu, (name, *_rest) in GPUS.items()}}
    if outdir is None:
        json.dump(out, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    (outdir / "ep_physics.json").write_text(json.dumps(out, indent=1) + "\n")
    (outdir / "ep_moe_rows.json").write_text(json.dumps(measured, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
