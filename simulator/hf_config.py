"""Old import path of :mod:`simulator.sizing.hf_config` (see :mod:`simulator.specs`)."""

from simulator.sizing.hf_config import *  # noqa: F401,F403
from simulator.sizing.hf_config import parse_hf_config  # noqa: F401
