"""Old import path of :mod:`simulator.clock.cost_model` (see :mod:`simulator.specs`)."""

from simulator.clock.cost_model import *  # noqa: F401,F403
from simulator.clock.cost_model import RooflineStepTime, build_step_time_model  # noqa: F401
