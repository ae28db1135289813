"""``python -m simulator``: see :mod:`simulator.cli`."""

from simulator.cli import main

raise SystemExit(main())
