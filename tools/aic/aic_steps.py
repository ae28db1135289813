#!/usr/bin/env python3
"""AIConfigurator's step times for the cross-check table (``simulator/data/aic_steps.json``).

Runs NVIDIA AIConfigurator's vLLM backend (PyPI ``aiconfigurator-core`` 0.12.0, Apache-2.0; an optional package,
in a scratch virtual environment) on the models, GPUs, TP degrees and precisions of :data:`CASES` and writes one
forward pass's time per step shape (decode batches at 1,024 and 4,096 tokens of context, single prefills), each
the sum of the operators AIConfigurator measured (its database, ``per_op_source`` "silicon") or modelled. It
times neither the sampler nor the CPU side of a step. ``python -m simulator validate --against aiconfigurator``
compares the clock with these figures (or, with the package installed, with the same calls made live)::

    python tools/aic/aic_steps.py > simulator/data/aic_steps.json
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from simulator.calibration.crosscheck import CASES, DECODE_POINTS, PREFILL_POINTS, aic_case_steps  # noqa: E402


def main() -> int:
    logging.disable(logging.WARNING)
    rows = []
    for case in CASES:
        try:
            steps = aic_case_steps(case)
        except Exception as exc:  # a case the database cannot time is listed with its reason
            rows.append({**case.key(), "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        rows.append({**case.key(), "steps": steps})
    json.dump({"about": __doc__.strip().splitlines()[0], "source": "aiconfigurator-core 0.12.0 (PyPI), vLLM backend",
               "decode_points": DECODE_POINTS, "prefill_points": PREFILL_POINTS, "cases": rows}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
