"""What the engine benchmarks share (``bench_engine.py``, ``bench_features.py``): the workload and the Llama 3.1 8B on
H100 roofline inputs. Not a benchmark itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulator.workload import Workload

ROOT = Path(__file__).resolve().parents[1]

HF = ROOT / "tests" / "data" / "sizing" / "hf_configs" / "meta-llama--Meta-Llama-3.1-8B_config.json"
# gpus.csv: H100 SXM5 80GB
H100 = dict(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
            interconnect_gbps=900)
#: Llama 3.1 8B's bytes per 16-token block (2 MiB).
BPB = 16 * 131_072


def normal_workload(n: int, rate: float, seed: int = 0) -> Workload:
    """Prompts and outputs ~N(512, 256) clipped >= 1, Poisson arrivals at ``rate`` requests per step."""
    rng = np.random.default_rng(seed)
    prompt = np.maximum(rng.normal(512, 256, n).round(), 1)
    output = np.maximum(rng.normal(512, 256, n).round(), 1)
    arrival = np.floor(np.cumsum(rng.exponential(1 / rate, n)))
    return Workload(prompt_len=prompt, output_len=output, arrival=arrival)
