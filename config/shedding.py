"""Load shedding: past a queue of waiting connections, answer 503 at once instead of making everyone wait.

gunicorn's sync workers serve one request each; when every worker is busy, new connections wait in the
kernel's accept queue of the listening socket, ``/healthz`` among them, in arrival order. Under a flood
(issue 37: 128 clients, each its own user, looping over the API) that queue held about 125 connections,
and each waited ``depth x (mean service time) / workers``, about 8 s on the project's 2-core VM: past the
compose health check's 5 s timeout, though no client broke a rate limit.

:class:`LoadSheddingMiddleware`, in ``MIDDLEWARE`` right after ``SecurityMiddleware`` (so that a 503 carries
the security headers, and nothing else runs before it), reads that queue's length from the kernel
(``getsockopt(TCP_INFO)`` on the listening socket: ``tcpi_unacked`` is the accept queue of a socket in
LISTEN state, Linux), and estimates the wait of a new connection as ``waiting x
(time per request) / KVP_WEB_WORKERS`` (``KVP_WEB_WORKERS``, default 3, gunicorn's ``--workers``; the time
per request, served or shed, a moving average of what this worker took from the start of one request to the
start of the next while connections were waiting at both: all of a request's cost, gunicorn's part and the
CPU other processes took included). Within ``KVP_SHED_WAIT_S`` (default 1 s, well inside the compose health
check's 5 s; 0 turns shedding off), or with at most two connections waiting per worker, every request is
served. Past it, only the share that brings the estimate back to the target is served
(:func:`admitted_share`, spread evenly) and the others are answered at once ``503`` with ``Retry-After:
KVP_SHED_RETRY_AFTER_S`` (default 2) and, under ``/api/``, the API's error shape ``{"errors":
{"non_field_errors": [...]}}`` (a short HTML page elsewhere). A shed request costs a few milliseconds
instead of a full one, so the queue moves, ``/healthz`` waits about ``KVP_SHED_WAIT_S`` at most, and the
workers still serve about as many requests as they can (shedding everything past a queue length would starve
the clients that do not back off: each sees the same long queue). ``/healthz`` and ``/static/`` are never
shed (the health check must see the truth: the database answers). The arithmetic with measured figures is in
docs/operations.md, "Load test".

Where no listening TCP socket is in the process (the Django test client, a Unix socket, not Linux) the
queue reads as 0 and nothing is shed. The sockets are found once per process (after gunicorn's fork):
the inherited file descriptors that are TCP sockets in LISTEN state.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import struct
import threading
import time

from django.conf import settings
from django.http import HttpResponse

logger = logging.getLogger(__name__)

#: Offset of ``tcpi_unacked`` in Linux's ``struct tcp_info`` (8 one-byte fields, then rto, ato, snd_mss,
#: rcv_mss as 32-bit words): for a listening socket, the connections waiting in its accept queue.
_UNACKED_OFFSET = 24
_TCP_INFO_LEN = 104
NEVER_SHED = ("/healthz", "/static/")
#: Connections waiting per worker that are always served, whatever the estimate (see :func:`admitted_share`).
SERVED_QUEUE_PER_WORKER = 2

_found: tuple[int, list[socket.socket]] | None = None  # (pid, listening sockets) of this process
_lock = threading.Lock()
_last_log = [0.0]  # one warning a second at most: a flood sheds hundreds a second


def listening_sockets() -> list[socket.socket]:
    """The TCP sockets of this process in LISTEN state (duplicated descriptors), found once per process."""
    global _found
    pid = os.getpid()
    if _found is not None and _found[0] == pid:
        return _found[1]
    with _lock:
        if _found is not None and _found[0] == pid:
            return _found[1]
        found: list[socket.socket] = []
        try:
            fds = [int(n) for n in os.listdir("/proc/self/fd")]
        except OSError:  # not Linux
            fds = []
        seen: set[int] = set()  # socket inodes: descriptors duplicated from one socket count once
        for fd in fds:
            try:
                st = os.fstat(fd)
                if not stat.S_ISSOCK(st.st_mode) or st.st_ino in seen:
                    continue
                seen.add(st.st_ino)
                sock = socket.socket(fileno=os.dup(fd))
            except OSError:
                continue
            try:
                listening = (sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM
                             and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
            except OSError:
                listening = False
            if listening:
                found.append(sock)
            else:
                sock.close()
        _found = (pid, found)
        return found


def accept_queue(sock: socket.socket) -> int:
    """Connections waiting in the accept queue of a listening TCP socket (0 where the kernel does not say)."""
    tcp_info = getattr(socket, "TCP_INFO", None)
    if tcp_info is None:
        return 0
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, tcp_info, _TCP_INFO_LEN)
    except OSError:
        return 0
    return struct.unpack_from("I", info, _UNACKED_OFFSET)[0] if len(info) >= _UNACKED_OFFSET + 4 else 0


def waiting_connections() -> int:
    """Connections waiting for a web worker, over this process's listening sockets."""
    return sum(accept_queue(s) for s in listening_sockets())


def shed_response(path: str, waiting: int) -> HttpResponse:
    retry = int(getattr(settings, "KVP_SHED_RETRY_AFTER_S", 2))
    message = (f"The service is busy ({waiting} requests are waiting for a web worker); try again in "
               f"{retry} s.")
    if path.startswith("/api/") or path == "/api":
        response = HttpResponse(json.dumps({"errors": {"non_field_errors": [message]}}), status=503,
                                content_type="application/json")
    else:
        response = HttpResponse(f"<!doctype html><title>Busy</title><h1>Busy</h1><p>{message}</p>", status=503,
                                content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(retry)
    return response


def admitted_share(waiting: int, served_s: float, shed_s: float, workers: int, target_s: float) -> float:
    """The share of requests to serve so that a new connection waits about ``target_s`` at most.

    ``waiting`` connections ahead, each taking a worker ``served_s`` when served and ``shed_s`` when shed,
    on ``workers`` workers, make a new one wait ``waiting x (f x served_s + (1 - f) x shed_s) / workers``
    when a share ``f`` is served: every request (1.0) while that is within the target at ``f = 1``, else the
    ``f`` that brings it back to the target (0.0 when even shedding every one waits longer). A queue of at
    most two requests per worker is always served (:data:`SERVED_QUEUE_PER_WORKER`): a burst from a few
    clients at once, or a fuzzer running a few threads, is never shed for one slow request's estimate.
    """
    if waiting <= SERVED_QUEUE_PER_WORKER * max(1, workers):
        return 1.0
    per_request = target_s * max(1, workers) / waiting  # the time a worker may spend on each waiting one
    if per_request >= served_s:
        return 1.0
    if per_request <= shed_s or served_s <= shed_s:
        return 0.0
    return (per_request - shed_s) / (served_s - shed_s)


class LoadSheddingMiddleware:
    """Serve a share of the requests and answer the others 503 when the queue's wait passes
    ``KVP_SHED_WAIT_S`` (see the module docstring)."""

    #: First guesses of a worker's time per request (s), served and shed, before this process measured any.
    FIRST_SERVED_S, FIRST_SHED_S = 0.1, 0.005
    #: Weight of the newest request in the moving averages.
    ALPHA = 0.1

    def __init__(self, get_response):
        self.get_response = get_response
        self.cost = {"served": self.FIRST_SERVED_S, "shed": self.FIRST_SHED_S, "exempt": self.FIRST_SHED_S}
        self.last: tuple[float, str, int] | None = None  # (start, kind, waiting) of this process's last request
        self.credit = 0.0  # shares of requests earned and not yet served (spreads the served ones evenly)
        self.lock = threading.Lock()

    def _measure(self, now: float, waiting: int, outcome: str) -> None:
        """The time since the last request began is what that one cost this worker, all of it (gunicorn's
        parsing and writing, the CPU other processes took), when connections were waiting at its start and
        at this one's: the worker went from one to the next without sitting idle (an idle gap counted
        would make the first burst after a quiet hour look like an hour's work a request)."""
        with self.lock:
            if self.last is not None and waiting > 0 and self.last[2] > 0:
                began, kind, _ = self.last
                self.cost[kind] += self.ALPHA * (now - began - self.cost[kind])
            self.last = (now, outcome, waiting)

    def __call__(self, request):
        target = float(getattr(settings, "KVP_SHED_WAIT_S", 0) or 0)
        if target <= 0:
            return self.get_response(request)
        now, waiting = time.perf_counter(), waiting_connections()
        exempt = request.path.startswith(NEVER_SHED)
        share = 1.0
        if not exempt:
            share = admitted_share(waiting, self.cost["served"], self.cost["shed"],
                                   int(getattr(settings, "KVP_WEB_WORKERS", 3)), target)
        serve = share >= 1.0
        if not serve:
            with self.lock:
                self.credit += share
                serve = self.credit >= 1.0
                if serve:
                    self.credit -= 1.0
        self._measure(now, waiting, "exempt" if exempt else "served" if serve else "shed")
        if serve:
            return self.get_response(request)
        if now - _last_log[0] >= 1.0:
            _last_log[0] = now
            logger.warning("shedding load: %d connections waiting for a web worker; serving %.0f%% of requests "
                           "(%.3f s each, %.3f s shed; KVP_SHED_WAIT_S %.1f)", waiting, share * 100,
                           self.cost["served"], self.cost["shed"], target)
        return shed_response(request.path, waiting)
