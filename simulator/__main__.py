"""``python -m simulator``: see :mod:`simulator.cli.commands`."""

from simulator.cli import main

raise SystemExit(main())
