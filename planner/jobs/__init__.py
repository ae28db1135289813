"""One lifecycle for the planner's chunked jobs: sweeps, deployment searches and day plans (docs/operations.md,
"Jobs: one lifecycle").

A job is split into chunks at creation; each chunk is one Celery task. What every kind does the same way lives
here, once:

- :mod:`planner.jobs.lifecycle`: :class:`ChunkedJob` (enqueue, claim, run under a heartbeat, store under a lock
  on the job row, fail, cancel), :class:`Watch` (progress and the cancel check) and the failure messages;
- :mod:`planner.jobs.heartbeat`: the heartbeat thread of a running chunk and the test for a stall;
- :mod:`planner.jobs.healing`: stalled chunks put back and sent again, pending chunks whose message was lost;
- :mod:`planner.jobs.progress`: stalled chunks and the time left on a status page;
- :mod:`planner.jobs.fairness`: each chunk's broker priority from its owner's chunks ahead of it (fair sharing).
- :mod:`planner.jobs.quota`: one per-user quota of queued work in seconds over sweeps, runs and searches.

A kind (in ``planner/sweeps/services.py``, ``planner/search/services.py``, ``planner/dayplans/services.py``)
subclasses :class:`ChunkedJob` with its models, chunk task and noun, and supplies only its steps: ``run``
(simulate a chunk), ``store`` (its result fields and the *gather* step run under the job's lock) and, where it
differs, ``waiting``, ``claim_fields``, ``stopped``, ``cancelled`` and ``resend``. This package imports no kind.
"""

from planner.jobs.healing import heal_stalled, lost_pending, requeue_stalled, stalled_chunks
from planner.jobs.heartbeat import MAX_CHUNK_ATTEMPTS, Heartbeat, gave_up_message, is_stalled, stall_after_s
from planner.jobs.lifecycle import (
    CLAIMED,
    PROGRESS_INTERVAL_S,
    UNFINISHED,
    ChunkedJob,
    JobCancelled,
    QuotaExceeded,
    Watch,
    failure_message,
    queue_options,
    send_now,
)
from planner.jobs.progress import stalled_count, time_left

__all__ = ["CLAIMED", "MAX_CHUNK_ATTEMPTS", "PROGRESS_INTERVAL_S", "ChunkedJob", "Heartbeat", "JobCancelled",
           "QuotaExceeded", "UNFINISHED", "Watch", "failure_message", "gave_up_message", "heal_stalled", "is_stalled", "lost_pending",
           "queue_options", "requeue_stalled", "send_now", "stall_after_s", "stalled_chunks", "stalled_count",
           "time_left"]
