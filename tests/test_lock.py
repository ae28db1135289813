"""The lock files pin every requirement with hashes, and ``dev.py lock --check`` notices a stale lock."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import dev  # noqa: E402


def test_the_committed_locks_are_current_and_hashed(capsys):
    assert dev.check_locks() == 0, capsys.readouterr().err
    for lock in dev.LOCKS:
        pins = [line for line in (ROOT / lock).read_text().splitlines() if "==" in line and not line.startswith("#")]
        assert pins and all(line.endswith("\\") for line in pins), f"{lock}: a pin without --hash"


def test_an_edited_requirements_file_makes_the_lock_stale(tmp_path, monkeypatch, capsys):
    for name in [*dev.LOCKS, *dev.LOCKS.values()]:
        shutil.copy(ROOT / name, tmp_path / name)
    monkeypatch.setattr(dev, "ROOT", tmp_path)
    with open(tmp_path / "requirements.txt", "a") as fh:
        fh.write("rich>=13\n")
    assert dev.check_locks() == 1
    err = capsys.readouterr().err
    assert "pins no version of rich" in err and "python3 dev.py lock" in err


def _record_installs(monkeypatch, tmp_path, uv_installs: bool) -> list[list[str]]:
    """Point dev.py at an empty venv under ``tmp_path`` and record the install commands it runs."""
    import subprocess

    venv_dir = tmp_path / ".venv"
    (venv_dir / "bin").mkdir(parents=True)
    (venv_dir / "bin" / "python").write_text("")
    for name in [*dev.LOCKS, *dev.LOCKS.values()]:
        shutil.copy(ROOT / name, tmp_path / name)
    monkeypatch.setattr(dev, "ROOT", tmp_path)
    monkeypatch.setattr(dev, "VENV", venv_dir)
    monkeypatch.setattr(dev, "BIN", venv_dir / "bin")
    monkeypatch.setattr(dev, "PY", venv_dir / "bin" / "python")
    calls: list[list[str]] = []

    def fake_run(cmd, check=False, **kwargs):
        calls.append([str(c) for c in cmd])
        if dev.UV_LOCK in " ".join(calls[-1]):
            if not uv_installs:
                raise subprocess.CalledProcessError(1, cmd)
            (venv_dir / "bin" / "uv").write_text("")
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(dev.subprocess, "run", fake_run)
    return calls


def test_the_lock_is_installed_by_uv_which_pip_installs_from_its_own_hashed_lock(tmp_path, monkeypatch):
    calls = _record_installs(monkeypatch, tmp_path, uv_installs=True)
    dev.ensure_venv("requirements-dev.lock")
    assert calls[0][1:4] == ["-m", "pip", "install"] and "--require-hashes" in calls[0]
    assert calls[0][-1].endswith("requirements-uv.lock")
    assert calls[1][0].endswith("/uv") and calls[1][1:3] == ["pip", "install"]
    assert {"--require-hashes", "--compile-bytecode"} <= set(calls[1]) and calls[1][-1].endswith("requirements-dev.lock")
    dev.ensure_venv("requirements-dev.lock")  # installed and unchanged: nothing more runs
    assert len(calls) == 2


def test_without_uv_pip_installs_the_lock_with_its_hashes(tmp_path, monkeypatch, capsys):
    calls = _record_installs(monkeypatch, tmp_path, uv_installs=False)
    dev.ensure_venv("requirements.lock")
    assert "pip installs the lock instead" in capsys.readouterr().err
    assert calls[-1][1:4] == ["-m", "pip", "install"] and "--require-hashes" in calls[-1]
    assert calls[-1][-1].endswith("requirements.lock")
