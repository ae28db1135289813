#!/usr/bin/env python3
"""Derive the per-GPU clock physics (``simulator/data/gpu_physics.json``) from AIConfigurator's measured operators.

Needs the optional ``aiconfigurator-core`` package (PyPI, Apache-2.0; 0.12.0 was used) and pandas / pyarrow in
the Python that runs this script (a scratch virtual environment, not the project's)::

    python tools/aic/derive_gpu_physics.py > simulator/data/gpu_physics.json

Only figures are read (latencies of GEMMs, attention kernels, fused-MoE layers, MLA modules and all-reduces that
NVIDIA measured under vLLM, ``aiconfigurator_core/systems/data/<gpu>/<op>/vllm/<version>/*.parquet``); no code
of the package is used beyond locating its data folder.

The H100's coefficients stay the ones the project calibrated on real vLLM runs (``docs/cost-model.md``); every
other GPU's figure is the H100's scaled by how the same operator, measured the same way, differs between that
GPU and the H100 (``ratio`` in each source). Figures without an H100 counterpart in the clock (fp8 GEMM rates,
the MoE and MLA fixed times, the MLA decode kernel's efficiency) are measured on each GPU directly.
"""

from __future__ import annotations

import glob
import json
import statistics
import sys
from pathlib import Path

import aiconfigurator_core
import pandas as pd

ROOT = Path(aiconfigurator_core.__file__).resolve().parent / "systems" / "data"
VERSION = "aiconfigurator-core 0.12.0"
#: GPU -> (catalog name, HBM TB/s, bf16 TFLOPS, fp8 TFLOPS, link GB/s both directions, fp4 TFLOPS): the
#: data-sheet peaks the efficiencies are fractions of (gpuprofiles/data/gpus.csv). B200 and GB200 have vLLM
#: tables too, but their custom all-reduce does not grow with the message (a negative slope at 8 GPUs) and
#: their block-fp8 GEMVs read 0.03-0.05 of peak, so they are left out until their rows are understood.
GPUS = {
    "h100_sxm": ("H100 SXM5 80GB", 3.35, 989.0, 1979.0, 900.0, None),
    "h200_sxm": ("H200 SXM 141GB", 4.8, 989.0, 1979.0, 900.0, None),
    "a100_sxm": ("A100 SXM4 80GB", 2.039, 312.0, None, 600.0, None),
    "l40s": ("L40S", 0.864, 362.05, 733.0, 64.0, None),
    "rtx_pro_6000_server": ("RTX PRO 6000 Blackwell Server", 1.792, 467.8, 935.6, 128.0, 1871.2),
}
#: The clock's H100 coefficients (simulator.clock.cost_model.RooflineCoefficients defaults).
H100 = {"mfu": 0.70, "bandwidth_efficiency": 0.84, "expert_bandwidth_efficiency": 0.84, "kv_bandwidth_efficiency": 0.90,
        "attention_efficiency": 0.45, "layer_overhead_s": 25e-6, "allreduce_latency_s": 8.5e-6,
        "interconnect_efficiency": 0.12, "nccl_allreduce_latency_s": 20e-6, "nccl_interconnect_efficiency": 0.75}
#: Large decoder GEMM shapes (N, K): Llama 3.1 8B and 70B projections; every matrix is >= 33 MB in bf16.
SHAPES = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (10240, 8192), (8192, 8192), (57344, 8192),
          (8192, 28672)]
#: Matrices of >= 100 MB in bf16 (the L40S's 96 MB L2 cache would flatter smaller ones).
BIG = [(n, k) for n, k in SHAPES if n * k * 2 >= 100e6]


def table(gpu: str, op: str, name: str) -> tuple[pd.DataFrame, str]:
    paths = sorted(glob.glob(str(ROOT / gpu / op / "vllm" / "*" / f"{name}.parquet")),
                   key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parent.name.split(".")])
    path = paths[-1]
    rel = Path(path).relative_to(ROOT.parent.parent)
    return pd.read_parquet(path), f"{VERSION} {rel.as_posix()}"


def small_large_ok(d: pd.DataFrame) -> bool:
    """A kernel family measured at both ends of the token range (some block-fp8 kernels cover a few shapes only)."""
    return bool(((d.m <= 16) & (d.n * d.k * 2 >= 100e6)).any() and (d.m >= 1024).any())


def gemm_figures(gpu: str) -> dict:
    bw, bf, f8 = GPUS[gpu][1] * 1e12, GPUS[gpu][2] * 1e12, (GPUS[gpu][3] or 0) * 1e12
    f4 = (GPUS[gpu][5] or 0) * 1e12
    df, src = table(gpu, "gemm", "gemm_perf")
    out = {"source": src}
    # nvfp4: half a byte a weight plus one fp8 scale per 16
    for dtype, eb, peak in (("bfloat16", 2, bf), ("fp8", 1, f8), ("fp8_block", 1, f8), ("nvfp4", 0.5625, f4)):
        d = df[df.gemm_dtype == dtype]
        if not len(d) or not peak:
            continue

        def lat(m, n, k, d=d):
            r = d[(d.m == m) & (d.n == n) & (d.k == k)]
            return None if not len(r) else float(r.latency.min()) * 1e-3  # the fastest kernel vLLM may pick

        if not small_large_ok(d):
            continue
        small = {(m, n, k): (n * k * eb) / t / bw for m in (1, 2, 4, 8, 16) for n, k in BIG if (t := lat(m, n, k))}
        large = {(m, n, k): 2 * m * n * k / t / peak for m in (1024, 2048, 4096, 8192) for n, k in SHAPES
                 if (t := lat(m, n, k))}
        out[dtype] = {"gemv_bandwidth": small, "gemm_efficiency": large}
    tiny = df[(df.gemm_dtype == "bfloat16") & (df.m == 1) & (df.n <= 256) & (df.k <= 256)].latency
    out["tiny_kernel_s"] = float(tiny.median()) * 1e-3
    return out


def attention_figures(gpu: str) -> dict:
    bw, bf = GPUS[gpu][1] * 1e12, GPUS[gpu][2] * 1e12
    c, src_c = table(gpu, "attention", "context_attention_perf")
    c = c[(c.kv_cache_dtype == "bfloat16") & (c.head_dim == 128)]
    if "window_size" in c:
        c = c[c.window_size == 0]
    effs = {}
    for h, kv in ((32, 8), (64, 8), (16, 2), (8, 1)):
        for b, isl in ((1, 2048), (1, 4096), (1, 8192), (4, 2048)):
            r = c[(c.num_heads == h) & (c.num_key_value_heads == kv) & (c.batch_size == b) & (c.isl == isl)]
            if len(r):
                effs[(h, kv, b, isl)] = 4 * h * 128 * isl * (isl + 1) / 2 * b / (float(r.latency.min()) * 1e-3) / bf
    g, src_g = table(gpu, "attention", "generation_attention_perf")
    g = g[(g.kv_cache_dtype == "bfloat16") & (g.head_dim == 128)]
    if "window_size" in g:
        g = g[g.window_size == 0]
    bws = {}
    for h, kv in ((32, 8), (64, 8), (8, 1)):
        for b, s in ((64, 4095), (128, 2047), (256, 1023), (32, 8191), (128, 4095)):
            r = g[(g.num_heads == h) & (g.num_key_value_heads == kv) & (g.batch_size == b) & (g.step == s)]
            if len(r):
                bws[(h, kv, b, s)] = b * (s + 1) * 2 * kv * 128 * 2 / (float(r.latency.min()) * 1e-3) / bw
    tiny = g[(g.batch_size == 1) & (g.step <= 127)].latency
    return {"prefill_efficiency": effs, "decode_kv_bandwidth": bws, "tiny_kernel_s": float(tiny.median()) * 1e-3,
            "kernel": sorted(set(c.kernel_source)), "source": f"{src_c}; {src_g}"}


def allreduce_figures(gpu: str) -> dict:
    link_dir = GPUS[gpu][4] / 2 * 1e9
    df, src = table(gpu, "comm", "custom_allreduce_perf")
    df = df[df.backend == "vllm_graph"]
    nccl_paths = sorted(glob.glob(str(ROOT / gpu / "comm" / "nccl" / "*" / "nccl_perf.parquet")))
    nc = pd.concat([pd.read_parquet(p) for p in nccl_paths])
    nc = nc[(nc.op_name == "all_reduce") & nc.nccl_dtype.isin(["half", "bfloat16", "fp16"])]
    out = {"source": f"{src}; {VERSION} systems/data/{gpu}/comm/nccl/*/nccl_perf.parquet", "by_tp": {}}
    for n in (2, 4, 8):
        a = df[df.num_gpus == n].groupby("message_size").latency.median() * 1e-3
        b = nc[nc.num_gpus == n].groupby("message_size").latency.median() * 1e-3
        if not len(a) or not len(b):
            continue
        ring = 2 * (n - 1) / n
        small = float(a[a.index <= 32768].median())
        # decode-sized messages: the slope between 256 KB and 1 MB
        slope = (float(a.loc[1048576]) - float(a.loc[262144])) / (ring * (1048576 - 262144))
        nsmall = float(b[b.index <= 32768].median())
        big = float(b.loc[b.index.max()])
        out["by_tp"][str(n)] = {"custom_latency_s": small, "custom_gbps": 1 / slope / 1e9,
                                "custom_efficiency": 1 / slope / link_dir, "nccl_latency_s": nsmall,
                                "nccl_gbps": ring * b.index.max() / big / 1e9,
                                "nccl_efficiency": ring * b.index.max() / big / link_dir}
    return out


def moe_figures(gpu: str) -> dict:
    """Fused-MoE layers: the fixed time per local expert at one token, the streaming rate once most experts are
    touched, and the grouped GEMMs' FLOP efficiency at 4,096-8,192 tokens."""
    bw, bf, f8 = GPUS[gpu][1] * 1e12, GPUS[gpu][2] * 1e12, (GPUS[gpu][3] or 0) * 1e12
    df, src = table(gpu, "moe", "moe_perf")
    fixed, stream, flops = [], [], []
    for H, inter, E, k, tp, dt in ((2048, 768, 128, 8, 1, "bfloat16"), (2048, 768, 128, 8, 4, "bfloat16"),
                                    (7168, 2048, 256, 8, 8, "fp8_block"), (4096, 14336, 8, 2, 2, "bfloat16"),
                                    (5120, 8192, 16, 1, 2, "bfloat16")):
        d = df[(df.hidden_size == H) & (df.inter_size == inter) & (df.num_experts == E) & (df.topk == k)
               & (df.moe_tp_size == tp) & (df.moe_ep_size == 1) & (df.moe_dtype == dt)]
        if not len(d):
            continue
        dist = "balanced" if "balanced" in set(d.distribution) else sorted(set(d.distribution))[0]
        d = d[d.distribution == dist]
        eb = 2 if dt == "bfloat16" else 1
        per_expert = 3 * H * inter / tp * eb
        peak = bf if dt == "bfloat16" else f8
        if not peak:
            continue
        t = d.groupby("num_tokens").latency.min() * 1e-3
        if 1 in t.index:
            fixed.append(max(float(t.loc[1]) - k * per_expert / (bw * 0.84), 0.0) / E)
        for T in (64, 128, 256):
            if T in t.index:
                touched = E * (1 - (1 - k / E) ** T)
                stream.append(min(touched * per_expert / float(t.loc[T]) / bw, 1.0))
        for T in (4096, 8192):
            if T in t.index:
                flops.append(2 * T * k * 3 * H * inter / tp / float(t.loc[T]) / peak)
    return {"fixed_per_expert_s": statistics.median(fixed), "stream_bandwidth": statistics.median(stream),
            "grouped_gemm_efficiency": statistics.median(flops), "points": [len(fixed), len(stream), len(flops)],
            "source": src}


def moe_fit(gpu: str) -> dict:
    """One fit over every fused-MoE row of the GPU (bf16, no expert parallelism, 16+ tokens; the fastest kernel of
    each point): ``max(touched experts' bytes / (HBM x stream), FLOPs / (peak x expert_mfu) x (1 + h / m)) +
    fixed x E``, ``m = T k / E`` tokens per expert, least squares of the log ratio."""
    import numpy as np
    from scipy.optimize import least_squares

    bw, bf = GPUS[gpu][1] * 1e12, GPUS[gpu][2] * 1e12
    df, src = table(gpu, "moe", "moe_perf")
    d = df[(df.moe_ep_size == 1) & (df.moe_dtype == "bfloat16") & (df.num_tokens >= 16)]
    dist = "balanced" if "balanced" in set(d.distribution) else "power_law_1.01"
    d = d[d.distribution == dist]
    d = d.groupby(["hidden_size", "inter_size", "num_experts", "topk", "moe_tp_size", "num_tokens"]).latency.min().reset_index()
    T = d.num_tokens.to_numpy(float)
    E, k = d.num_experts.to_numpy(float), d.topk.to_numpy(float)
    per = 3 * d.hidden_size.to_numpy(float) * d.inter_size.to_numpy(float) / d.moe_tp_size.to_numpy(float)
    flops, touched_bytes = 2 * T * k * per, E * (1 - (1 - k / E) ** T) * per * 2
    lat = d.latency.to_numpy(float) * 1e-3

    def model(p):
        emfu, h, stream, fixed = p
        return np.maximum(touched_bytes / (bw * stream), flops / (bf * emfu) * (1 + h * E / (k * T))) + fixed * E

    fit = least_squares(lambda p: np.log(model(p) / lat), [0.3, 50, 0.8, 1e-7],
                        bounds=([0.01, 0, 0.2, 0], [1, 2000, 1.0, 1e-5]))
    err = np.abs(model(fit.x) / lat - 1)
    return {"expert_mfu": float(fit.x[0]), "expert_half_tokens": float(fit.x[1]), "stream": float(fit.x[2]),
            "fixed_per_expert_s": float(fit.x[3]), "rows": int(len(lat)), "median_error": float(np.median(err)),
            "source": src}


def mla_figures(gpu: str) -> dict | None:
    """MLA decode modules of DeepSeek-V3 (absorbed path, fp8 block GEMMs): the fixed time of one layer's module
    at one request, and the attention's FLOP rate at 128 heads (TP 1) from the growth with batch x context."""
    try:
        m, src = table(gpu, "mla", "mla_generation_module_perf")
    except IndexError:
        return None
    m = m[(m.gemm_type == "fp8_block") & (m.kv_cache_dtype == "bfloat16")]
    out = {"source": src, "kernel": sorted(set(m.kernel_source))}
    for heads in (16, 128):
        d = m[m.num_heads == heads]

        def lat(b, ctx, d=d):
            r = d[(d.batch_size == b) & (d.step == ctx)]
            return float(r.latency.min()) * 1e-3

        out[f"heads_{heads}"] = {"b1_ctx1024_s": lat(1, 1024), "b256_ctx4096_s": lat(256, 4096),
                                 "per_context_token_s": (lat(256, 4096) - lat(1, 4096)) / (255 * 4096)}
    return out


def ratio(gpu_points: dict, h100_points: dict) -> float:
    """Median over the points both GPUs measured of (this GPU's figure / the H100's)."""
    common = [k for k in gpu_points if k in h100_points and h100_points[k]]
    return statistics.median(gpu_points[k] / h100_points[k] for k in common)


def median(points: dict) -> float:
    return statistics.median(points.values())


def fig(value: float, source: str, digits: int = 3) -> dict:
    return {"value": float(f"{value:.{digits}g}"), "source": source}


#: MLA decode module weights of one DeepSeek-V3 layer at 16 heads a GPU (TP 8), fp8: q_a 7168x1536, q_b
#: 1536x(16x192), kv_a 7168x576, kv_b 512x(16x256), o (16x128)x7168 parameters, one byte each.
MLA_MODULE_BYTES = 7168 * 1536 + 1536 * 16 * 192 + 7168 * 576 + 512 * 16 * 256 + 16 * 128 * 7168
#: FLOP per context token of one absorbed-MLA decode layer at 128 heads: QK over the latent and rope part
#: (2 x 128 x (512 + 64)) and AV over the latent (2 x 128 x 512).
MLA_FLOP_PER_CONTEXT_TOKEN_128 = 2 * 128 * (512 + 64) + 2 * 128 * 512


def physics(g: str, raw: dict, h: dict) -> dict:
    """The clock coefficients of one GPU, each with its source (module docstring)."""
    r, name = raw[g], GPUS[g][0]
    gm, hm = r["gemm"], h["gemm"]
    src_g, src_a, src_m = gm["source"], r["attention"]["source"], r["moe"]["source"]
    out: dict = {}
    is_h100 = g == "h100_sxm"

    def scaled(field, mine, base, what, src):
        q = ratio(mine, base) if isinstance(mine, dict) else mine / base
        if is_h100:
            return {"value": H100[field], "source": f"calibrated on real vLLM runs (docs/cost-model.md); {what} "
                                                    f"measured {median(mine) if isinstance(mine, dict) else mine:.3g} ({src})"}
        return fig(H100[field] * q, f"H100's {H100[field]:g} x {q:.3f}, this GPU's {what} over the H100's "
                                    f"(ratio, same shapes; {src})")

    out["bandwidth_efficiency"] = scaled("bandwidth_efficiency", gm["bfloat16"]["gemv_bandwidth"],
                                         hm["bfloat16"]["gemv_bandwidth"], "bf16 GEMV (M 1-16, >= 100 MB) bandwidth", src_g)
    out["mfu"] = scaled("mfu", gm["bfloat16"]["gemm_efficiency"], hm["bfloat16"]["gemm_efficiency"],
                        "bf16 GEMM (M 1,024-8,192) efficiency", src_g)
    out["attention_efficiency"] = scaled("attention_efficiency", r["attention"]["prefill_efficiency"],
                                         h["attention"]["prefill_efficiency"],
                                         f"prefill attention ({', '.join(r['attention']['kernel'])}) FLOP efficiency", src_a)
    out["kv_bandwidth_efficiency"] = scaled("kv_bandwidth_efficiency", r["attention"]["decode_kv_bandwidth"],
                                            h["attention"]["decode_kv_bandwidth"], "decode attention KV bandwidth", src_a)
    out["expert_bandwidth_efficiency"] = scaled("expert_bandwidth_efficiency", r["moe"]["stream_bandwidth"],
                                                h["moe"]["stream_bandwidth"], "fused-MoE streaming rate (64-256 tokens)",
                                                src_m)
    tiny = (r["gemm"]["tiny_kernel_s"] / hm["tiny_kernel_s"] + r["attention"]["tiny_kernel_s"] / h["attention"]["tiny_kernel_s"]) / 2
    out["layer_overhead_s"] = scaled("layer_overhead_s", tiny, 1.0, "fixed kernel time (a tiny GEMM and a one-request "
                                     "decode attention, mean of the two ratios)", f"{src_g}; {src_a}")
    mfu, bwe = out["mfu"]["value"], out["bandwidth_efficiency"]["value"]
    for dtype, key in (("fp8", "fp8"), ("fp8_block", "block_fp8"), ("nvfp4", "fp4")):
        if dtype not in gm:
            continue
        d, b = gm[dtype], gm["bfloat16"]
        q = ratio(d["gemm_efficiency"], b["gemm_efficiency"])
        out[f"{key}_mfu"] = fig(mfu * q, f"this GPU's mfu {mfu:g} x {q:.3f}: {dtype} GEMMs (M 1,024-8,192) reach "
                                         f"{median(d['gemm_efficiency']):.3f} of the {dtype[:3]} peak where bf16 ones "
                                         f"reach {median(b['gemm_efficiency']):.3f} of theirs (same shapes; {src_g})")
        if dtype == "fp8":
            # the H100's fp8 weights stream at its calibrated 0.84: the Scout FP8 training runs were fitted at it
            # (docs/cost-model.md); other GPUs scale it by their fp8 GEMVs over the H100's
            hd = hm["fp8"]["gemv_bandwidth"]
            if is_h100:
                continue
            q = ratio(d["gemv_bandwidth"], hd)
            out[f"{key}_bandwidth_efficiency"] = fig(H100["bandwidth_efficiency"] * q,
                                                     f"H100's fp8 weight rate 0.84 (calibrated on its FP8 runs) x "
                                                     f"{q:.3f}, this GPU's fp8 GEMVs (M 1-16) over the H100's ({src_g})")
            continue
        q = ratio(d["gemv_bandwidth"], b["gemv_bandwidth"])
        out[f"{key}_bandwidth_efficiency"] = fig(bwe * q, f"this GPU's weight rate {bwe:g} x {q:.3f}: {dtype} GEMVs "
                                                          f"(M 1-16) stream at {median(d['gemv_bandwidth']):.3f} of "
                                                          f"peak where bf16 ones do at {median(b['gemv_bandwidth']):.3f} ({src_g})")
    mf = r["moe_fit"]
    fit_words = (f"one fit of every bf16 fused-MoE row ({mf['rows']} points, median error {mf['median_error']:.0%}): "
                 f"max(experts' bytes / stream, FLOPs / (peak x expert_mfu) x (1 + h / tokens per expert)) + "
                 f"fixed x experts ({mf['source']})")
    out["expert_mfu"] = fig(mf["expert_mfu"], f"grouped expert GEMMs' efficiency, of the bf16 peak; {fit_words}")
    out["expert_half_tokens"] = fig(mf["expert_half_tokens"], f"tokens per expert at which the grouped GEMMs reach "
                                                              f"half of expert_mfu; {fit_words}")
    out["moe_expert_overhead_s"] = fig(r["moe"]["fixed_per_expert_s"],
                                       "fused-MoE layer at one token less its experts' weights at 0.84 of peak, per "
                                       f"local expert (median of 3-5 shapes, clipped at 0; {src_m})")
    mla = r["mla"]
    if mla and all(v == v for h in ("heads_16", "heads_128") for v in mla[h].values()):  # (no NaN rows)
        attn = mla["heads_128"]["per_context_token_s"]
        bf = GPUS[g][2] * 1e12
        out["mla_attention_efficiency"] = fig(MLA_FLOP_PER_CONTEXT_TOKEN_128 / attn / bf,
                                              f"absorbed MLA decode ({', '.join(mla['kernel'])}) at 128 heads: growth "
                                              f"from 1 to 256 requests at 4,096 context, per context token, against "
                                              f"its FLOPs ({mla['source']})")
        bfe = out.get("block_fp8_bandwidth_efficiency", out["bandwidth_efficiency"])["value"]
        stream = MLA_MODULE_BYTES / (GPUS[g][1] * 1e12 * bfe)
        fixed = mla["heads_16"]["b1_ctx1024_s"] - stream - out["layer_overhead_s"]["value"]
        out["mla_layer_overhead_s"] = fig(max(fixed, 0.0), f"DeepSeek-V3 MLA decode module (16 heads, fp8 block, one "
                                                           f"request at 1,024 context: {mla['heads_16']['b1_ctx1024_s'] * 1e6:.0f} us) "
                                                           f"less its weights at the block-fp8 rate and the per-layer time "
                                                           f"({mla['source']})")
    by_tp = {}
    for tp, a in r["allreduce"]["by_tp"].items():
        ha = h["allreduce"]["by_tp"][tp]
        link = GPUS[g][4] / GPUS["h100_sxm"][4]
        if is_h100:
            continue  # the H100's all-reduce figures stay the calibrated ones (docs/cost-model.md)
        src = r["allreduce"]["source"]
        q = a["nccl_latency_s"] / ha["nccl_latency_s"]
        row = {"nccl_allreduce_latency_s": fig(H100["nccl_allreduce_latency_s"] * q,
                                               f"H100's 20 us x {q:.3f}: NCCL all-reduce, {tp} GPUs, <= 32 KB ({src})")}
        q = a["nccl_gbps"] / ha["nccl_gbps"] / link
        row["nccl_interconnect_efficiency"] = fig(min(H100["nccl_interconnect_efficiency"] * q, 1.0),
                                                  f"H100's 0.75 x {q:.3f}: NCCL all-reduce of 64 MB, {tp} GPUs "
                                                  f"({a['nccl_gbps']:.3g} GB/s against the H100's {ha['nccl_gbps']:.3g}), "
                                                  f"per unit of link ({src})")
        q = a["custom_latency_s"] / ha["custom_latency_s"]
        row["allreduce_latency_s"] = fig(H100["allreduce_latency_s"] * q,
                                         f"H100's 8.5 us x {q:.3f}: vLLM custom all-reduce (CUDA graph), {tp} GPUs, "
                                         f"<= 32 KB ({src})")
        q = a["custom_gbps"] / ha["custom_gbps"] / link
        row["interconnect_efficiency"] = fig(min(H100["interconnect_efficiency"] * q, 1.0),
                                             f"H100's 0.12 x {q:.3f}: custom all-reduce growth from 256 KB to 1 MB, {tp} "
                                             f"GPUs ({a['custom_gbps']:.3g} GB/s against the H100's {ha['custom_gbps']:.3g}), "
                                             f"per unit of link ({src})")
        by_tp[tp] = row
    sampler = GPUS["h100_sxm"][1] / GPUS[g][1]
    out["sampler_scale"] = {"value": 1.0 if is_h100 else float(f"{sampler:.3g}"),
                            "source": "measured on one H100 (tests/data/latency/h100_sampler_offload_times.json)" if is_h100
                            else f"not measured on this GPU: the H100's sampler seconds x {sampler:.3g}, the ratio of HBM "
                                 "bandwidths (the sort streams each request's logits several times); a proxy",
                            "measured": is_h100}
    return {"name": name, "aiconfigurator_system": g, "coefficients": out, "by_tp": by_tp}


def main() -> int:
    raw = {g: {"gemm": gemm_figures(g), "attention": attention_figures(g), "allreduce": allreduce_figures(g),
               "moe": moe_figures(g), "moe_fit": moe_fit(g), "mla": mla_figures(g)} for g in GPUS}
    gpus = {GPUS[g][0]: physics(g, raw, raw["h100_sxm"]) for g in GPUS}
    json.dump({"about": __doc__.strip().splitlines()[0], "generated_by": "tools/aic/derive_gpu_physics.py",
               "data": VERSION, "gpus": gpus}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
