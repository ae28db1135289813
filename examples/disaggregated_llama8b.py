"""Aggregated against disaggregated serving of Llama 3.1 8B on H100s (docs/disaggregated_serving.md).

Four H100 SXM5 80GB GPUs (TP 1 each, vLLM's start-up sizing, the roofline clock) serve Poisson
traffic: 4 aggregated replicas, 1P3D, 2P2D and 3P1D, all behind least-loaded routers, the KV moving
over a 50 GB/s link (one 400 Gb/s NIC per decode GPU) with 100 us per transfer. Prints one row per
deployment; ``--write-deployment FILE`` also writes the 1P3D deployment as JSON for
``python -m simulator cluster --disaggregated FILE``.

Run from the repository root: ``python examples/disaggregated_llama8b.py --rate 20 --duration 30``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulator.base import GpuSpec  # noqa: E402
from simulator.cluster import DisaggregatedDeployment, KvLink, Pool, compare_splits, engine_config_for  # noqa: E402  # noqa: E402
from simulator.sizing import parse_hf_config  # noqa: E402
from simulator.workload import ArrivalProcess, WorkloadSpec, generate_workload  # noqa: E402

MODEL = ROOT / "gpuprofiles" / "data" / "hf_configs" / "meta-llama--Meta-Llama-3.1-8B_config.json"
H100 = GpuSpec(name="H100 SXM5 80GB", memory_gib=79.18, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
               interconnect_gbps=900, price_per_hour=3.78)  # examples/search_gpus.json


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:.1f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=20.0, help="requests per second (default 20)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of arrivals (default 30)")
    p.add_argument("--prompt", default="normal:2048,512", help="prompt lengths (default normal:2048,512)")
    p.add_argument("--output", default="normal:256,64", help="output lengths (default normal:256,64)")
    p.add_argument("--link-gbps", type=float, default=50.0, help="KV link bandwidth per decode instance, GB/s")
    p.add_argument("--write-deployment", metavar="FILE", help="write the 1P3D deployment JSON here")
    args = p.parse_args(argv)
    n = max(1, round(args.rate * args.duration))
    wl = generate_workload(WorkloadSpec(n=n, prompt=args.prompt, output=args.output,
                                        arrival=ArrivalProcess("poisson", rate=args.rate, unit="s")), 0)
    model = parse_hf_config(json.loads(MODEL.read_text()), name="Llama 3.1 8B")
    cfg, kvbpt = engine_config_for(model, H100, max_model_len=4096)
    link = KvLink(args.link_gbps, 1e-4)
    if args.write_deployment:
        dep = DisaggregatedDeployment(Pool(cfg, 1, "least-loaded", 1, 3.78, "H100 TP1"),
                                      Pool(cfg, 3, "least-loaded", 1, 3.78, "H100 TP1"), link,
                                      kv_bytes_per_token=int(kvbpt))
        Path(args.write_deployment).write_text(json.dumps({k: v for k, v in dep.to_dict().items() if k != "name"}))
    rows = compare_splits(wl, cfg, instances=4, kv_bytes_per_token=kvbpt, link=link, cost_per_hour=3.78)
    print(f"{n} requests at {args.rate:g}/s, prompts {args.prompt}, outputs {args.output}; "
          f"{cfg.num_gpu_blocks:,} KV blocks per H100, {kvbpt:,.0f} KV bytes per token")
    print(f"{'deployment':<14}{'GPUs':>5}{'$/h':>7}{'TTFT p50':>10}{'TTFT p90':>10}{'ITL p90':>9}{'E2E p90':>9}"
          f"{'tok/s':>8}{'xfer p90':>9}{'P util':>8}{'D util':>8}")
    for r in rows:
        util = ("-" if r.prefill_utilisation is None else f"{r.prefill_utilisation:.2f}",
                "-" if r.decode_utilisation is None else f"{r.decode_utilisation:.2f}")
        print(f"{r.name:<14}{r.num_gpus:>5}{r.cost_per_hour:>7.2f}{_ms(r.ttft_p50_s):>10}{_ms(r.ttft_p90_s):>10}"
              f"{_ms(r.itl_p90_s):>9}{_ms(r.e2e_p90_s):>9}{r.output_tokens_per_s:>8.0f}{_ms(r.transfer_p90_s):>9}"
              f"{util[0]:>8}{util[1]:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
