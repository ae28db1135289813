"""The engine's per-request state: every request's arrays, the running order and the waiting queue, in one object.

vLLM keeps one ``Request`` object per request (``vllm/v1/request.py``); the engine keeps the same facts as
columns, one entry per request of the workload (request ``q`` is row ``q``), so a step's work is array
operations over the requests it touches. :class:`RequestState` builds and documents them; the
engine (:class:`simulator.engine.core.FastEngine`) holds it as ``engine.requests``. The parts are handed it, or
the arrays they read; the scheduler and the lazy decoders also take the arrays under the same names on
themselves (:meth:`RequestState.share_with`: ``scheduler.tok is requests.tok``): the arrays are shared, never
copied, so every name sees every write. Code outside the engine reads them here (``engine.requests.tok``).
The two counters (``num_running``, ``next_admission_seq``) are read and written here only
(``engine.num_running`` is a read-only view).
"""

from __future__ import annotations

import numpy as np

from simulator.engine.scheduler import FcfsQueue, waiting_queue


class RequestState:
    """Every request's state, shape (n,) each, and the two queues.

    Attributes
    ----------
    final_len : ndarray of int64
        Prompt + output tokens when done.  # tokens
    tok : ndarray of int64
        Prompt + output tokens received so far.  # tokens
    comp : ndarray of int64
        Computed tokens, those in flight included.  # tokens
    placeholders : ndarray of int64
        Async scheduling's output placeholders (tokens scheduled whose output is not back).  # tokens
    inflight : ndarray of int64
        Scheduled tokens whose step's output is pending (async).  # tokens
    stale : ndarray of int64
        In-flight tokens of a preempted request still to drain (async).  # tokens
    status : ndarray of int64
        ``WAITING``, ``RUNNING``, ``PREEMPTED``, ``FINISHED`` or ``DROPPED``
        (:mod:`simulator.engine.scheduler`).
    held : ndarray of int64
        KV blocks held.  # blocks
    ncached : ndarray of int64
        Leading held blocks published to the prefix cache.  # blocks
    npre : ndarray of int64
        Times preempted.
    tiered : ndarray of bool
        Let its blocks go while waiting, to hit them again (preempted, or tier loads let go).
    first_sched, first_token, finish : ndarray of int64
        Engine step of the first admission, the first token, the last token (-1: not yet).  # steps
    first_token_t, finish_t : ndarray of float64
        Clock at the end of the first token's and the last token's step (NaN: not yet).  # s
    hit_first : ndarray of int64
        Prefix-cache hit at the first admission (-1: not admitted).  # tokens
    gone : ndarray of bool
        Finished (used to drop finished requests from the running order in one pass).
    admission_seq : list of int
        Each request's admission sequence number (its place in the running order).
    run : ndarray of int64, shape (min(max_num_seqs, n) + 1,)
        The running queue: request indices in running order (the first ``num_running``).
    num_running : int
        Requests in the running queue.
    next_admission_seq : int
        The admission sequence number the next admitted request gets.
    waiting : FcfsQueue
        The waiting queue, in the scheduling policy's order (:func:`simulator.engine.scheduler.waiting_queue`).
    """

    #: The attributes the scheduler and the lazy decoders also read on themselves, under these names.
    SHARED = ("final_len", "tok", "comp", "placeholders", "inflight", "stale", "status", "held", "ncached", "npre",
              "tiered", "first_sched", "first_token", "finish", "first_token_t", "finish_t", "hit_first", "gone",
              "admission_seq", "run", "waiting")

    __slots__ = SHARED + ("num_running", "next_admission_seq")

    def __init__(self, workload, max_num_seqs: int, policy: str) -> None:
        n = workload.n
        z = lambda: np.zeros(n, np.int64)  # noqa: E731
        self.final_len = workload.prompt_len + workload.output_len
        self.tok = workload.prompt_len.copy()
        self.comp = z()
        self.placeholders = z()
        self.inflight = z()
        self.stale = z()
        self.status = z()
        self.held = z()
        self.ncached = z()
        self.npre = z()
        self.tiered = np.zeros(n, bool)
        self.first_sched = np.full(n, -1, np.int64)
        self.first_token = np.full(n, -1, np.int64)
        self.finish = np.full(n, -1, np.int64)
        self.first_token_t = np.full(n, np.nan)
        self.finish_t = np.full(n, np.nan)
        self.hit_first = np.full(n, -1, np.int64)
        self.gone = np.zeros(n, bool)
        self.admission_seq = [0] * n
        self.run = np.zeros(max(min(max_num_seqs, n), 1) + 1, np.int64)
        self.waiting: FcfsQueue = waiting_queue(policy, workload)
        self.num_running = 0
        self.next_admission_seq = 0

    def share_with(self, part) -> None:
        """Give ``part`` (the scheduler, the lazy decoders) the same arrays and queues under the same
        names (:data:`SHARED`)."""
        for name in self.SHARED:
            setattr(part, name, getattr(self, name))


__all__ = ["RequestState"]
