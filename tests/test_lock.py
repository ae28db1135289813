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
