"""The engine's named hook points: where a deployment's engines plug in without overriding the engine.

An :class:`EngineHooks` is handed to :class:`simulator.engine.core.FastEngine` (``hooks=``); the engine
calls it at the points below and nowhere else, each with what that point knows (no state is passed
through the engine's attributes from one call to the next). Without hooks (the default) the engine
makes none of these calls. :mod:`simulator.cluster.disaggregated`'s prefill and decode instances are
the users: one keeps a finished prefill's blocks until the decode side has read them, the other moves
a request's KV over a link before admitting it.

Hook points, in the order a schedule call meets them:

* :meth:`~EngineHooks.before_schedule`: a schedule call begins, before anything is scheduled (a
  decode jump's calls do not come here);
* :meth:`~EngineHooks.admission`: a waiting request at the head of admission, its GPU prefix hits
  found: admit it as vLLM would (:data:`ADMIT`), pass over it (:data:`WAIT`: it keeps its place,
  admission goes on behind it, as for a request loading from a tier) or stop admission there
  (:data:`STOP`: head of line);
* :meth:`~EngineHooks.admitted`: a request is admitted (its blocks allocated);
* :meth:`~EngineHooks.stalled`: nothing ran this call and only requests waiting for their blocks are
  left (tier loads, transfers);
* :meth:`~EngineHooks.scheduled`: the call's step is in the batch queue;
* :meth:`~EngineHooks.finished`: a step's output finished a request: the hook may keep its blocks;
* :meth:`~EngineHooks.idle`: the clock moved without a step (waiting for an arrival, for ``until``,
  for loads, or a hook's :meth:`FastEngine.idle_until`).

What a hook may call on the engine (its public interface for hooks): ``release(q)``,
``start_load(q, nh, hit, k, ready)``, ``let_loads_go()``, ``idle_until(t)``; what it may read:
``clock``, ``schedule_calls``, ``num_running``, ``requests`` (``requests.waiting`` and the other per-request
arrays), ``loads.loading``, ``pool`` (``num_free``, ``num_free_of``), ``B``, ``watermark_blocks``.

Two flags say what a hook does that some accelerators (:mod:`simulator.engine.accelerators`) do not model:
``holds_finished_blocks`` (:meth:`~EngineHooks.finished` may keep blocks: the lazy decoders finish
requests outside the step's output, so they are off) and ``holds_blocks`` (blocks are held that are
neither a running request's nor free: admission's early "the whole prompt cannot fit" check is off).
"""

from __future__ import annotations

import numpy as np

#: :meth:`EngineHooks.admission` verdicts.
ADMIT, WAIT, STOP = 0, 1, 2


class EngineHooks:
    """Hook points of one engine; every method here does nothing (subclass and override those you need).

    Attributes
    ----------
    engine : FastEngine
        The engine these hooks belong to (set by :meth:`attach`, at its construction).
    holds_finished_blocks : bool
        :meth:`finished` may keep a finished request's blocks.
    holds_blocks : bool
        The hooks hold blocks that are neither a running request's nor free (a finished request's, a
        transfer's landing blocks).
    """

    holds_finished_blocks = False
    holds_blocks = False

    def attach(self, engine) -> None:
        """Called once, by the engine's constructor (the engine's state is then fully built)."""
        self.engine = engine

    def before_schedule(self) -> None:
        """A schedule call begins."""

    def admission(self, q: int, num_tokens: int, kept: int, nh: int, hit: np.ndarray | None) -> int:
        """Waiting request ``q`` (``num_tokens`` tokens) is next to admit, with ``nh`` GPU prefix-hit blocks
        (``hit``, or None) of which ``kept`` it already holds: :data:`ADMIT`, :data:`WAIT` or :data:`STOP`."""
        return ADMIT

    def admitted(self, q: int) -> None:
        """Request ``q`` is admitted (called before its blocks are allocated, at the engine's clock)."""

    def stalled(self, until) -> bool:
        """Nothing ran this schedule call and only requests waiting for their blocks are left; True when the
        hook dealt with it (the engine then does not wait for the first load)."""
        return False

    def scheduled(self, ids: np.ndarray, until) -> None:
        """The schedule call's step, requests ``ids`` (shape (k,); none: an empty step), is in the batch queue."""

    def finished(self, q: int, t_end: float) -> bool:
        """Request ``q`` finished with the step that ended at ``t_end`` (s); True when the hook keeps its
        blocks (it gives them back later with ``engine.release(q)``)."""
        return False

    def idle(self, seconds: float) -> None:
        """The clock moved ``seconds`` with no step."""  # s


__all__ = ["ADMIT", "STOP", "WAIT", "EngineHooks"]
