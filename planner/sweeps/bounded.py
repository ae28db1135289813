"""Run a simulation made inside a web request in a child process, under a wall clock and a memory limit.

``/api/simulations/``, ``/api/replicas/``, ``/replicas/``, ``/api/calibrations/``
and ``/calibrations/`` simulate while the request waits when the run is priced within ``KVP_INLINE_MAX_SECONDS``
(dearer runs go to the workers, :mod:`planner.runs`). They are priced first (:mod:`planner.sweeps.pricing`), but a
price is an estimate; so the simulation itself runs in a forked child process
that the web process kills after ``KVP_SYNC_HARD_SECONDS`` (well inside
gunicorn's 60 s worker timeout) and whose address space is capped at
``KVP_WORKER_MAX_BYTES`` (an allocation past it is a ``MemoryError`` in the
child, never the host's out-of-memory killer). Either way the caller gets
:class:`simulator.batch.budget.OverBudget` with the limit in its message, the one input error, which the
API answers as a 400 and a page attaches to its form.

The child touches no database connection and leaves through ``os._exit`` (what
``multiprocessing`` does after a forked target), so the parent's connections are
untouched. Where ``fork`` is not available the function runs in the process.

A web worker killed while it waits (gunicorn's SIGKILL past its timeout, the out-of-memory killer) leaves no
child behind: on Linux the child asks the kernel, right after the fork, to SIGKILL it when its parent dies
(``prctl(PR_SET_PDEATHSIG, SIGKILL)``), then checks that the parent is still the one that forked it (a parent
that died before the ``prctl`` would never signal). The signal follows the parent *thread* that forked the
child; gunicorn's sync and gthread workers serve a request on a thread that outlives it.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import pickle
import signal
import sys
from collections.abc import Callable
from typing import Any

from django.conf import settings

from simulator.batch import OverBudget, format_bytes

logger = logging.getLogger(__name__)


def hard_seconds() -> float:
    return float(getattr(settings, "KVP_SYNC_HARD_SECONDS", 20))


def max_bytes() -> int:
    return int(getattr(settings, "KVP_WORKER_MAX_BYTES", 0) or 0)


#: ``prctl`` option: the signal the kernel sends this process when its parent dies (``<linux/prctl.h>``).
PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> bool:
    """In a forked child: be SIGKILLed when the parent dies (Linux), and leave now if it already has; True
    when the kernel took the request."""
    armed = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):  # no libc or no prctl: the parent's wall clock still stops it
            armed = False
    if os.getppid() != parent_pid:  # the parent died before the prctl: nobody waits for the answer
        os._exit(1)
    return armed


def _child(conn, fn: Callable[..., Any], args: tuple, limit: int, parent_pid: int) -> None:
    die_with_parent(parent_pid)
    if limit > 0:
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    try:
        out: tuple = ("ok", fn(*args))
    except MemoryError:
        out = ("memory", None)
    except Exception as exc:  # noqa: BLE001 - handed to the parent, which raises it
        out = ("error", exc)
    try:
        conn.send(out)
    except (pickle.PicklingError, TypeError, AttributeError):
        conn.send(("error", RuntimeError(str(out[1]))))
    conn.close()


#: What a refusal past the wall clock advises, unless the caller says otherwise.
ADVICE = "use fewer or shorter requests, or create a sweep at /api/sweeps/ (it runs on workers)"


def run_bounded(fn: Callable[..., Any], *args: Any, what: str, field: str | None = "workload",
                advice: str = ADVICE) -> Any:
    """``fn(*args)`` in a child process; raises :class:`OverBudget` (at ``field``; None: the input as a whole)
    past the wall clock or the memory limit.

    Exceptions ``fn`` raises are raised again here (so callers keep their handlers). ``advice`` ends the
    refusal past the wall clock.
    """
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:  # no fork on this platform
        return fn(*args)
    seconds, limit = hard_seconds(), max_bytes()
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(sender, fn, args, limit, os.getpid()),
                       daemon=True)
    proc.start()
    sender.close()
    try:
        if not receiver.poll(seconds):
            raise OverBudget(f"{what} took longer than {seconds:g} s, the limit for a run inside a web request, and "
                             f"was stopped; {advice}", field=field)
        try:
            kind, value = receiver.recv()
        except EOFError:
            raise OverBudget(f"{what} stopped without an answer (it may have run out of memory); use fewer or "
                             "shorter requests", field=field) from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=5)
        receiver.close()
    if kind == "memory":
        raise OverBudget(f"{what} ran out of memory (the limit is {format_bytes(limit)}); use fewer or shorter "
                         "requests or fewer KV blocks", field=field)
    if kind == "error":
        raise value
    return value
