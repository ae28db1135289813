"""Caps on what one sweep may ask for, read from the ``KVP_SWEEP_*`` settings when they are set; the limits runs
are priced against (:mod:`planner.sweeps.pricing` applies them), and the check of a calibration's fit.

The pricing limits and the calibration check are here, not in :mod:`planner.sweeps.pricing`, so that
``planner.calibration.services`` can use them without importing the sweeps (whose sections import the
calibrations: an import cycle).
"""

from __future__ import annotations

from django.conf import settings

from simulator.batch import Price, budget

#: Most replicas one sweep point may simulate.
MAX_SWEEP_INSTANCES = 64
#: Largest trace text a sweep may carry.
MAX_TRACE_CHARS = 4 * 1024 * 1024


def limit(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def max_points() -> int:
    return limit("KVP_SWEEP_MAX_POINTS", 400)


def max_work() -> int:
    """Cap on points x requests for one sweep."""
    return limit("KVP_SWEEP_MAX_WORK", 4_000_000)


def max_requests() -> int:
    return limit("KVP_SWEEP_MAX_REQUESTS", 100_000)


def chunk_points() -> int:
    return limit("KVP_SWEEP_CHUNK_POINTS", 16)


def run_max_bytes() -> int:
    return int(getattr(settings, "KVP_RUN_MAX_BYTES", 2 * 2**30))


def sync_max_seconds() -> float:
    return float(getattr(settings, "KVP_SYNC_MAX_SECONDS", 10.0))


def inline_max_seconds() -> float:
    """Estimated seconds up to which a simulation, replicas search or calibration runs inside the web request;
    a dearer one runs on a worker (:mod:`planner.runs`)."""
    return float(getattr(settings, "KVP_INLINE_MAX_SECONDS", 1.0))


def chunk_max_seconds() -> float:
    return float(getattr(settings, "KVP_CHUNK_MAX_SECONDS", 300.0))


def check_calibration(price: Price, simulations: int) -> Price:
    """Refuse a calibration fit (it runs inside the web request: up to ``simulations`` simulations of the
    measured load, :func:`simulator.calibration.price_fit`) over the synchronous limits."""
    budget.check(price, max_bytes=run_max_bytes(), max_seconds=sync_max_seconds(),
                 what=f"This calibration (up to {simulations} simulations of the measured load)", field="file",
                 advice="upload a measurement of fewer or shorter requests")
    return price
