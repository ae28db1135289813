"""Load shedding (config/shedding.py): past ``KVP_SHED_WAIT_S`` of queue, a 503 with Retry-After, /healthz served.

128 clients looping over the API (each its own user, no limit broken) kept about 125 connections in the
listening socket's accept queue and made ``/healthz`` wait about 8 s, past the compose health check's 5 s.
The middleware reads that queue from the kernel and answers the share of requests it cannot serve in time
with a 503 at once. Here the queue is real: connections made to a real listening socket that nobody accepts
(in this process, for the test client), and to a real gunicorn whose only worker is held by an idle one.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from config import shedding

ROOT = Path(__file__).resolve().parent.parent


def test_the_share_served_brings_the_wait_back_to_the_target():
    # 30 waiting on 3 workers at 0.1 s each: 1 s of wait; within a 2 s target all are served.
    assert shedding.admitted_share(30, 0.1, 0.005, 3, 2.0) == 1.0
    # 120 waiting, 1 s target: 3 x 1 / 120 = 25 ms a request; (25 - 5) / (100 - 5) of them served.
    share = shedding.admitted_share(120, 0.1, 0.005, 3, 1.0)
    assert share == pytest.approx(0.02 / 0.095)
    assert 120 * (share * 0.1 + (1 - share) * 0.005) / 3 == pytest.approx(1.0)
    # Even shedding every one would wait longer: none served; nobody waiting: all served.
    assert shedding.admitted_share(10_000, 0.1, 0.005, 3, 1.0) == 0.0
    assert shedding.admitted_share(0, 30.0, 0.005, 3, 0.001) == 1.0
    # Two waiting per worker are always served (a burst, a fuzzer's few threads); one more is not.
    assert shedding.admitted_share(6, 30.0, 0.005, 3, 0.001) == 1.0
    assert shedding.admitted_share(7, 30.0, 0.005, 3, 0.001) == 0.0


def test_a_worker_times_requests_only_back_to_back():
    """The time from one request's start to the next is a request's cost only when connections waited at
    both: an idle hour before a burst is not an hour's work a request."""
    middleware = shedding.LoadSheddingMiddleware(lambda request: None)
    middleware._measure(0.0, 0, "served")  # noqa: SLF001
    middleware._measure(3600.0, 9, "served")  # noqa: SLF001 - idle before: nothing learnt
    assert middleware.cost["served"] == middleware.FIRST_SERVED_S
    middleware._measure(3600.5, 9, "shed")  # noqa: SLF001 - back to back: the served one took 0.5 s
    assert middleware.cost["served"] == pytest.approx(0.1 + 0.1 * (0.5 - 0.1))
    middleware._measure(3600.51, 8, "served")  # noqa: SLF001 - the shed one took 10 ms
    assert middleware.cost["shed"] == pytest.approx(0.005 + 0.1 * (0.01 - 0.005))


@pytest.fixture
def queued_connections():
    """A listening socket in this process with ``n`` connections waiting in its accept queue."""
    made: list[socket.socket] = []

    def make(n: int) -> socket.socket:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        made.append(listener)
        made.extend(socket.create_connection(listener.getsockname()) for _ in range(n))
        shedding._found = None  # noqa: SLF001 - the sockets are looked up again, this one among them
        return listener

    yield make
    for s in made:
        s.close()
    shedding._found = None  # noqa: SLF001


def test_the_kernel_queue_is_read(queued_connections):
    listener = queued_connections(5)
    assert shedding.waiting_connections() >= 5
    listener.accept()[0].close()
    assert shedding.waiting_connections() >= 4


@pytest.mark.django_db
def test_past_the_wait_requests_are_shed_with_retry_after_and_healthz_still_answers(queued_connections, settings):
    settings.KVP_SHED_WAIT_S, settings.KVP_WEB_WORKERS, settings.KVP_SHED_RETRY_AFTER_S = 0.001, 1, 3
    queued_connections(40)  # 40 x 0.1 s / 1 worker: 4 s of wait against 1 ms
    client = APIClient()
    response = client.post("/api/plan/", {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"}, format="json")
    assert response.status_code == 503
    assert response["Retry-After"] == "3"
    assert response["Content-Type"] == "application/json"
    assert response["X-Content-Type-Options"] == "nosniff"  # after SecurityMiddleware: its headers are there
    message = json.loads(response.content)["errors"]["non_field_errors"][0]
    assert "busy" in message and "try again in 3 s" in message
    page = client.get("/catalog/gpus/")
    assert page.status_code == 503 and page["Retry-After"] == "3" and b"Busy" in page.content
    health = client.get("/healthz")
    assert health.status_code == 200 and json.loads(health.content) == {"status": "ok"}


@pytest.mark.django_db
def test_within_the_wait_or_switched_off_nothing_is_shed(queued_connections, settings):
    queued_connections(40)
    settings.KVP_SHED_WAIT_S, settings.KVP_WEB_WORKERS = 0, 1  # switched off
    assert APIClient().get("/catalog/gpus/").status_code == 200
    settings.KVP_SHED_WAIT_S = 60.0  # 40 waiting at 0.1 s: 4 s, within a minute
    assert APIClient().get("/catalog/gpus/").status_code == 200


def _send(sock: socket.socket, method: str, path: str, body: bytes = b"") -> tuple[int, dict, bytes]:
    head = (f"{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    sock.sendall(head + body)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head_text, _, content = data.partition(b"\r\n\r\n")
    lines = head_text.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, content


def test_a_real_gunicorn_sheds_behind_a_held_worker_and_keeps_healthz(tmp_path):
    """One sync worker, held by a connection that has sent nothing; six more wait in the kernel's queue.
    The held one's request is shed (six waiting), /healthz on the next is served (five waiting), the next
    two are shed (four, three) and the last three served (two waiting per worker are always served)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(DEBUG="false", SECRET_KEY="shed-test-" + "x" * 50, ALLOWED_HOSTS="127.0.0.1",
               SECURE_SSL_REDIRECT="false", KVP_DATA_DIR=str(tmp_path), KVP_ENV_FILE=str(tmp_path / "none.env"),
               KVP_SHED_WAIT_S="0.001", KVP_WEB_WORKERS="1", KVP_SHED_RETRY_AFTER_S="2", LOG_LEVEL="WARNING")
    log = open(tmp_path / "gunicorn.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind",
                               f"127.0.0.1:{port}", "--workers", "1", "--timeout", "60"], cwd=ROOT, env=env,
                              stdout=log, stderr=log, start_new_session=True)
    conns: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        while True:  # up: /healthz answers (the worker has imported the app)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    if _send(s, "GET", "/healthz")[0] == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "gunicorn.log").read_text()[-2000:]
            time.sleep(0.3)
        held = socket.create_connection(("127.0.0.1", port), timeout=30)
        conns.append(held)
        time.sleep(0.5)  # the idle worker accepts it and waits for its request
        conns += [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(6)]
        time.sleep(0.2)
        status, headers, content = _send(held, "POST", "/api/plan/", b'{"model": "llama-3-1-8b"}')
        assert status == 503, content[:300]
        assert headers["retry-after"] == "2"
        assert "busy" in json.loads(content)["errors"]["non_field_errors"][0]
        status, _, content = _send(conns[1], "GET", "/healthz")  # the oldest waiting one is accepted next
        assert status == 200 and json.loads(content) == {"status": "ok"}
        # 4 and 3 waiting behind them: shed (a path the app answers 404 when it serves it: no database needed)
        assert [_send(sock, "GET", "/api/nothing-here/")[0] for sock in conns[2:4]] == [503, 503]
        for sock in conns[4:]:  # 2, 1 and 0 waiting behind them: two per worker are always served
            status, _, content = _send(sock, "GET", "/api/nothing-here/")
            assert status == 404 and "errors" in json.loads(content)
    finally:
        for s in conns:
            s.close()
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
