"""Public trace formats read into a workload: Mooncake, Azure LLM inference, BurstGPT, ``vllm bench serve`` results.

Each format is what its publisher writes (units as published), read into one :class:`TraceTable`
(arrivals in seconds, prompt and output tokens, and for Mooncake the prefix block ids), then
:class:`TraceOptions` cut and scale it, and :func:`table_workload` makes the
:class:`~simulator.workload.requests.Workload` the engine simulates. A :class:`TraceReport` says what
was read, guessed, dropped (and why, with counts) and what the format cannot express.

==============  =====================================================================================
format          columns / keys (units)
==============  =====================================================================================
``mooncake``    JSONL: ``timestamp`` (ms), ``input_length``, ``output_length`` (tokens), ``hash_ids``
                (one id per ``block_size`` tokens of the prompt, 512 in the FAST'25 traces; requests
                share exactly the leading blocks whose ids are equal)
``azure``       CSV: ``TIMESTAMP`` (date and time), ``ContextTokens``, ``GeneratedTokens`` (Azure LLM
                inference traces 2023 and 2024)
``burstgpt``    CSV: ``Timestamp`` (s), ``Request tokens``, ``Response tokens`` (+ ``Model``, ``Total
                tokens``, ``Log Type``, ``Session ID``, ``Elapsed time``); a row with 0 response tokens
                is a failed request, kept out and counted
``vllm-bench``  JSON of ``vllm bench serve --save-result --save-detailed``: ``input_lens``,
                ``output_lens``, ``start_times`` (s), ``ttfts``, ``itls``, ``latencies`` (s),
                ``errors``; failed requests kept out and counted, the measured latencies kept to
                compare with
==============  =====================================================================================
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from simulator.workload.requests import MAX_REQUESTS, MAX_TOKENS, WorkloadError

TRACE_FORMATS = ("mooncake", "azure", "burstgpt", "vllm-bench")
#: Tokens per ``hash_ids`` entry in the Mooncake FAST'25 traces (their README).
MOONCAKE_BLOCK_TOKENS = 512
#: Largest trace text read (bytes): a day at 20 requests/s in Mooncake JSONL is about 0.5 GB.
MAX_TRACE_BYTES = 1 << 30

_MOONCAKE_KEYS = ("timestamp", "input_length", "output_length", "hash_ids")
_AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
_BURSTGPT_OPTIONAL = ("Model", "Total tokens", "Log Type", "Session ID", "Elapsed time")


@dataclass
class TraceTable:
    """Requests as a trace gives them, before options: one entry per kept row, in file order.

    ``arrival`` in seconds from the trace's first row; ``prompt`` / ``output`` in tokens; ``lines`` the
    row's line in the file (for messages); ``hash_ids`` every row's block ids one after another (Mooncake;
    row ``i``'s are ``hash_ids[offsets[i]:offsets[i + 1]]``, ``hash_lens[i]`` of them) or None;
    ``measured`` per-request measured seconds (``ttft``, ``e2e``; vllm-bench) or None.
    """

    arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    lines: np.ndarray
    hash_ids: np.ndarray | None = None
    hash_lens: np.ndarray | None = None
    measured: dict[str, np.ndarray] | None = None
    dropped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    measured_all_itl: np.ndarray | None = None  # every inter-token gap (s) the benchmark measured

    @property
    def n(self) -> int:
        return int(self.prompt.shape[0])

    def offsets(self) -> np.ndarray:
        """Where each row's block ids start in ``hash_ids`` (and the end), shape ``(n + 1,)``."""
        return np.concatenate(([0], np.cumsum(self.hash_lens)))

    def take(self, keep: np.ndarray, reason: str) -> TraceTable:
        """The rows where ``keep`` (a boolean mask) holds; the others counted under ``reason``."""
        gone = int((~keep).sum())
        if gone:
            self.dropped[reason] = self.dropped.get(reason, 0) + gone
        return self.rows(np.flatnonzero(keep))

    def rows(self, idx: np.ndarray) -> TraceTable:
        """The rows ``idx`` (in that order, repeats allowed)."""
        if self.hash_ids is not None:
            self.hash_ids = self.hash_ids[gather(self.offsets(), idx, self.hash_lens)]
            self.hash_lens = self.hash_lens[idx]
        self.arrival, self.prompt, self.output, self.lines = (
            self.arrival[idx], self.prompt[idx], self.output[idx], self.lines[idx])
        if self.measured is not None:
            self.measured = {k: v[idx] for k, v in self.measured.items()}
        return self


def gather(offsets: np.ndarray, idx: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Positions in a flat array of ragged rows (row ``i`` at ``offsets[i]:offsets[i] + lens[i]``) of rows
    ``idx``, one after another."""
    take = lens[idx]
    total = int(take.sum())
    starts = np.repeat(offsets[:-1][idx] - (np.cumsum(take) - take), take)
    return starts + np.arange(total, dtype=np.int64)


class TraceOptionError(WorkloadError):
    """Trace options that cannot be used (the planner files these under the workload's ``options``)."""


class TraceOptionValueError(TraceOptionError):
    """One trace option out of range: ``field`` is the option (``speedup``, ``window`` ...); the words read
    ``trace <option>: ...``, as the command line and the planner have always shown them."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, field=field)
        self.args = (f"trace {field}: {message}",)


@dataclass(frozen=True)
class TraceOptions:
    """How a trace is cut and scaled before it is simulated.

    Parameters
    ----------
    window : (float, float), optional
        Keep requests arriving in ``[start, end)`` seconds after the trace's first request; the kept
        ones are moved to start at 0.
    speedup : float
        Arrival times are divided by it (2 replays the trace twice as fast).
    rate_scale : float
        Scales the number of requests in the same time span: below 1 each request is kept with that
        probability; above 1 each request also has copies (``floor(rate_scale) - 1`` plus one more with
        the fractional part's probability) arriving with it, with prompts of their own except what
        the original shares with earlier requests.
    sample : int, optional
        Keep this many requests chosen at random (file order kept).
    max_model_len : int, optional
        Requests whose prompt plus output exceed it are counted and kept out, as vLLM refuses them.
    block_size : int
        Tokens per Mooncake ``hash_ids`` entry (``--trace-block-size``).
    seed : int
        Seed of the random choices (sampling, rate scale, vllm-bench arrivals without start times).
    """

    window: tuple[float, float] | None = None
    speedup: float = 1.0
    rate_scale: float = 1.0
    sample: int | None = None
    max_model_len: int | None = None
    block_size: int = MOONCAKE_BLOCK_TOKENS
    seed: int = 0

    def __post_init__(self) -> None:
        for name, lo, hi in (("speedup", 1e-6, 1e6), ("rate_scale", 1e-6, 1000.0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
                raise TraceOptionValueError(f"must be a number from {lo:g} to {hi:g}, got {v!r}", field=name)
        if self.window is not None:
            start, end = self.window
            if not (math.isfinite(start) and math.isfinite(end) and 0 <= start < end):
                raise TraceOptionValueError(f"needs 0 <= start < end seconds, got {start!r} to {end!r}",
                                            field="window")
        for name, hi in (("sample", MAX_REQUESTS), ("max_model_len", 100_000_000), ("block_size", 1_000_000)):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi):
                raise TraceOptionValueError(f"must be a whole number from 1 to {hi:,}, got {v!r}", field=name)

    def changed(self) -> dict[str, Any]:
        """The options that differ from the defaults (for the report)."""
        default = TraceOptions()
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) != getattr(default, f.name)}


@dataclass(frozen=True)
class TraceReport:
    """What reading a trace did: its format (and whether it was guessed), rows read, requests kept,
    rows kept out by reason, notes on what the format cannot express, and the measured latencies of a
    vllm-bench result (to compare with the simulation)."""

    format: str
    guessed: bool
    rows: int
    requests: int
    dropped: dict[str, int]
    notes: tuple[str, ...]
    options: dict[str, Any]
    prefix_tokens: int = 0  # prompt tokens the trace itself says are shared with an earlier request
    prompt_tokens: int = 0
    measured: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"format": self.format, "format_guessed": self.guessed, "rows": self.rows,
               "requests": self.requests, "dropped": dict(self.dropped), "notes": list(self.notes),
               "options": {k: list(v) if isinstance(v, tuple) else v for k, v in self.options.items()},
               "prompt_tokens": self.prompt_tokens, "trace_shared_prompt_tokens": self.prefix_tokens}
        if self.measured is not None:
            out["measured"] = dict(self.measured)
        return out


# --------------------------------------------------------------------------- guessing


def guess_format(text: str) -> str | None:
    """The public format ``text`` is in, from its first line or object; None when it is none of them."""
    head = text.lstrip("\ufeff \t\r\n")[:4096]
    if head.startswith("{"):
        first = head.split("\n", 1)[0]
        try:
            obj = json.loads(first)
        except (json.JSONDecodeError, RecursionError):  # nested too deeply: the reader of the format refuses it
            obj = None
        if isinstance(obj, dict) and {"timestamp", "input_length", "output_length"} <= set(obj):
            return "mooncake"
        if obj is None and '"input_lens"' in text[:1 << 20] and '"output_lens"' in text[:1 << 20]:
            return "vllm-bench"
        if isinstance(obj, dict) and {"input_lens", "output_lens"} <= set(obj):
            return "vllm-bench"
        return None
    header = [c.strip() for c in head.split("\n", 1)[0].split(",")]
    if set(_AZURE_COLUMNS) <= set(header):
        return "azure"
    if set(_BURSTGPT_COLUMNS) <= set(header):
        return "burstgpt"
    return None


# --------------------------------------------------------------------------- readers


def _where(name: str, line: int, col: str | None = None, kind: str = "column") -> str:
    return f"{name} line {line}" + (f", {kind} {col}" if col else "")


def _number(value: Any, where: str, what: str) -> float:
    """``value`` (a JSON number or a CSV cell) as a finite float; the error says ``what`` was expected."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise WorkloadError(f"expected {what}, got {value!r}", field=where)
    try:
        x = float(value)
    except ValueError:
        raise WorkloadError(f"expected {what}, got {value!r}", field=where) from None
    if not math.isfinite(x):
        raise WorkloadError(f"expected {what}, got {value!r}", field=where)
    return x


def _whole(value: Any, where: str, lo: int = 0, hi: int = MAX_TOKENS) -> int:
    x = _number(value, where, "a whole number of tokens")
    if x != round(x) or not lo <= x <= hi:
        raise WorkloadError(f"expected a whole number from {lo:,} to {hi:,}, got {value!r}", field=where)
    return int(x)


def _time(value: Any, where: str, unit: str) -> float:
    x = _number(value, where, f"a time in {unit}")
    if x < 0:
        raise WorkloadError(f"must be a finite time >= 0 {unit}, got {value!r}", field=where)
    return x


def _sorted_arrivals(arrival: list[float], lines: list[int], name: str, col: str, kind: str = "column") -> None:
    """Raise on the first arrival earlier than the one before it (a trace must be in time order)."""
    a = np.asarray(arrival)
    back = np.flatnonzero(a[1:] < a[:-1])
    if back.size:
        i = int(back[0]) + 1
        raise WorkloadError(f"arrives before the row above it "
                            f"(line {lines[i - 1]}); a trace must be sorted by time", field=_where(name, lines[i], col, kind))


def _check_size(text: str, name: str) -> None:
    if len(text) > MAX_TRACE_BYTES:
        raise WorkloadError(f"{len(text) / 2**30:.1f} GiB of trace, more than the {MAX_TRACE_BYTES >> 30} "
                            f"GiB limit; cut it with a time window or sample it before uploading", field=name)


def read_mooncake(text: str, name: str, block_size: int = MOONCAKE_BLOCK_TOKENS) -> TraceTable:
    """A Mooncake JSONL trace (``timestamp`` in ms, ``hash_ids`` one per ``block_size`` tokens).

    Lines written as the published traces are (``{"timestamp": 0, "input_length": 6758, "output_length":
    500, "hash_ids": [0, 1, 2]}``, whole numbers) are read all at once (1,000,000 lines in about 3 s instead
    of 15); any other trace, or any bad value, line by line, naming the line and field of the first error.
    """
    _check_size(text, name)
    fast = _mooncake_canonical(text, block_size)
    if fast is not None:
        return fast
    arrival, prompt, output, lines, hashes = [], [], [], [], []
    extra: dict[str, int] = {}
    zero = 0
    for line, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        obj = _json_object(raw, name, line)
        for key in obj.keys() - set(_MOONCAKE_KEYS):
            extra[key] = extra.get(key, 0) + 1
        for key in _MOONCAKE_KEYS[:3]:
            if key not in obj:
                raise WorkloadError("missing", field=_where(name, line, key, 'field'))
        t = _time(obj["timestamp"], _where(name, line, "timestamp", "field"), "ms") / 1000.0
        p = _whole(obj["input_length"], _where(name, line, "input_length", "field"))
        o = _whole(obj["output_length"], _where(name, line, "output_length", "field"))
        ids = _hash_ids(obj.get("hash_ids", []), p, block_size, name, line)
        if p == 0 or o == 0:
            zero += 1
            continue
        if len(prompt) >= MAX_REQUESTS:
            raise WorkloadError(f"more than {MAX_REQUESTS:,} requests; cut the trace "
                                f"with a time window first", field=_where(name, line))
        arrival.append(t)
        prompt.append(p)
        output.append(o)
        lines.append(line)
        hashes.append(ids)
    if not prompt:
        raise WorkloadError("no requests in the trace", field=name)
    _sorted_arrivals(arrival, lines, name, "timestamp", "field")
    table = _table(arrival, prompt, output, lines)
    table.hash_lens = np.fromiter(map(len, hashes), np.int64, len(hashes))
    table.hash_ids = np.concatenate(hashes) if hashes else np.zeros(0, np.int64)
    if zero:
        table.dropped["zero_tokens"] = zero
    table.notes += [f"field {k!r} on {v:,} lines is not part of the Mooncake format and was not read"
                    for k, v in sorted(extra.items())]
    return table


_CANONICAL_KEYS = (('{"timestamp": ', ""), (', "input_length": ', " "), (', "output_length": ', " "),
                   (', "hash_ids": [', " "), ("]}", ""), (", ", " "), ("\n", " "))
_DIGITS_AND_SPACES = re.compile(r"[0-9 ]*")


def _mooncake_canonical(text: str, block_size: int) -> TraceTable | None:
    """The table of a trace written exactly as the published traces are, with nothing to refuse; else None."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    n = len(lines)
    # every key exactly once a line, in its place: then, with the keys taken out, only digits are left
    if not 1 <= n <= MAX_REQUESTS or any(text.count(key) != n for key, _ in _CANONICAL_KEYS[:5]):
        return None
    flat = text
    for key, sep in _CANONICAL_KEYS:
        flat = flat.replace(key, sep)
    if not _DIGITS_AND_SPACES.fullmatch(flat):
        return None
    nids = np.fromiter((0 if line.endswith("[]}") else line.count(",") - 2 for line in lines), np.int64, n)
    nums = np.fromstring(flat, dtype=np.int64, sep=" ")
    if nums.size != 3 * n + int(nids.sum()):
        return None
    starts = np.concatenate(([0], np.cumsum(nids + 3)))[:-1]
    cols = nums[starts[:, None] + np.arange(3)]
    stamp, prompt, output = cols[:, 0], cols[:, 1], cols[:, 2]
    ids_at = gather(np.concatenate((starts + 3, [0])), np.arange(n), nids)
    if (np.any(nids > -(-prompt // block_size)) or np.any(np.diff(stamp) < 0) or np.any(prompt > MAX_TOKENS)
            or np.any(output > MAX_TOKENS) or np.any(nums >= 2**62)):
        return None  # the line-by-line reader names the first bad line
    table = TraceTable(arrival=(stamp - stamp[0]) / 1000.0, prompt=prompt, output=output,
                       lines=np.arange(1, n + 1, dtype=np.int64), hash_ids=nums[ids_at], hash_lens=nids)
    table.take((prompt > 0) & (output > 0), "zero_tokens")
    if table.n == 0:
        return None
    return table


def _json_object(raw: str, name: str, line: int) -> dict:
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise WorkloadError(f"invalid JSON ({msg})", field=_where(name, line)) from None
    if not isinstance(obj, dict):
        raise WorkloadError("expected a JSON object", field=_where(name, line))
    return obj


def _hash_ids(ids: Any, prompt: int, block_size: int, name: str, line: int) -> np.ndarray:
    where = _where(name, line, "hash_ids", "field")
    if not isinstance(ids, list):
        raise WorkloadError(f"expected a list of block ids, got {type(ids).__name__}", field=where)
    most = -(-prompt // block_size)
    if len(ids) > most:
        raise WorkloadError(f"{len(ids)} block ids for {prompt:,} prompt tokens, more than the "
                            f"{most} blocks of {block_size} tokens they can fill (is --trace-block-size right?)", field=where)
    if not all(type(i) is int and 0 <= i < 2**62 for i in ids):
        raise WorkloadError("block ids must be whole numbers >= 0", field=where)
    return np.asarray(ids, np.int64)


def _table(arrival: list[float], prompt: list[int], output: list[int], lines: list[int]) -> TraceTable:
    a = np.asarray(arrival, np.float64)
    return TraceTable(arrival=a - (a[0] if a.size else 0.0), prompt=np.asarray(prompt, np.int64),
                      output=np.asarray(output, np.int64), lines=np.asarray(lines, np.int64))


def _csv_rows(text: str, name: str, required: tuple[str, ...]) -> tuple[list[str], list[tuple[int, list[str]]]]:
    _check_size(text, name)
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    header: list[str] | None = None
    rows = []
    for row in reader:
        if not row or all(not c.strip() for c in row):
            continue
        if header is None:
            header = [c.strip() for c in row]
            missing = [c for c in required if c not in header]
            if missing:
                found = ", ".join(header)
                found = found if len(found) <= 80 else found[:77] + "..."
                raise WorkloadError(f"the header lacks {', '.join(missing)} "
                                    f"(found {found})", field=_where(name, reader.line_num))
            continue
        if len(row) != len(header):
            raise WorkloadError(f"expected {len(header)} cells, got {len(row)}", field=_where(name, reader.line_num))
        rows.append((reader.line_num, row))
    if header is None or not rows:
        raise WorkloadError("no requests in the trace", field=name)
    if len(rows) > MAX_REQUESTS:
        raise WorkloadError(f"{len(rows):,} rows, more than {MAX_REQUESTS:,} requests; cut the trace "
                            f"with a time window first", field=name)
    return header, rows


def read_azure(text: str, name: str) -> TraceTable:
    """An Azure LLM inference trace (2023 / 2024): ``TIMESTAMP,ContextTokens,GeneratedTokens``."""
    header, rows = _csv_rows(text, name, _AZURE_COLUMNS)
    ti, ci, gi = (header.index(c) for c in _AZURE_COLUMNS)
    stamps = [r[ti].strip().replace(" ", "T") for _, r in rows]
    try:
        times = np.array(stamps, dtype="datetime64[ns]")
    except ValueError:
        for (line, _), stamp in zip(rows, stamps):
            try:
                np.datetime64(stamp, "ns")
            except ValueError:
                raise WorkloadError(f"not a date and time "
                                    f"(like 2023-11-16 18:15:46.6805900), got {stamp!r}", field=_where(name, line, 'TIMESTAMP')) from None
        raise
    lines = [line for line, _ in rows]
    arrival = ((times - times[0]) / np.timedelta64(1, "ns") / 1e9).tolist()
    prompt = [_whole(r[ci].strip(), _where(name, line, "ContextTokens")) for line, r in rows]
    output = [_whole(r[gi].strip(), _where(name, line, "GeneratedTokens")) for line, r in rows]
    _sorted_arrivals(arrival, lines, name, "TIMESTAMP")
    table = _table(arrival, prompt, output, lines)
    return table.take((table.prompt > 0) & (table.output > 0), "zero_tokens")


def read_burstgpt(text: str, name: str) -> TraceTable:
    """A BurstGPT trace: ``Timestamp`` (s), ``Request tokens``, ``Response tokens`` and optional columns."""
    header, rows = _csv_rows(text, name, _BURSTGPT_COLUMNS)
    ti, ri, si = (header.index(c) for c in _BURSTGPT_COLUMNS)
    lines = [line for line, _ in rows]
    arrival = [_time(r[ti].strip(), _where(name, line, "Timestamp"), "s") for line, r in rows]
    prompt = [_whole(r[ri].strip(), _where(name, line, "Request tokens")) for line, r in rows]
    output = [_whole(r[si].strip(), _where(name, line, "Response tokens")) for line, r in rows]
    _sorted_arrivals(arrival, lines, name, "Timestamp")
    table = _table(arrival, prompt, output, lines)
    table.take(table.output > 0, "failed")  # BurstGPT marks a failed request with 0 response tokens
    table.take(table.prompt > 0, "zero_tokens")
    other = [c for c in header if c not in _BURSTGPT_COLUMNS and c not in _BURSTGPT_OPTIONAL]
    if other:
        table.notes.append(f"columns {', '.join(other)} are not part of BurstGPT's schema and were not read")
    if "Session ID" in header:
        table.notes.append("Session ID is not used for prefix sharing: BurstGPT does not say how much of a "
                           "session's earlier turns a prompt repeats, so no cache hit is invented")
    return table


def read_vllm_bench(text: str, name: str, seed: int = 0) -> TraceTable:
    """The JSON ``vllm bench serve --save-result --save-detailed`` writes (per-request lists)."""
    _check_size(text, name)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        msg = f"{exc.msg}, line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise WorkloadError(f"invalid JSON ({msg})", field=name) from None
    if not isinstance(data, dict):
        raise WorkloadError("expected the JSON object vllm bench serve writes", field=name)
    n = _bench_length(data, name)
    ok = _bench_succeeded(data, n)
    prompt = [_whole(v, f"{name}: input_lens[{i}]") for i, v in enumerate(data["input_lens"])]
    output = [_whole(v, f"{name}: output_lens[{i}]") for i, v in enumerate(data["output_lens"])]
    arrival, note = _bench_arrivals(data, n, name, seed)
    table = _table(arrival, prompt, output, list(range(n)))
    table.measured = _bench_measured(data, n, name)
    table.measured_all_itl = _bench_all_gaps(data, ok, name)
    if note:
        table.notes.append(note)
    if data.get("max_concurrency") is not None:
        table.notes.append(f"the benchmark ran with --max-concurrency {data['max_concurrency']} (closed loop); "
                           f"this replay sends each request at its measured start time")
    table.take(ok, "failed")
    return table.take((table.prompt > 0) & (table.output > 0), "zero_tokens")


def _bench_length(data: dict, name: str) -> int:
    for key in ("input_lens", "output_lens"):
        if not isinstance(data.get(key), list):
            raise WorkloadError(f"{key} missing (save the result with --save-result --save-detailed)", field=name)
    n = len(data["input_lens"])
    if not 1 <= n <= MAX_REQUESTS:
        raise WorkloadError(f"{n:,} requests; expected 1 to {MAX_REQUESTS:,}", field=name)
    for key in ("output_lens", "ttfts", "itls", "latencies", "start_times", "errors"):
        if key in data and data[key] is not None and (not isinstance(data[key], list) or len(data[key]) != n):
            raise WorkloadError(f"{key} must be a list of {n} entries, one per request", field=name)
    return n


def _bench_succeeded(data: dict, n: int) -> np.ndarray:
    errors = data.get("errors") or [""] * n
    return np.array([not e for e in errors], bool)


def _bench_arrivals(data: dict, n: int, name: str, seed: int) -> tuple[list[float], str | None]:
    starts = data.get("start_times")
    if starts:
        arrival = [_time(v, f"{name}: start_times[{i}]", "s") for i, v in enumerate(starts)]
        order = np.argsort(arrival, kind="stable")
        if np.any(order != np.arange(n)):
            raise WorkloadError("start_times are not in request order", field=name)
        return arrival, None
    rate = data.get("request_rate")
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and math.isfinite(rate) and rate > 0:
        gaps = np.random.default_rng(seed).exponential(1.0 / rate, n)
        gaps[0] = 0.0
        return np.cumsum(gaps).tolist(), (f"no start_times in the result (an older vLLM): arrivals drawn as "
                                          f"Poisson at its request_rate {rate:g}/s, seed {seed}")
    return [0.0] * n, "no start_times and no finite request_rate in the result: every request arrives at 0 s"


def _bench_measured(data: dict, n: int, name: str) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for key, col in (("ttfts", "ttft"), ("latencies", "e2e")):
        if data.get(key):
            out[col] = np.array([_time(v, f"{name}: {key}[{i}]", "s") if v is not None else np.nan
                                 for i, v in enumerate(data[key])], np.float64)
    return out


def _bench_all_gaps(data: dict, ok: np.ndarray, name: str) -> np.ndarray | None:
    itls = data.get("itls")
    if not itls:
        return None
    gaps: list[float] = []
    for i, row in enumerate(itls):
        if ok[i] and row:
            if not isinstance(row, list):
                raise WorkloadError(f"itls[{i}] must be a list of seconds", field=name)
            gaps += [_time(v, f"{name}: itls[{i}]", "s") for v in row]
    return np.asarray(gaps, np.float64)


READERS = {"mooncake": read_mooncake, "azure": read_azure, "burstgpt": read_burstgpt, "vllm-bench": read_vllm_bench}
