"""The command line's trace options: ``--trace-format`` and the options any public trace takes.

``python -m simulator run --workload FILE [--trace-format mooncake|azure|burstgpt|vllm-bench]
[--trace-block-size N] [--trace-window START:END] [--trace-speedup X] [--trace-rate-scale X]
[--trace-sample N] [--trace-seed S] --config C.json``: the format is guessed from the file's content
when the option is left out (and the result says so, under ``"trace"``); ``kv-planner`` names the
planner's own CSV/JSONL columns (``docs/traffic.md``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from simulator.workload import (
    MAX_TRACE_BYTES,
    TRACE_FORMATS,
    TraceOptions,
    TraceOptionValueError,
    TraceReport,
    Workload,
    WorkloadError,
    guess_format,
    read_public_trace,
)

#: The planner's own trace columns (``simulator.workload.traces``), by the name the option takes.
OWN_FORMAT = "kv-planner"
_OPTIONS = ("trace_block_size", "trace_window", "trace_speedup", "trace_rate_scale", "trace_sample")


def add_trace_arguments(parser: argparse.ArgumentParser) -> None:
    """The trace options of ``run``, ``sweep`` and ``cluster``."""
    g = parser.add_argument_group("public traces (docs/traffic.md)")
    g.add_argument("--trace-format", choices=(*TRACE_FORMATS, OWN_FORMAT), metavar="FORMAT",
                   help=f"the workload file's format: {', '.join(TRACE_FORMATS)} or {OWN_FORMAT} (default: guessed "
                        "from the content)")
    g.add_argument("--trace-block-size", type=int, metavar="TOKENS",
                   help="tokens per Mooncake hash_ids entry (default 512, the FAST'25 traces' block)")
    g.add_argument("--trace-window", metavar="START:END",
                   help="keep requests arriving START to END seconds after the trace's first request")
    g.add_argument("--trace-speedup", type=float, metavar="X", help="divide arrival times by X")
    g.add_argument("--trace-rate-scale", type=float, metavar="X",
                   help="scale the number of requests in the same time span (below 1 thins, above 1 adds copies)")
    g.add_argument("--trace-sample", type=int, metavar="N", help="keep N requests chosen at random")
    g.add_argument("--trace-seed", type=int, default=0, metavar="S", help="seed of sampling and rate scaling")


def trace_options(args: argparse.Namespace, max_model_len: int | None, error: type[Exception]) -> TraceOptions:
    """The :class:`TraceOptions` the command's options give (``max_model_len`` from the run's configuration)."""
    window = None
    if getattr(args, "trace_window", None):
        start, sep, end = args.trace_window.partition(":")
        try:
            window = (float(start), float(end))
        except ValueError:
            raise error(f"--trace-window {args.trace_window!r}: expected START:END in seconds (e.g. 0:600)") from None
        if not sep:
            raise error(f"--trace-window {args.trace_window!r}: expected START:END in seconds (e.g. 0:600)")
    kw = {"window": window, "max_model_len": max_model_len, "seed": getattr(args, "trace_seed", 0) or 0}
    for opt, name in (("trace_speedup", "speedup"), ("trace_rate_scale", "rate_scale"), ("trace_sample", "sample"),
                      ("trace_block_size", "block_size")):
        if getattr(args, opt, None) is not None:
            kw[name] = getattr(args, opt)
    try:
        return TraceOptions(**kw)
    except TraceOptionValueError as exc:
        name = exc.field
        option = "config max_model_len" if name == "max_model_len" else f"--trace-{name.replace('_', '-')}"
        raise error(f"{option}: {exc.message}") from None


def read_trace_file(path: str, args: argparse.Namespace | None, max_model_len: int | None,
                    error: type[Exception]) -> tuple[Workload, TraceReport] | None:
    """The workload and report of a public trace file; None when the file is not one (the caller reads it as
    the planner's own trace or the oracle's JSON)."""
    fmt = getattr(args, "trace_format", None)
    if fmt == OWN_FORMAT:
        _refuse_options(args, error, "the planner's own columns")
        return None
    p = Path(path)
    try:
        if p.stat().st_size > MAX_TRACE_BYTES:
            raise error(f"workload {path!r}: {p.stat().st_size / 2**30:.1f} GiB, more than the "
                        f"{MAX_TRACE_BYTES >> 30} GiB a trace may be; cut it first (a time window or a sample)")
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"workload file {path!r}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"workload file {path!r}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    if fmt is None and guess_format(text) is None:
        _refuse_options(args, error, "this file (not a public trace format)")
        return None
    options = trace_options(args, max_model_len, error) if args is not None else TraceOptions(
        max_model_len=max_model_len)
    try:
        return read_public_trace(text, fmt, name=p.name, options=options)
    except WorkloadError as exc:
        raise error(f"workload: {exc}") from None


def _refuse_options(args: argparse.Namespace | None, error: type[Exception], what: str) -> None:
    given = [f"--{o.replace('_', '-')}" for o in _OPTIONS if args is not None and getattr(args, o, None) is not None]
    if given:
        raise error(f"{', '.join(given)}: {'apply' if len(given) > 1 else 'applies'} to public trace formats "
                    f"({', '.join(TRACE_FORMATS)}), not to {what}")


__all__ = ["OWN_FORMAT", "add_trace_arguments", "read_trace_file", "trace_options"]
