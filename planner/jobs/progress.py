"""Progress of a chunked job, once for every kind: which running chunks stalled, and the time left.

Both read the chunk rows as dicts (``queryset.values(...)``: ``status``, ``heartbeat_at``, ``started_at``,
``finished_at`` and what the kind's cost needs), so a status page reads its chunks once.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.utils import timezone

from planner.jobs.heartbeat import is_stalled


def stalled_count(job, chunks: list[dict]) -> int:
    """How many of ``job``'s running ``chunks`` lost their worker (heartbeat older than ``KVP_STALL_AFTER_S``);
    0 once the job is final."""
    if job.is_final:
        return 0
    return sum(1 for c in chunks if c["status"] == "running" and is_stalled(c["heartbeat_at"]))


def time_left(chunks: list[dict], *, elapsed: float, fraction: float, cost: Callable[[dict], float],
              pending_cost: Callable[[list[dict]], float] | None = None,
              now: datetime | None = None) -> float | None:
    """Seconds left of a job whose chunks run in parallel, from what its finished chunks took against what they
    were priced at.

    ``cost(chunk)`` is a chunk's price in estimated seconds. The chunks done took ``scale`` times their price;
    what is left is the pending chunks' price (``pending_cost(chunks)``, by default the sum of their ``cost``)
    times ``scale``, plus each running chunk's remainder (:func:`_running_left`), shared among the chunks running
    at once. None before a chunk is done; a one-chunk job from its own ``fraction`` once a quarter is done.
    ``now`` defaults to the clock.
    """
    if len(chunks) == 1:
        return elapsed * (1 - fraction) / fraction if fraction >= 0.25 else None
    done = [c for c in chunks if c["status"] == "done" and c["finished_at"] and c["started_at"]]
    if not done:
        return None
    took = sum(max(0.0, (c["finished_at"] - c["started_at"]).total_seconds()) for c in done)
    scale = took / sum(cost(c) for c in done)
    now = now or timezone.now()
    running = [c for c in chunks if c["status"] == "running"]
    pending = pending_cost(chunks) if pending_cost is not None else sum(
        cost(c) for c in chunks if c["status"] == "pending")
    left = scale * pending
    for c in running:
        ran = (now - c["started_at"]).total_seconds() if c["started_at"] else 0.0
        left += _running_left(scale * cost(c), ran, c.get("progress") or 0.0)
    return left / max(1, len(running))


#: The share of a running chunk done from which its own pace counts (as a one-chunk job's does).
OWN_PACE_FROM = 0.25


def _running_left(priced: float, ran: float, progress: float) -> float:
    """What a running chunk has left: what it has not yet used of its ``priced`` seconds, and, once
    :data:`OWN_PACE_FROM` of it is done, no more than its own pace foresees (``ran`` seconds for ``progress``),
    which is all there is once it has used its price up.

    A price foresees from other chunks; the chunk's own pace is measured, and a search's chunk skips the rest of
    its shapes once they are dearer than its answer, so its pace can only overstate what is left. Measured on the
    search of ``tests/integration/test_search_eta.py`` (14 chunks): chunks with no answer took 0.27x to 0.66x
    their price (1.28 s of 6.42 s), which alone put 4 s of the last 5 s into the estimate."""
    unused = max(0.0, priced - ran)
    if progress < OWN_PACE_FROM:
        return unused
    own = ran * (1.0 - progress) / progress
    return own if unused == 0.0 else min(unused, own)
