"""Workloads: which requests arrive, when, how long they are, and what content they share.

:class:`Workload` (arrays, one entry per request), length distributions, a seeded synthetic generator
(:class:`WorkloadSpec`, :func:`generate_workload`), the planner's own trace files (:func:`read_trace`), the
public trace formats people share (Mooncake, Azure, BurstGPT, ``vllm bench serve`` results:
:func:`read_public_trace`, cut and scaled by :class:`TraceOptions`) and the oracle's workload JSON
(:mod:`~simulator.workload.oracle_io`).

May import: simulator.base.
"""

from simulator.workload.distributions import parse_distribution
from simulator.workload.generators import (
    ArrivalProcess,
    PrefixGroup,
    TurnSpec,
    WorkloadSpec,
    generate_workload,
    parse_arrival,
)
from simulator.workload.oracle_io import load_json, read_workload
from simulator.workload.requests import Workload, WorkloadError
from simulator.workload.trace_formats import (
    MAX_TRACE_BYTES,
    TRACE_FORMATS,
    TraceOptionError,
    TraceOptions,
    TraceOptionValueError,
    TraceReport,
    guess_format,
)
from simulator.workload.trace_replay import read_any_trace, read_public_trace
from simulator.workload.traces import apply_parents, parse_trace, read_trace, trace_format, write_oracle_json

__all__ = ["MAX_TRACE_BYTES", "TRACE_FORMATS", "TraceOptionError", "TraceOptionValueError", "TraceOptions", "TraceReport", "guess_format", "read_any_trace", "read_public_trace", "ArrivalProcess", "PrefixGroup", "TurnSpec", "Workload", "WorkloadError", "WorkloadSpec", "apply_parents", "generate_workload", "load_json", "parse_arrival", "parse_distribution", "parse_trace", "read_trace", "read_workload", "trace_format", "write_oracle_json"]
