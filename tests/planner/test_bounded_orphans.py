"""Issue 37: a web worker killed while ``run_bounded`` waits leaves no child behind (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: A stand-in for a web worker: Django set up, then a bounded run whose function writes the child's pid and sleeps.
WEB_WORKER = """
import os, sys, time
import django
django.setup()
from planner.sweeps.bounded import run_bounded

def nap(path):
    with open(path + ".tmp", "w") as fh:
        fh.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    time.sleep(60)

run_bounded(nap, sys.argv[1], what="A nap")
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as gone: it runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_web_worker_leaves_no_child(tmp_path):
    pid_file = tmp_path / "child.pid"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "config.settings",
           "KVP_SYNC_HARD_SECONDS": "120"}
    web = subprocess.Popen([sys.executable, "-c", WEB_WORKER, str(pid_file)], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists():
            assert web.poll() is None, "the stand-in web worker ended before its child started"
            assert time.monotonic() < deadline, "the child never wrote its pid"
            time.sleep(0.05)
        child = int(pid_file.read_text())
        assert child != web.pid and _alive(child)
        web.send_signal(signal.SIGKILL)
        web.wait(timeout=10)
        killed = time.monotonic()
        while _alive(child) and time.monotonic() - killed < 2.0:
            time.sleep(0.02)
        assert not _alive(child), "the child outlived its killed parent"
    finally:
        if web.poll() is None:
            web.kill()
        if pid_file.exists() and _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
