"""The clock held against measurements: a user's own (fitted into coefficients) and the real vLLM runs of
the sim-to-real study's training split (validated), and a second source step by step (AIConfigurator's measured
operators: :func:`cross_check`).

May import: simulator.base, simulator.sizing, simulator.clock, simulator.workload, simulator.engine, simulator.batch.
"""

from simulator.calibration.crosscheck import cross_check, format_cross_check
from simulator.calibration.fit import CalibrationError, fit, parse_measurement, price_fit
from simulator.calibration.validation import format_table, validate

__all__ = ["CalibrationError", "cross_check", "fit", "format_cross_check", "format_table", "parse_measurement", "price_fit",
           "validate"]
