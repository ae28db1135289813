#!/usr/bin/env python3
"""KV Planner's development commands, needing nothing but Python 3.11+.

    python3 dev.py run [--port 8000]  # venv + locked dependencies + migrations + catalog, then web and a worker
    python3 dev.py test [ARGS]        # venv + locked dev dependencies, then the whole test suite (pytest)
    python3 dev.py lock [--check]     # regenerate the requirements*.lock files (hashes), or check them

``run`` writes ``local.env`` once (DEBUG=true and a generated SECRET_KEY); the settings read it, so
``.venv/bin/python manage.py ...`` works in any shell afterwards. Ctrl+C or SIGTERM stops the web
server and the worker. Extra arguments after ``test`` go to pytest (``python3 dev.py test -k sizing``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
LOCAL_ENV = ROOT / "local.env"
#: Lock file -> the requirements file it pins (``python3 dev.py lock`` writes them all).
LOCKS = {"requirements.lock": "requirements.txt", "requirements-dev.lock": "requirements-dev.txt",
         "requirements-uv.lock": "requirements-uv.txt"}
#: The installer's own lock: pip installs it (hashes checked), then uv installs the others.
UV_LOCK = "requirements-uv.lock"
INPUTS_LINE = "# inputs-sha256: "


# --------------------------------------------------------------------------- installing


def inputs_digest() -> str:
    """The digest of the requirements files, recorded in each lock file."""
    digest = hashlib.sha256()
    for name in sorted(set(LOCKS.values())):
        digest.update(name.encode() + b"\0" + (ROOT / name).read_bytes())
    return digest.hexdigest()


def ensure_venv(lock: str) -> None:
    """Create ``.venv`` and install ``lock`` (hashes required) when missing or changed."""
    stamp = VENV / f".installed-{lock}"
    want = hashlib.sha256((ROOT / lock).read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == want and PY.exists():
        return
    if not PY.exists():
        print(f"creating the virtual environment in {VENV.name}/", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print(f"installing {lock} into {VENV.name}/ (the first time takes about a minute)", flush=True)
    if uv_ready():
        subprocess.run([str(BIN / "uv"), "pip", "install", "--python", str(PY), "--require-hashes",
                        "--compile-bytecode", "-r", str(ROOT / lock)], check=True)
    else:
        pip_install(lock)
    stamp.write_text(want)


def pip_install(lock: str) -> None:
    subprocess.run([str(PY), "-m", "pip", "install", "--require-hashes", "--progress-bar", "on",
                    "-r", str(ROOT / lock)], check=True)


def uv_ready() -> bool:
    """Install uv from its lock with pip, once; False (pip installs everything) where uv cannot be had."""
    if (BIN / "uv").exists():
        return True
    try:
        pip_install(UV_LOCK)
    except subprocess.CalledProcessError:
        print("uv could not be installed: pip installs the lock instead (slower)", file=sys.stderr, flush=True)
        return False
    return (BIN / "uv").exists()


def lock(check: bool) -> int:
    """Regenerate the lock files with pip-compile (hashes), or check that they are current."""
    if check:
        return check_locks()
    ensure_tool("piptools", "pip-tools>=7.4,<8")
    digest = inputs_digest()
    for out, source in LOCKS.items():
        extra = ["--constraint", "requirements.lock"] if out != "requirements.lock" else []
        cmd = [str(PY), "-m", "piptools", "compile", "--quiet", "--generate-hashes", "--allow-unsafe",
               "--strip-extras", "--no-emit-index-url", "--no-emit-find-links", "--no-emit-trusted-host",
               "--output-file", out, *extra, source]
        subprocess.run(cmd, check=True, cwd=ROOT, env={**os.environ, "CUSTOM_COMPILE_COMMAND": "python3 dev.py lock"})
        text = (ROOT / out).read_text()
        text = "".join(line for line in text.splitlines(True) if not line.startswith(INPUTS_LINE))
        (ROOT / out).write_text(f"{INPUTS_LINE}{digest}\n{text}")
        print(f"wrote {out}", flush=True)
    return 0


def check_locks() -> int:
    """0 when each lock file records the current requirements and pins every package they name."""
    digest, problems = inputs_digest(), []
    for out, source in LOCKS.items():
        path = ROOT / out
        text = path.read_text() if path.exists() else ""
        if f"{INPUTS_LINE}{digest}" not in text:
            problems.append(f"{out} was not made from the current {', '.join(sorted(set(LOCKS.values())))}")
        pinned = {_norm(m) for m in re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", text, re.M)}
        missing = sorted(n for n in _named(source) if n not in pinned)
        if missing:
            problems.append(f"{out} pins no version of {', '.join(missing)}")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        print("the lock is stale: run 'python3 dev.py lock' and commit the lock files", file=sys.stderr)
        return 1
    print("lock files are current", flush=True)
    return 0


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _named(source: str) -> set[str]:
    """Package names a requirements file asks for (following ``-r``)."""
    names: set[str] = set()
    for line in (ROOT / source).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            names |= _named(line[3:].strip())
        elif line and not line.startswith("-"):
            names.add(_norm(re.split(r"[\[<>=!~;\s]", line, maxsplit=1)[0]))
    return names


def ensure_tool(module: str, requirement: str) -> None:
    if not PY.exists():
        ensure_venv("requirements-dev.lock")
    found = subprocess.run([str(PY), "-c", f"import {module}"], capture_output=True).returncode == 0
    if not found:
        subprocess.run([str(PY), "-m", "pip", "install", requirement], check=True)


# --------------------------------------------------------------------------- run


def write_local_env(path: Path | None = None) -> bool:
    """Write the local development settings once (a generated secret key); False when already there."""
    path = path or Path(os.environ.get("KVP_ENV_FILE") or LOCAL_ENV)
    if path.exists():
        return False
    path.write_text(
        "# Local development settings, written once by 'python3 dev.py run'; read by config/settings.py.\n"
        "# Not for production (never committed, never in the image): production sets its own SECRET_KEY.\n"
        "DEBUG=true\n"
        f"SECRET_KEY={secrets.token_urlsafe(50)}\n"
    )
    path.chmod(0o600)
    return True


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex((host, port)) != 0


def _stop(child: subprocess.Popen, name: str, grace_s: float, group: bool = True) -> None:
    """SIGTERM ``child``'s whole process group (runserver's reloader), or only ``child`` when ``group`` is False
    (celery's main process, which stops its own pool: a pool process sent SIGTERM too dies under it, and the
    main process's warm shutdown then waited out the whole grace), then SIGKILL what is left of the group."""
    if child.poll() is not None:
        return
    try:
        if group:
            os.killpg(child.pid, signal.SIGTERM)
        else:
            child.send_signal(signal.SIGTERM)
        child.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        print(f"{name} did not stop within {grace_s:g} s: killing it", file=sys.stderr, flush=True)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    except ProcessLookupError:
        pass
    try:  # children that outlived their leader
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run(port: int, install: bool) -> int:
    if install:
        ensure_venv("requirements.lock")
    if write_local_env():
        print("wrote local.env (DEBUG=true, a generated SECRET_KEY): manage.py reads it in any shell", flush=True)
    if not port_is_free(port):
        print(f"error: port {port} is in use (another 'dev.py run'?); try --port {port + 1}", file=sys.stderr)
        return 1
    subprocess.run([str(PY), str(ROOT / "manage.py"), "migrate", "--no-input"], check=True, cwd=ROOT)
    # Each child leads its own process group, so stopping it stops what it started too.
    worker = subprocess.Popen(
        [str(BIN / "celery"), "-A", "config", "worker", "--loglevel", "INFO", "--concurrency", "2"],
        cwd=ROOT, start_new_session=True,
    )
    web = subprocess.Popen(
        [str(PY), str(ROOT / "manage.py"), "runserver", f"127.0.0.1:{port}"], cwd=ROOT, start_new_session=True
    )

    def on_sigterm(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        print(f"KV Planner at http://127.0.0.1:{port} (web pid {web.pid}, worker pid {worker.pid}); "
              "Ctrl+C stops both", flush=True)
        return web.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("stopping the web server and the worker ...", flush=True)
        _stop(web, "the web server", grace_s=10)
        _stop(worker, "the worker", grace_s=30, group=False)


# --------------------------------------------------------------------------- test


#: Both cores: each xdist worker has its own test database, live server, browser and Redis key prefix
#: (``tests/conftest.py``), so the tests spread over both; a docs page's blocks stay together on one (a group).
PARALLEL = ["-n", "2", "--dist", "loadgroup"]


#: What the browser tests inject into pages (axe-core), pinned by tests/browser/package-lock.json.
BROWSER_JS = ROOT / "tests" / "browser"


def ensure_browser_js() -> None:
    """Install tests/browser's npm packages (axe-core) with ``npm ci`` when missing or not the locked version.

    Without npm nothing is installed: the accessibility checks then skip, or fail under
    ``KVP_REQUIRE_REAL_PARTS=1`` (CI), saying how to install it.
    """
    import json
    import shutil

    lock = json.loads((BROWSER_JS / "package-lock.json").read_text())
    wanted = {name.removeprefix("node_modules/"): meta["version"]
              for name, meta in lock.get("packages", {}).items() if name.startswith("node_modules/")}
    have = {}
    for name in wanted:
        installed = BROWSER_JS / "node_modules" / name / "package.json"
        if installed.exists():
            have[name] = json.loads(installed.read_text()).get("version")
    if have == wanted:
        return
    npm = shutil.which("npm")
    if npm is None:
        print("note: npm not found, so axe-core (tests/browser/package.json) is not installed: the accessibility "
              "checks will skip", file=sys.stderr, flush=True)
        return
    print("installing tests/browser's npm packages (axe-core) with npm ci", flush=True)
    subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=BROWSER_JS, check=True)


def test(args: list[str]) -> int:
    ensure_venv("requirements-dev.lock")
    ensure_browser_js()
    serial = any(a == "-n" or a.startswith(("-n", "--numprocesses")) or a == "no:xdist" for a in args)
    # The browser tests write no screenshots unless KVP_SCREENSHOTS=1 (docs/browser-tests.md has the command).
    code = subprocess.call([str(PY), "-m", "pytest", *([] if serial else PARALLEL), *args], cwd=ROOT)
    if code == 5:
        print("error: no tests were collected", file=sys.stderr)
        return 1
    return code


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"run", "test", "lock"}:
        print(__doc__)
        return 2
    if argv[0] == "test":
        return test(argv[1:])
    parser = argparse.ArgumentParser(prog=f"dev.py {argv[0]}")
    if argv[0] == "run":
        parser.add_argument("--port", type=int, default=8000, help="web server port (default: 8000)")
        parser.add_argument("--no-install", action="store_true", help="use .venv as it is (no pip)")
        opts = parser.parse_args(argv[1:])
        return run(opts.port, install=not opts.no_install)
    parser.add_argument("--check", action="store_true", help="only check that the lock files are current")
    return lock(parser.parse_args(argv[1:]).check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
