"""The command line, ``python -m simulator COMMAND``: run, sweep, workload, cluster, search, validate, day.

The top floor: it may use every part, and nothing imports it but ``simulator/__main__.py``.

May import: simulator.base, simulator.sizing, simulator.clock, simulator.speculative, simulator.workload, simulator.engine, simulator.cluster, simulator.batch, simulator.search, simulator.calibration, simulator.launch, simulator.autoscale, simulator.day.
"""

from simulator.cli.commands import main

__all__ = ["main"]
