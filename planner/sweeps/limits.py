"""Caps on what one sweep may ask for, read from the ``KVP_SWEEP_*`` settings when they are set."""

from __future__ import annotations

from django.conf import settings

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
