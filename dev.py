#!/usr/bin/env python3
"""KV Planner's two commands, needing nothing but Python 3.11+.

    python3 dev.py run    # venv + dependencies + migrations + catalog, then web (127.0.0.1:8000) and a worker
    python3 dev.py test   # venv + dev dependencies, then the whole test suite (pytest)

Extra arguments after ``test`` go to pytest (``python3 dev.py test -k sizing``).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"


def _requirements_digest(req: str) -> str:
    digest = hashlib.sha256()
    for name in sorted({req, "requirements.txt"}):
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()


def ensure_venv(req: str) -> None:
    """Create ``.venv`` and install ``req`` when missing or changed."""
    stamp = VENV / f".installed-{req}"
    want = _requirements_digest(req)
    if stamp.exists() and stamp.read_text() == want and PY.exists():
        return
    if not PY.exists():
        print(f"creating virtual environment in {VENV.name}/", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print(f"installing {req} (first run takes a few minutes)", flush=True)
    subprocess.run([str(PY), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(PY), "-m", "pip", "install", "-q", "-r", str(ROOT / req)], check=True)
    stamp.write_text(want)


def manage(*args: str, env: dict[str, str]) -> None:
    subprocess.run([str(PY), str(ROOT / "manage.py"), *args], check=True, env=env, cwd=ROOT)


def run() -> int:
    ensure_venv("requirements.txt")
    env = {**os.environ}
    env.setdefault("DEBUG", "true")
    manage("migrate", "--no-input", env=env)
    worker = subprocess.Popen(
        [str(BIN / "celery"), "-A", "config", "worker", "--loglevel", "INFO", "--concurrency", "2"],
        env=env,
        cwd=ROOT,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # run the clean-up below on SIGTERM too
    try:
        print(f"KV Planner at http://127.0.0.1:8000 (worker pid {worker.pid}); Ctrl+C stops both", flush=True)
        return subprocess.call([str(PY), str(ROOT / "manage.py"), "runserver", "127.0.0.1:8000"], env=env, cwd=ROOT)
    except KeyboardInterrupt:
        return 0
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()


def test(args: list[str]) -> int:
    ensure_venv("requirements-dev.txt")
    env = {**os.environ}
    code = subprocess.call([str(PY), "-m", "pytest", *args], env=env, cwd=ROOT)
    if code == 5:
        print("error: no tests were collected", file=sys.stderr)
        return 1
    return code


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"run", "test"}:
        print(__doc__)
        return 2
    if argv[0] == "run":
        return run()
    return test(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
