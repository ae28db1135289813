"""axe-core comes from the npm package pinned in tests/browser/package-lock.json: ``python3 dev.py test`` (and so
``.ci/run``) installs it with ``npm ci`` when it is missing or another version; without it the accessibility
checks skip, and fail instead under ``KVP_REQUIRE_REAL_PARTS=1`` (CI)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import axe

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_axe_is_the_locked_version():
    lock = json.loads((ROOT / "tests/browser/package-lock.json").read_text())
    locked = lock["packages"]["node_modules/axe-core"]["version"]
    assert json.loads((ROOT / "tests/browser/package.json").read_text())["dependencies"]["axe-core"] == locked
    installed = ROOT / "tests/browser/node_modules/axe-core/package.json"
    if not installed.exists():
        axe.axe_source()  # skips here, fails in CI
    assert json.loads(installed.read_text())["version"] == locked


@pytest.mark.parametrize("required", ["1", ""])
def test_missing_axe_fails_when_real_parts_are_required(monkeypatch, tmp_path, required):
    monkeypatch.setattr(axe, "AXE_JS", tmp_path / "axe.min.js")
    monkeypatch.setenv("KVP_REQUIRE_REAL_PARTS", required)
    outcome = pytest.fail.Exception if required else pytest.skip.Exception
    with pytest.raises(outcome, match="axe-core is not installed"):
        axe.axe_source()


def test_dev_py_test_runs_npm_ci_only_when_the_locked_axe_is_missing(monkeypatch, tmp_path):
    sys.path.insert(0, str(ROOT))
    import dev

    browser = tmp_path / "browser"
    browser.mkdir()
    (browser / "package-lock.json").write_text(json.dumps(
        {"packages": {"": {}, "node_modules/axe-core": {"version": "9.9.9"}}}))
    monkeypatch.setattr(dev, "BROWSER_JS", browser)
    ran = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: ran.append((cmd, kw["cwd"])))
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/npm" if name == "npm" else None)
    dev.ensure_browser_js()
    assert ran == [(["/usr/bin/npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], browser)]
    (browser / "node_modules/axe-core").mkdir(parents=True)
    (browser / "node_modules/axe-core/package.json").write_text(json.dumps({"version": "9.9.9"}))
    dev.ensure_browser_js()
    assert len(ran) == 1, "the locked version is there: nothing to install"
