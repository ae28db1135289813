"""Worked example: Llama-3.1-8B on one H100 SXM with an EAGLE head, k draft tokens at acceptance alpha.

    python examples/speculative_decoding.py --k 3 --acceptance 0.7

Prints the sizing with and without the head (its weights and KV per block), then simulates the
same traffic (Poisson arrivals, 1,000-token prompts, 200-token outputs) with speculation off and
on, on the roofline clock of the target and of the head, and finds the KV cliff of each (the fewest
KV blocks with no preemption). See docs/speculative_decoding.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # (run as a script from anywhere, as bench/ does)

from simulator.base import DeploymentSpec, GpuSpec  # noqa: E402
from simulator.batch import simulate  # noqa: E402
from simulator.clock import build_step_time_model  # noqa: E402
from simulator.engine import EngineConfig  # noqa: E402
from simulator.sizing import parse_hf_config  # noqa: E402
from simulator.speculative import DraftSpec, draft_step_terms, plan_with_draft  # noqa: E402
from simulator.workload import Workload  # noqa: E402

CONFIG = ROOT / "gpuprofiles/data/hf_configs/meta-llama--Meta-Llama-3.1-8B_config.json"
# the catalog's "h100-sxm5-80gb" (gpuprofiles/data/gpus.csv): memory as vLLM sees it, HBM TB/s, dense TFLOPS
H100 = GpuSpec(name="H100 SXM5 80GB", memory_gib=79.18, bandwidth_tbps=3.35, bf16_tflops=989,
               fp8_tflops=1979, interconnect_gbps=900)


def traffic(rate: float, n: int, seed: int) -> Workload:
    rng = np.random.default_rng(seed)
    return Workload(prompt_len=np.full(n, 1000), output_len=np.full(n, 200),
                    arrival=np.cumsum(rng.exponential(1.0 / rate, n)), arrival_unit="s")


def engine(blocks: int, cost, k: int, alpha: float, draft, async_scheduling: bool = False) -> EngineConfig:
    spec = None if k == 0 else {"method": "eagle", "num_speculative_tokens": k, "acceptance_rate": alpha,
                                "draft_cost_model": draft}
    return EngineConfig(num_gpu_blocks=blocks, max_num_seqs=256, max_num_batched_tokens=8192, cost_model=cost,
                        speculative=spec, async_scheduling=async_scheduling)


def row(name: str, res, blocks: int) -> dict:
    t, lat = res.totals, res.latency()
    out = float(np.asarray(res.requests["num_output_tokens"]).sum())
    return {"": name, "KV blocks": blocks, "acceptance rate": round(t.get("spec_acceptance_rate", 0.0), 3)
            if "spec_acceptance_rate" in t else "-", "tokens/step/request": round(t.get("spec_mean_acceptance_length", 1.0), 2),
            "ITL p50 ms": round(lat.itl.p50 * 1e3, 2), "TTFT p50 ms": round(lat.ttft.p50 * 1e3, 1),
            "output tok/s": round(out / t["duration_s"]), "preemptions": t["preemptions"]}


def cliff(wl: Workload, cost, k: int, alpha: float, draft, lo: int, hi: int, step: int = 10,
          async_scheduling: bool = False) -> int:
    """The KV cliff: the fewest blocks (to ``step``) at which the traffic runs with no preemption,
    by bisection between ``lo`` (assumed to preempt) and ``hi`` (assumed not to)."""
    while hi - lo > step:
        mid = (lo + hi) // 2
        t = simulate(wl, [engine(mid, cost, k, alpha, draft, async_scheduling)])[0].totals
        if t["preemptions"] == 0 and t["finished"] == wl.n:
            hi = mid
        else:
            lo = mid
    return hi


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=3, help="num_speculative_tokens (default 3)")
    ap.add_argument("--acceptance", type=float, default=0.7, help="per-position acceptance rate (default 0.7)")
    ap.add_argument("--rate", type=float, default=20.0, help="requests per second (default 20)")
    ap.add_argument("--requests", type=int, default=150, help="requests simulated (default 150)")
    ap.add_argument("--async-scheduling", action="store_true", help="vLLM's asynchronous scheduling (both rows)")
    args = ap.parse_args()
    asy = args.async_scheduling
    model = parse_hf_config(json.loads(CONFIG.read_text()), name="Llama-3.1-8B", num_parameters=8_030_261_248)
    dep = DeploymentSpec(max_model_len=8192)
    head = DraftSpec("eagle", args.k)
    plain, sized = plan_with_draft(model, H100, dep, None), plan_with_draft(model, H100, dep, head)
    sp = sized.speculative
    print(f"sizing: {plain.num_gpu_blocks:,} KV blocks without speculation; the EAGLE head takes "
          f"{sp['draft_weights_gib']:.2f} GiB of weights and adds {sp['draft_kv_bytes_per_token_per_gpu']:,.0f} "
          f"bytes per token to {plain.kv_bytes_per_token_per_gpu:,.0f}: {sized.num_gpu_blocks:,} blocks")
    cost = build_step_time_model("roofline", model=model, gpu=H100).terms
    draft = draft_step_terms(model, head, H100)
    wl = traffic(args.rate, args.requests, seed=0)
    rows = [row("k = 0", simulate(wl, [engine(plain.num_gpu_blocks, cost, 0, 0.0, None, asy)])[0],
                plain.num_gpu_blocks),
            row(f"EAGLE k = {args.k}, alpha = {args.acceptance:g}",
                simulate(wl, [engine(sized.num_gpu_blocks, cost, args.k, args.acceptance, draft, asy)])[0],
                sized.num_gpu_blocks)]
    keys = list(rows[0])
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join(str(r[k]) for k in keys))
    c0 = cliff(wl, cost, 0, 0.0, None, 64, plain.num_gpu_blocks, async_scheduling=asy)
    ck = cliff(wl, cost, args.k, args.acceptance, draft, 64, sized.num_gpu_blocks, async_scheduling=asy)
    print(f"KV cliff (fewest blocks, to 10, with no preemption): k = 0: {c0:,} blocks, "
          f"EAGLE k = {args.k}: {ck:,} blocks")


if __name__ == "__main__":
    main()
