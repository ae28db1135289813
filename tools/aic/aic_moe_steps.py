#!/usr/bin/env python3
"""AIConfigurator's DP / EP step times for the MoE cross-check table (``simulator/data/aic_moe_steps.json``).

Runs NVIDIA AIConfigurator's vLLM backend (PyPI ``aiconfigurator-core`` 0.12.0, Apache-2.0; an optional package,
in a scratch virtual environment) on the MoE models, GPUs and DP / EP shapes of :data:`MOE_CASES` and writes one
forward pass's time per step shape (decode batches per DP rank at 1,024 and 4,096 tokens of context, one prefill a
rank). It times neither the sampler nor the CPU side of a step. ``python -m simulator validate --against
aiconfigurator-moe`` compares the DP / EP clock with these figures (or, with the package installed, the same calls
made live)::

    python tools/aic/aic_moe_steps.py > simulator/data/aic_moe_steps.json
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from simulator.calibration.crosscheck_moe import (  # noqa: E402
    MOE_CASES,
    MOE_DECODE_POINTS,
    MOE_PREFILL_POINTS,
    aic_moe_steps,
)


def main() -> int:
    logging.disable(logging.WARNING)
    rows = []
    for case in MOE_CASES:
        try:
            steps = aic_moe_steps(case)
        except Exception as exc:  # a case the database cannot time is listed with its reason
            rows.append({**case.key(), "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        rows.append({**case.key(), "steps": steps})
    json.dump({"about": __doc__.strip().splitlines()[0], "source": "aiconfigurator-core 0.12.0 (PyPI), vLLM backend",
               "decode_points": MOE_DECODE_POINTS, "prefill_points": MOE_PREFILL_POINTS, "cases": rows},
              sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
