"""The command line on a terminal: a progress bar (quiet otherwise), clean help, every assumed default printed."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from simulator.cli import commands as cli

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "workloads"
COMMANDS = ["run", "sweep", "workload", "cluster"]


def _help(*command: str) -> None:
    with pytest.raises(SystemExit):
        cli.main([*command, "--help"])


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)], ids=["main", *COMMANDS])
def test_help_has_no_markup_and_no_duplicate_or_empty_defaults(command, capsys):
    _help(*command)
    text = capsys.readouterr().out
    assert "``" not in text and "(default: None)" not in text
    flat = " ".join(text.split())
    assert not re.search(r"\(default:? [^)]*\) \(default", flat), flat


def test_the_defaults_a_run_assumes_are_printed(tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text('{"num_gpu_blocks": 64}')
    assert cli.main(["run", "--workload", str(DATA / "chat.csv"), "--config", str(config)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("note: ") and "max_num_seqs=256" in err and "num_gpu_blocks" not in err
    assert "25 ms per step" in err  # --find-replicas and every latency rest on it: never silent


def _on_a_terminal(args: list[str]) -> str:
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a real terminal's size
    proc = subprocess.Popen([sys.executable, "-m", "simulator", *args], cwd=ROOT, stdin=child, stderr=child,
                            stdout=subprocess.DEVNULL)
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    assert proc.wait(timeout=60) == 0, out
    return out.decode(errors="replace")


def test_a_run_shows_a_progress_bar_on_a_terminal_and_nothing_in_a_pipe(tmp_path):
    config = tmp_path / "c.json"
    config.write_text('{"num_gpu_blocks": 64, "step_time_model": {"base_s": 0.01}}')
    args = ["run", "--workload", str(DATA / "chat.csv"), "--config", str(config), "-o", str(tmp_path / "r.json")]
    shown = _on_a_terminal(args)
    assert "simulating 5 requests" in shown and "%|" in shown, shown
    piped = subprocess.run([sys.executable, "-m", "simulator", *args], cwd=ROOT, capture_output=True, text=True)
    assert piped.returncode == 0 and "%|" not in piped.stderr and "simulating" not in piped.stderr, piped.stderr
