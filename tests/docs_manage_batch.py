"""Run the ``manage.py`` lines of one docs block in one Python process (used by tests/test_docs_commands.py).

Each ``manage.py`` process spends about 2.5 s of CPU starting (Django, the URLconf its checks load, numpy);
a block of eight commands spent 20 s doing little else. Here every line still goes through manage.py's own
``main()`` with the words the docs show, one after another, in the sandbox's directory and environment.

stdin: a JSON list of ``[VAR, WORDS]``: ``WORDS`` is what follows ``manage.py`` on the docs line; ``VAR`` is
"" or, for ``VAR=$(... manage.py WORDS)``, the shell variable that takes the command's output (trailing
newlines removed, as bash does); later lines' ``$VAR`` / ``"$VAR"`` read it. Stops at the first command that
fails, with its exit status.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import sys

VARIABLE = re.compile(r'"?\$(?:\{(\w+)\}|(\w+))"?')


def main() -> int:
    lines = json.load(sys.stdin)
    sys.path.insert(0, os.getcwd())
    import manage

    values: dict[str, str] = {}
    for var, words in lines:
        text = VARIABLE.sub(lambda m: shlex.quote(values.get(m.group(1) or m.group(2), "")), words)
        sys.argv = ["manage.py", *shlex.split(text, comments=True)]
        print(f"+ python {shlex.join(sys.argv)}", file=sys.stderr, flush=True)
        out = io.StringIO()
        code = 0
        try:
            with contextlib.redirect_stdout(out if var else sys.stdout):
                manage.main()
        except SystemExit as exc:
            if exc.code not in (None, 0):
                print(exc.code if isinstance(exc.code, str) else "", file=sys.stderr)
                code = exc.code if isinstance(exc.code, int) else 1
        sys.stdout.flush()
        if code:
            return code
        if var:
            values[var] = out.getvalue().rstrip("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
