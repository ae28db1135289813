"""The clock held against measurements: a user's own (fitted into coefficients) and the real vLLM runs of
the sim-to-real study's training split (validated).

May import: simulator.base, simulator.sizing, simulator.clock, simulator.workload, simulator.engine, simulator.batch.
"""

from simulator.calibration.fit import CalibrationError, fit, parse_measurement
from simulator.calibration.validation import format_table, validate

__all__ = ["CalibrationError", "fit", "format_table", "parse_measurement", "validate"]
