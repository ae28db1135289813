"""``python3 dev.py run`` serves, and SIGTERM (``kill %1``) stops the web server and the worker, freeing the port."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)  # each child leads its own process group
    except ProcessLookupError:
        return False
    return True


def _wait(predicate, timeout: float, what: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    pytest.fail(f"{what} (dev.py exit {proc.poll()}):\n{log.read_text(errors='replace')[-3000:]}")


def _serves(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def test_sigterm_stops_web_and_worker_and_frees_the_port(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "DATABASE_URL", "REDIS_URL"}}
    env.update(KVP_DATA_DIR=str(tmp_path / "var"), KVP_ENV_FILE=str(tmp_path / "local.env"), PYTHONUNBUFFERED="1")
    log = tmp_path / "dev.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "dev.py", "run", "--port", str(port), "--no-install"], cwd=ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait(lambda: _serves(port), 180, "the web server never answered /healthz", proc, log)
        text = log.read_text()
        assert "wrote local.env" in text and "SECRET_KEY=" in (tmp_path / "local.env").read_text()
        web, worker = (int(p) for p in re.search(r"web pid (\d+), worker pid (\d+)", text).groups())
        assert _alive(web) and _alive(worker)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
        # each child stopped on its own, within its grace (a worker sent SIGTERM with its pool hung for 30 s)
        assert "did not stop within" not in log.read_text(), log.read_text()[-3000:]
        assert not _alive(web) and not _alive(worker), "a child of dev.py run outlived it"
        assert not _serves(port)
        with socket.socket() as sock:  # as a new server would (TIME_WAIT leftovers are no holder)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))  # raises if a listener still holds the port
            sock.listen()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
