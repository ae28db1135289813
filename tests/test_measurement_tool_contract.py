"""What the tools that score the clock on real vLLM runs call, still there (``../tools/latency_truth``).

The project is measured on held-out runs by a tool built like the shared one: it imports
``simulator.hf_config``, ``simulator.specs``, ``simulator.cost_model`` and ``simulator.sizing``, reads the
catalog through ``gpuprofiles.catalog``, writes a ``config.json`` with the roofline's terms and runs
``python -m simulator run --workload workload.csv --config config.json --output result.json``, then reads
named fields of the result. This test makes the same calls on one catalog model and GPU (the tool itself lives
outside the repository), so a rename that would break the measurement fails here first.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_measurement_tools_calls_still_work(tmp_path):
    import gpuprofiles.catalog as cat
    from simulator.cost_model import RooflineStepTime
    from simulator.hf_config import parse_hf_config
    from simulator.sizing import plan, weights_bytes_per_gpu
    from simulator.specs import DeploymentSpec, GpuSpec

    row = {r["name"]: r for r in cat.model_rows()}["Llama 3.1 8B"]
    fname = cat.MODEL_CONFIG_FILES.get("Llama 3.1 8B")
    hf = cat.load_config(fname) if fname else None
    model = parse_hf_config(hf if hf is not None else cat.derived_config(row), name="Llama 3.1 8B",
                            num_parameters=cat._params(row["total_params_B"]),
                            num_active_parameters=cat._params(row["active_params_B"]))
    grow = {r["name"]: r for r in cat.gpu_rows()}["H100 SXM5 80GB"]
    _, v = cat.gpu_defaults(grow)
    gpu = GpuSpec(name=v["name"], memory_gib=v["memory_gib"], memory_mib=v["memory_mib"],
                  bandwidth_tbps=v["bandwidth_tbps"], bf16_tflops=v["bf16_tflops"], fp8_tflops=v["fp8_tflops"],
                  fp4_tflops=v["fp4_tflops"], interconnect_gbps=900.0, price_per_hour=v["price_per_hour"],
                  memory_gib_estimated=v["memory_gib_estimated"])
    dep = DeploymentSpec(tensor_parallel_size=1, gpu_memory_utilization=0.9, block_size=16, max_model_len=4096,
                         max_num_batched_tokens=2048, max_num_seqs=128, vllm_version="0.15.1")
    size = plan(model, gpu, dep)
    assert size.fits and size.num_gpu_blocks > 1000 and weights_bytes_per_gpu(model, dep) > 1e10
    roof = RooflineStepTime.from_specs(model, gpu, deployment=dep)
    (tmp_path / "config.json").write_text(json.dumps({
        "num_gpu_blocks": int(size.num_gpu_blocks), "block_size": 16, "max_num_seqs": 128,
        "max_num_batched_tokens": 2048, "enable_prefix_caching": True, "enable_chunked_prefill": True,
        "cost_model": {"kind": "terms", **roof.terms.to_dict()}}))
    (tmp_path / "workload.csv").write_text("arrival_time,prompt_tokens,output_tokens,prefix_id,prefix_len\n"
                                           + "".join(f"{i * 0.05:.2f},600,40,sys,500\n" for i in range(40)))
    out = tmp_path / "result.json"
    done = subprocess.run([sys.executable, "-m", "simulator", "run", "--workload", str(tmp_path / "workload.csv"),
                           "--config", str(tmp_path / "config.json"), "--output", str(out)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    r = json.loads(out.read_text())
    ok = [x for x in r["requests"] if x.get("status") == "finished" and x.get("finish_time_s") is not None]
    assert len(ok) == 40 and all("arrival_time" in x and "first_token_time_s" in x for x in ok)
    for key in ("preemptions", "prefix_cache_hit_rate", "prefix_cache_evictions", "peak_running", "peak_kv_usage",
                "num_steps"):
        assert key in r["totals"], key
