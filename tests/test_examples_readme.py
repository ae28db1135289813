"""examples/README.md as a new user meets it (issue 33 item 10): its first block works on a fresh clone
(``dev.py run &`` creates the venv in the background, so the block waits for the app before it runs
``.venv/bin/python``, and an empty token fails loudly), and the sizing table it shows is what
``examples/plan_and_sweep.py`` prints today (it showed 28,291 KV blocks where the script printed 28,073).

The block needs a server, so the docs test only checks its syntax (``<!-- docs-test: server -->``); these
checks read it as written.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "examples" / "README.md"


def _blocks(lang: str) -> list[str]:
    """The README's fenced blocks of ``lang`` ("" for plain text), in order."""
    fenced = re.findall(r"^```(\w*)\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M)
    return [text for block_lang, text in fenced if block_lang == lang]


def test_the_first_block_waits_for_the_app_before_using_the_venv_and_checks_the_token():
    lines = [line.split("#")[0].strip() for line in _blocks("sh")[0].splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("python3 dev.py run") and line.endswith("&"))
    first_venv = next(i for i, line in enumerate(lines) if ".venv/bin/" in line)
    waits = [i for i, line in enumerate(lines) if "/healthz" in line and line.startswith("until ")]
    assert waits and start < waits[0] < first_venv, "wait for the app (and its venv) before .venv/bin/python"
    token = next(line for line in lines if "issue_token" in line)
    assert not token.startswith("export KVP_TOKEN=$("), "export hides a failed command: the token would be empty"
    assert "&& export KVP_TOKEN" in token


@pytest.mark.django_db
def test_the_sizing_table_shown_is_what_the_script_prints():
    from django.test import Client

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import plan_and_sweep
    finally:
        sys.path.remove(str(ROOT / "examples"))
    client = Client()

    class InProcessApi:  # plan_and_sweep.Api's post(), answered by the app in this process
        def post(self, path: str, body: dict | None = None) -> dict:
            response = client.post(path, body or {}, content_type="application/json")
            assert response.status_code == 200, response.content
            return response.json()

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        plan_and_sweep.size_deployments(InProcessApi())
    printed = [line for line in out.getvalue().splitlines() if line.strip()]
    shown = [line for line in _blocks("")[0].splitlines() if line.strip()][:len(printed)]
    assert shown == printed
