"""Every command and JSON block the docs show works as written (README.md, docs/*.md, examples/README.md).

New pages under ``docs/`` are picked up without a change here. The conventions, for writers:

- A fenced ``sh``/``bash``/``shell``/``console`` block is run as one bash script (``set -euo pipefail``)
  from the repository root of a fresh sandbox, as a new user's new shell would after
  ``python3 dev.py run``: its own SQLite database (migrated, catalog loaded), its own ``local.env``,
  ``.venv/bin`` first on ``PATH`` (so ``python`` is the project's), no ``DATABASE_URL``/``REDIS_URL``.
  Keep such blocks quick (seconds): the whole suite has 5 minutes. A block made only of ``manage.py``
  lines (and ``VAR=$(… manage.py …)``) runs them as written in one Python process instead
  (``tests/docs_manage_batch.py``): each ``manage.py`` start costs about 2.5 s of CPU.
- ``<!-- docs-test: server -->`` on the line before a block: it needs a running server or worker
  (``python3 dev.py run``); ``<!-- docs-test: parse-only REASON -->``: it must not run here (it runs
  this suite, or takes minutes). Both are only checked: bash syntax, and every file they name under
  ``examples/``, ``docs/``, ``bench/`` ... exists.
- ``<!-- docs-test: full-budget REASON -->``: it runs as written, but only with the full test budget
  (``KVP_HYPOTHESIS_BUDGET=full``, as ``.ci/run`` sets), e.g. a load test that keeps both cores busy for
  half a minute; a quick local run (``python3 dev.py test``) only checks it like ``parse-only``.
- A fenced ``json`` block must parse (one document, or one document per line).
  ``<!-- docs-test: same as examples/NAME.json -->`` before it: it must equal that file.
- Inline commands (``python -m simulator SUB --opt ...``, ``manage.py CMD --opt``,
  ``python bench/NAME.py --opt``, ``dev.py CMD``) must name a real command, and every ``--option``
  they show must be one of its options.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "examples" / "README.md"]
SHELL_LANGS = {"sh", "bash", "shell", "console"}
MARKER = re.compile(r"<!--\s*docs-test:\s*(.*?)\s*-->")
FENCE = re.compile(r"^(\s*)```+\s*([\w+-]*)")
#: Roots of the repository paths a command may name (checked to exist).
REPO_DIRS = ("examples/", "docs/", "bench/", "simulator/", "tests/", "config/", "planner/", "gpuprofiles/")
BLOCK_TIMEOUT_S = 240


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    text: str
    marker: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    blocks, lines, i = [], path.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i])
            i += 1
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.search(prev)
        blocks.append(Block(path, start + 1, m.group(2).lower(), "\n".join(body) + "\n", marker.group(1) if marker else ""))
        i += 1
    return blocks


ALL_BLOCKS = [b for p in DOC_FILES if p.exists() for b in fenced_blocks(p)]
SHELL_BLOCKS = [b for b in ALL_BLOCKS if b.lang in SHELL_LANGS]
#: CI's full budget (tests/conftest.py): the blocks marked ``full-budget`` run too.
FULL_BUDGET = os.environ.get("KVP_HYPOTHESIS_BUDGET", "") == "full"
RUN_BLOCKS = [b for b in SHELL_BLOCKS if not b.marker.startswith(("server", "parse-only"))
              and (FULL_BUDGET or not b.marker.startswith("full-budget"))]
JSON_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "json"]


def _params(blocks: list[Block], group: bool = False):
    """One test per block; ``group``: the blocks of one page in one xdist group, so that they run in the page's
    order on one worker (a page's later block may use what an earlier one made), while pages spread over both."""
    return [pytest.param(b, id=b.id, marks=[pytest.mark.xdist_group(f"docs-{b.path.relative_to(ROOT)}")] * group)
            for b in blocks]


def test_the_docs_have_blocks_to_check():
    assert len(RUN_BLOCKS) >= 2 and len(JSON_BLOCKS) >= 3, [b.id for b in ALL_BLOCKS]


# --------------------------------------------------------------------------- JSON


@pytest.mark.parametrize("block", _params(JSON_BLOCKS))
def test_json_block_parses(block: Block):
    try:
        docs = [json.loads(block.text)]
    except json.JSONDecodeError:
        docs = []
        for n, line in enumerate(block.text.splitlines(), start=block.line + 1):
            if line.strip():
                try:
                    docs.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    pytest.fail(f"{block.path.name} line {n}: not JSON ({exc}); fence it as text if it is a sketch")
    same = re.match(r"same as (\S+)", block.marker)
    if same:
        assert docs == [json.loads((ROOT / same.group(1)).read_text())], f"{block.id} differs from {same.group(1)}"


# --------------------------------------------------------------------------- shell blocks


def _named_paths(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, "#"
    names = []
    for token in lexer:
        token = token.lstrip("@")
        if token.startswith(REPO_DIRS) or re.fullmatch(r"[\w./-]+\.py", token):
            names.append(token)
    return names


@pytest.mark.parametrize("block", _params(SHELL_BLOCKS))
def test_shell_block_is_valid_bash_naming_files_that_exist(block: Block):
    syntax = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True)
    assert syntax.returncode == 0, f"{block.id}: {syntax.stderr}"
    outputs = set(re.findall(r"(?:-o|--output|--out|--csv|>)\s+(\S+)", block.text))
    missing = [p for p in _named_paths(block.text) if p not in outputs and not (ROOT / p).exists()]
    assert not missing, f"{block.id} names files that do not exist: {missing}"


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A fresh checkout's view after ``dev.py run``: links to the sources, own data, own local.env (one per
    xdist worker: each migrates its own, and the pages' blocks run on either)."""
    home = tmp_path_factory.mktemp("newuser")
    for entry in ROOT.iterdir():
        if entry.name in {".git", ".venv", "var", "local.env", "examples", "staticfiles"}:
            continue
        (home / entry.name).symlink_to(entry)
    shutil.copytree(ROOT / "examples", home / "examples")
    (home / ".venv").symlink_to(Path(sys.prefix))
    sys.path.insert(0, str(ROOT))
    import dev

    dev.write_local_env(home / "local.env")
    drop = {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "SECURE_SSL_REDIRECT", "DATABASE_URL", "REDIS_URL",
            "DJANGO_SETTINGS_MODULE", "PYTEST_XDIST_WORKER", "VIRTUAL_ENV"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(KVP_DATA_DIR=str(home / "var"), KVP_ENV_FILE=str(home / "local.env"), KVP_URL="http://127.0.0.1:9",
               PATH=f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONDONTWRITEBYTECODE="1")
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "--no-input"], cwd=home, env=env,
                             capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    return home, env


#: One docs line that is only a ``manage.py`` command, or ``VAR=$(`` one ``)``, with an optional comment.
MANAGE_LINE = re.compile(r"^(?:(?P<var>[A-Za-z_]\w*)=\$\()?(?:\.venv/bin/)?python3? manage\.py (?P<words>[^#]*?)"
                         r"(?(var)\))\s*(?:#.*)?$")


def manage_lines(text: str) -> list[tuple[str, str]] | None:
    """``[(VAR, WORDS)]`` when every line of a block is a plain ``manage.py`` command (see MANAGE_LINE) whose
    words use no shell feature but ``$VAR``; else None (the block runs in bash)."""
    lines = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = MANAGE_LINE.match(line.strip())
        if not m or re.search(r"[|&;<>`\\]|\$\(", m.group("words")):
            return None
        lines.append((m.group("var") or "", m.group("words")))
    return lines


def test_manage_lines_are_read_as_written():
    block = ('python manage.py plan --model m --gpu g   # a comment\n'
             'X=$(.venv/bin/python manage.py sweep create s.json --inline)   # another\n'
             '.venv/bin/python manage.py sweep csv "$X" -o out.csv\n')
    assert manage_lines(block) == [("", "plan --model m --gpu g"), ("X", "sweep create s.json --inline"),
                                   ("", 'sweep csv "$X" -o out.csv')]
    assert manage_lines("python manage.py plan | head -1\n") is None
    assert manage_lines("python -m simulator run\n") is None


@pytest.mark.parametrize("block", _params(RUN_BLOCKS, group=True))
def test_shell_block_runs_in_a_new_shell(block: Block, sandbox):
    """Bash runs the block; a block of several ``manage.py`` lines only runs them, as written, one after
    another in one Python process (tests/docs_manage_batch.py), which saves about 2.5 CPU-s per line."""
    home, env = sandbox
    script = "set -euo pipefail\n" + block.text
    batch = manage_lines(block.text)
    if batch and len(batch) > 1:
        command, stdin = [str(home / ".venv" / "bin" / "python"), str(ROOT / "tests" / "docs_manage_batch.py")], \
            json.dumps(batch)
    else:
        command, stdin = ["bash", "-c", script], None
    try:
        done = subprocess.run(command, input=stdin, cwd=home, env=env, capture_output=True, text=True,
                              timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.id} ran over {BLOCK_TIMEOUT_S} s: mark it '<!-- docs-test: server -->' or shorten it")
    assert done.returncode == 0, f"{block.id} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr


# --------------------------------------------------------------------------- inline commands

INLINE = re.compile(r"`((?:\.venv/bin/)?python3? (?:-m simulator|manage\.py|bench/\w+\.py|dev\.py)[^`]*)`"
                    r"|`((?:\.venv/bin/python )?manage\.py [^`]*)`")


def inline_commands() -> list[tuple[str, str]]:
    found = []
    for path in DOC_FILES:
        for match in INLINE.finditer(path.read_text(encoding="utf-8")):
            found.append((f"{path.relative_to(ROOT)}", match.group(1) or match.group(2)))
    return sorted(set(found))


def _options_of(words: list[str]) -> tuple[str, set[str]]:
    """(what the command is, the options its parser knows), in process (no subprocess for help)."""
    if words[:2] == ["-m", "simulator"]:
        from simulator.cli.commands import build_parser

        sub = build_parser()._subparsers._group_actions[0].choices  # noqa: SLF001
        assert len(words) > 2 and words[2] in sub, f"no simulator command {words[2:3]}"
        return words[2], {o for a in sub[words[2]]._actions for o in a.option_strings}  # noqa: SLF001
    if words[0].endswith("manage.py"):
        from django.core.management import get_commands, load_command_class

        assert len(words) > 1 and words[1] in get_commands(), f"no manage.py command {words[1:2]}"
        parser = load_command_class(get_commands()[words[1]], words[1]).create_parser("manage.py", words[1])
        options = {o for a in parser._actions for o in a.option_strings}  # noqa: SLF001
        for action in parser._subparsers._group_actions if parser._subparsers else []:  # noqa: SLF001
            for sub in getattr(action, "choices", {}).values():
                options |= {o for a in sub._actions for o in a.option_strings}  # noqa: SLF001
        return words[1], options
    if words[0] == "dev.py":
        import dev

        assert len(words) > 1 and words[1] in {"run", "test", "lock"}, f"no dev.py command {words[1:2]}"
        return words[1], set(re.findall(r"--[\w-]+", dev.__doc__ or "")) | {"--port", "--no-install", "--check"}
    assert (ROOT / words[0]).exists(), f"no script {words[0]}"
    return words[0], _script_options(words[0])


@functools.cache
def _script_options(script: str) -> set[str]:
    helped = subprocess.run([sys.executable, str(ROOT / script), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0, helped.stderr
    return set(re.findall(r"--[\w-]+", helped.stdout))


@pytest.mark.parametrize(("where", "command"), inline_commands())
def test_inline_command_names_real_options(where: str, command: str):
    words = [w for w in re.sub(r"\[|\]|\.\.\.|…", " ", command).split() if w not in {".venv/bin/python"}]
    if words and words[0] in {"python", "python3"}:
        words = words[1:]
    if words[0] == "dev.py" and words[1:2] == ["test"]:
        return  # its options are pytest's
    if words[-1] in {"-m", "simulator", "manage.py"}:
        return  # the program named alone (e.g. "`python -m simulator`"): nothing more to check
    name, options = _options_of(words)
    shown = {w.split("=", 1)[0] for w in words if w.startswith("--")}
    assert shown <= options, f"{where}: `{command}`: {name} has no option {sorted(shown - options)}"
