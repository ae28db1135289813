"""Old import path of :mod:`simulator.base.specs`, kept for the tools that score the clock on real runs.

``../tools/latency_truth`` (and the held-out measurement built the same way) import
``simulator.specs``, ``simulator.hf_config`` and ``simulator.cost_model``; these three doors re-export the
names from the parts where they now live, and hold nothing else (``tests/simulator/test_layout.py``).
"""

from simulator.base.specs import *  # noqa: F401,F403
from simulator.base.specs import DeploymentSpec, GpuSpec, ModelSpec, SpecError  # noqa: F401
