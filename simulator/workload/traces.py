"""Trace files in, oracle workload JSON out.

Reading a trace
---------------
:func:`read_trace` reads a request trace, CSV (with a header row) or JSONL
(one JSON object per line), into a :class:`~simulator.workload.requests.Workload`.
Columns / keys (case-sensitive, lower case):

=====================  ========================================================
``arrival_time``       arrival in seconds (float >= 0), or
``arrival_step``       arrival as an engine-step index (whole number >= 0);
                       exactly one of the two, the same on every row
``prompt_tokens``      prompt length in tokens (the whole prompt, including a
                       shared prefix or a conversation's earlier context)
``output_tokens``      tokens the request generates (>= 1)
``id``                 optional request id (default: the row number from 0)
``prefix_id``          optional name of a shared prefix the prompt starts with
``prefix_len``         its length in tokens (required with ``prefix_id``; the
                       same on every row naming that prefix)
``conversation_id``    optional: rows with the same id are turns of one
                       conversation, in file order; each turn's prompt starts
                       with the previous turn's prompt and output
=====================  ========================================================

Empty cells (CSV) or ``null`` (JSONL) mean "absent" for optional columns.
Unknown columns are errors. Every error names the file, line and column.

Writing oracle JSON
-------------------
:func:`workload_to_oracle_dict` / :func:`write_oracle_json` write a workload
in the oracle's compact form (``prefixes`` with token ids, ``requests`` with
``id``, ``arrival_step`` or ``arrival_time``, ``max_tokens``, ``prompt_len``
and ``prefix``), which ``tools/vllm_oracle/run_oracle.py`` reads as it is.
Follow-up turns of conversations carry an extra ``"parent": <id>`` key (and
``"parent_len"``: how many of the parent's tokens start the prompt, where it is
not the parent's whole context): a KV Planner extension that the oracle ignores
(it would treat such a prompt as unique tokens, so the oracle cannot reproduce
cross-turn cache hits).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from simulator.base import unknown_message
from simulator.base.json_input import loads_checked
from simulator.workload.requests import MAX_PRIORITY, MAX_REQUESTS, MAX_TOKENS, Workload, WorkloadError

#: Token ids the oracle draws from (as its generator: [3, 32000)).
ORACLE_VOCAB = 32_000

COLUMNS = ("arrival_time", "arrival_step", "prompt_tokens", "output_tokens", "id",
           "prefix_id", "prefix_len", "conversation_id", "priority")
_REQUIRED = ("prompt_tokens", "output_tokens")
#: The columns of a trace that :func:`parse_trace` reads column by column.
_SIMPLE = ("arrival_time", "arrival_step", "prompt_tokens", "output_tokens", "id")


def _where(name: str, line: int, col: str | None = None, kind: str = "column") -> str:
    return f"{name} line {line}" + (f", {kind} {col}" if col else "")


def _shown(value: Any) -> str:
    """``value`` for a message: its repr, cut to 60 characters (a 5,000-digit number is not repeated whole)."""
    if isinstance(value, int) and abs(value) >= 10**60:  # (repr fails past 4,300 digits)
        return f"a number of about {value.bit_length() * 0.30103:,.0f} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _whole(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool):
        raise WorkloadError(f"expected a whole number, got {value!r}", field=where)
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise WorkloadError(f"expected a whole number, got {_shown(value)}", field=where) from None
    if not math.isfinite(x) or x != round(x):
        raise WorkloadError(f"expected a whole number, got {value!r}", field=where)
    if not lo <= x <= hi:
        raise WorkloadError(f"must be between {lo:,} and {hi:,}, got {value!r}", field=where)
    return int(x)


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise WorkloadError(f"expected a time in seconds, got {value!r}", field=where)
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise WorkloadError(f"expected a time in seconds, got {_shown(value)}", field=where) from None
    if not math.isfinite(x) or x < 0:
        raise WorkloadError(f"must be a finite time >= 0 s, got {value!r}", field=where)
    return x


def _rows_csv(text: str, name: str) -> Iterable[tuple[int, dict[str, Any]]]:
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    for row in reader:
        line = reader.line_num
        if not row or all(not c.strip() for c in row) or row[0].lstrip().startswith("#"):
            continue
        if header is None:
            header = [c.strip() for c in row]
            for col in header:
                if col not in COLUMNS:
                    raise WorkloadError(f"unknown column "
                                        f"(known: {', '.join(COLUMNS)})", field=_where(name, line, col or '(empty)'))
            if len(set(header)) != len(header):
                raise WorkloadError("a column appears twice in the header", field=_where(name, line))
            continue
        if len(row) != len(header):
            raise WorkloadError(f"expected {len(header)} cells, got {len(row)}", field=_where(name, line))
        yield line, {k: (v.strip() if v.strip() != "" else None) for k, v in zip(header, row)}
    if header is None:
        raise WorkloadError("empty trace (expected a header row, e.g. arrival_time,prompt_tokens,output_tokens)", field=name)


def _rows_jsonl(text: str, name: str) -> Iterable[tuple[int, dict[str, Any]]]:
    for line, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = loads_checked(raw)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"invalid JSON ({exc.msg}, column {exc.colno})", field=_where(name, line)) from None
        except ValueError as exc:  # JsonInputError: nested too deeply, a number too large, NUL ... (the body's checks)
            raise WorkloadError(f"{exc}", field=_where(name, line)) from None
        if not isinstance(obj, dict):
            raise WorkloadError("expected a JSON object", field=_where(name, line))
        for key in obj:
            if key not in COLUMNS:
                raise WorkloadError(f"{unknown_message(key, COLUMNS)}", field=_where(name, line, key, 'field'))
        yield line, obj


def _simple_columns(text: str, fmt: str) -> tuple[list[str], list[Sequence[Any]]] | None:
    """Header and columns of a trace of only :data:`_SIMPLE` columns, each row with every one; else None.

    CSV: every row after the header (blank lines aside) has as many cells as
    the header. JSONL: every line holds an object with the same keys.
    """
    if fmt == "csv":
        # Without quotes, csv.reader splits each line at every comma; "\r\n" ends a line as "\n" does.
        text = text.replace("\r\n", "\n")
        if '"' in text or "\r" in text or "\0" in text:
            return None
        lines = text.split("\n")
        for start, line in enumerate(lines):
            cells = line.split(",")
            if not (all(not c.strip() for c in cells) or cells[0].lstrip().startswith("#")):
                break
        else:
            return None
        header = [c.strip() for c in cells]
        if not set(header) <= set(_SIMPLE):
            return None
        body = [line for line in lines[start + 1:] if line]
        k = len(header)
        if set(map(str.count, body, itertools.repeat(","))) != {k - 1}:
            return None
        joined = ",".join(body)
        if ("id" not in header and joined.isascii() and joined.replace(",", "").isdigit()
                and ",," not in joined and joined[0] != "," and joined[-1] != ","):
            # only digits, one number in every cell: parsed in one go (a number too large for
            # int64 reads as its largest value, rejected by the range checks as the number would be)
            whole = np.fromstring(joined, np.int64, sep=",").astype(np.float64)
            return header, list(whole.reshape(-1, k).T)
        flat = joined.split(",")
        return header, [flat[j::k] for j in range(k)]
    lines = [raw for raw in text.splitlines() if raw.strip()]
    try:
        first = json.loads(lines[0]) if lines else None
        if not isinstance(first, dict) or not set(first) <= set(_SIMPLE):
            return None
        objs = list(map(json.loads, lines))
    except (ValueError, RecursionError):  # (the row reader names the line: loads_checked)
        return None
    keys = first.keys()
    if any(type(obj) is not dict or obj.keys() != keys for obj in objs):
        return None
    return list(keys), [[obj[k] for obj in objs] for k in keys]


def _columnwise(text: str, fmt: str) -> Workload | None:
    """The workload of a simple, valid trace, read column by column; else None.

    Simple: the columns are one arrival column, ``prompt_tokens``,
    ``output_tokens`` and optionally ``id``, with a value in every cell
    (CSV: no comment row after the header). Valid: every value passes the
    checks of :func:`parse_trace`'s row-by-row reader, which reads any other
    trace and names the first bad line. Both readers give the same workload.
    """
    table = _simple_columns(text, fmt)
    if table is None:
        return None
    header, columns = table
    cols = dict(zip(header, columns))
    if len(cols) != len(header) or not set(_REQUIRED) <= set(cols):
        return None
    if ("arrival_time" in cols) == ("arrival_step" in cols):
        return None
    n = len(columns[0])
    if not 1 <= n <= MAX_REQUESTS:
        return None
    prompt = _column_whole(cols["prompt_tokens"], fmt, n, 1, MAX_TOKENS)
    output = _column_whole(cols["output_tokens"], fmt, n, 1, MAX_TOKENS)
    unit, arrival = _column_arrival(cols, fmt, n)
    if prompt is None or output is None or arrival is None:
        return None
    ids = None
    if "id" in cols:
        ids = _column_ids(cols["id"], header, fmt, n)
        if ids is None:
            return None
    return Workload(prompt_len=prompt, output_len=output, arrival=arrival, arrival_unit=unit,
                    ids=None if ids is None else tuple(ids))


def _column_numbers(values: Any, fmt: str, n: int) -> np.ndarray | None:
    """One column of :func:`_columnwise` as floats; None when a cell is not a number."""
    if isinstance(values, np.ndarray):
        return values
    if fmt == "jsonl" and bool in set(map(type, values)):
        return None  # float() would take true and false
    try:  # float() strips the white space that str.strip() does (and no more)
        return np.fromiter(map(float, values), np.float64, n)
    except (TypeError, ValueError, OverflowError):
        return None


def _column_whole(values: Any, fmt: str, n: int, lo: int, hi: int) -> np.ndarray | None:
    """One column of :func:`_columnwise` as whole numbers in [lo, hi]; else None."""
    x = _column_numbers(values, fmt, n)
    if x is None or not (np.isfinite(x).all() and (x == np.round(x)).all() and (x >= lo).all()
                         and (x <= hi).all()):
        return None
    return x.astype(np.int64)


def _column_arrival(cols: dict[str, Any], fmt: str, n: int) -> tuple[str, np.ndarray | None]:
    """``(unit, arrivals)`` of :func:`_columnwise`: seconds (finite, >= 0) or whole steps; arrivals None when
    a cell is not valid."""
    if "arrival_time" in cols:
        arrival = _column_numbers(cols["arrival_time"], fmt, n)
        if arrival is not None and not (np.isfinite(arrival).all() and (arrival >= 0).all()):
            arrival = None
        return "s", arrival
    steps = _column_whole(cols["arrival_step"], fmt, n, 0, 10**12)
    return "step", None if steps is None else steps.astype(np.float64)


def _column_ids(raw: Any, header: list[str], fmt: str, n: int) -> list[str] | None:
    """The ``id`` column of :func:`_columnwise` as strings; None unless every row has its own id."""
    if fmt == "csv":
        ids = list(map(str.strip, raw))
        if not all(ids) or (header[0] == "id" and any(i.startswith("#") for i in ids)):
            return None  # an empty cell takes the row number; a leading "#" makes a comment row
    else:
        if None in raw:
            return None
        ids = list(map(str, raw))
    if len(set(ids)) != n:
        return None
    return ids


def parse_trace(text: str, *, fmt: str, name: str = "trace") -> Workload:
    """Parse trace text (``fmt`` = ``"csv"`` or ``"jsonl"``) into a Workload.

    ``name`` is used in error messages (a file name). A trace of only
    arrivals, lengths and ids is read column by column (100,000 rows in about
    0.1 s instead of 0.9 s); one with any other column, or any bad row, row by
    row, which names the line and column of the first error.
    """
    if fmt not in ("csv", "jsonl"):
        raise WorkloadError(f"unknown trace format {fmt!r} (csv or jsonl)", field=name)
    fast = _columnwise(text, fmt)
    return fast if fast is not None else _parse_rows(text, fmt, name)


def _parse_rows(text: str, fmt: str, name: str) -> Workload:
    """:func:`parse_trace`, row by row: any trace, naming the line and column of the first error."""
    rows = _rows_csv(text, name) if fmt == "csv" else _rows_jsonl(text, name)
    reader = _RowReader(name, "column" if fmt == "csv" else "field")
    for line, row in rows:
        reader.add(line, row)
    return reader.workload()


class _RowReader:
    """The columns of a trace read row by row; :meth:`add` checks one row (in the order its errors are
    reported) and appends it, :meth:`workload` checks the whole and builds the Workload."""

    def __init__(self, name: str, kind: str) -> None:
        self.name, self.kind = name, kind  # kind: "column" (CSV) or "field" (JSONL), for messages
        self.prompt: list[int] = []
        self.output: list[int] = []
        self.arrival: list[float] = []
        self.ids: list[str] = []
        self.pid: list[int] = []
        self.parent: list[int] = []
        self.priority: list[int] = []  # vLLM's request priority (optional column, default 0)
        self.prefix_index: dict[str, int] = {}
        self.prefix_len: list[int] = []
        self.last_turn: dict[str, int] = {}  # conversation id -> index of its latest turn
        self.lines: list[int] = []
        self.unit: str | None = None

    def where(self, line: int, col: str | None = None) -> str:
        return _where(self.name, line, col, self.kind)

    def add(self, line: int, row: dict[str, Any]) -> None:
        where = self.where
        if len(self.prompt) >= MAX_REQUESTS:
            raise WorkloadError(f"more than {MAX_REQUESTS:,} requests", field=where(line))
        row = {k: v for k, v in row.items() if v is not None}
        for col in _REQUIRED:
            if col not in row:
                raise WorkloadError("missing", field=where(line, col))
        t = self._arrival(line, row)
        p = _whole(row["prompt_tokens"], where(line, "prompt_tokens"), 1, MAX_TOKENS)
        o = _whole(row["output_tokens"], where(line, "output_tokens"), 1, MAX_TOKENS)
        i = len(self.prompt)
        rid = str(row.get("id", i))
        pref = self._prefix(line, row, p)
        par = self._previous_turn(line, row, p, t, i)
        self.prompt.append(p)
        self.output.append(o)
        self.arrival.append(t)
        self.ids.append(rid)
        self.pid.append(pref)
        self.parent.append(par)
        self.priority.append(_whole(row.get("priority", 0), where(line, "priority"), -MAX_PRIORITY, MAX_PRIORITY))
        self.lines.append(line)

    def _arrival(self, line: int, row: dict[str, Any]) -> float:
        """The row's arrival (seconds or steps; every row in the same unit)."""
        has_t, has_s = "arrival_time" in row, "arrival_step" in row
        if has_t == has_s:
            raise WorkloadError("give exactly one of arrival_time (s) or arrival_step", field=self.where(line))
        this_unit = "s" if has_t else "step"
        if self.unit is None:
            self.unit = this_unit
        elif self.unit != this_unit:
            col = "arrival_time" if has_t else "arrival_step"
            raise WorkloadError(f"earlier rows use "
                                f"{'arrival_time' if self.unit == 's' else 'arrival_step'}; do not mix the two", field=self.where(line, col))
        if has_t:
            return _seconds(row["arrival_time"], self.where(line, "arrival_time"))
        return float(_whole(row["arrival_step"], self.where(line, "arrival_step"), 0, 10**12))

    def _prefix(self, line: int, row: dict[str, Any], p: int) -> int:
        """Index of the row's shared prefix (registered on first sight), -1 for none."""
        where = self.where
        if "prefix_id" not in row:
            if "prefix_len" in row:
                raise WorkloadError("missing (prefix_len needs a prefix_id)", field=where(line, 'prefix_id'))
            return -1
        key = str(row["prefix_id"])
        if "prefix_len" not in row:
            raise WorkloadError("missing (required with prefix_id)", field=where(line, 'prefix_len'))
        plen = _whole(row["prefix_len"], where(line, "prefix_len"), 1, MAX_TOKENS)
        if key not in self.prefix_index:
            self.prefix_index[key] = len(self.prefix_len)
            self.prefix_len.append(plen)
        elif self.prefix_len[self.prefix_index[key]] != plen:
            raise WorkloadError(f"prefix {key!r} was "
                                f"{self.prefix_len[self.prefix_index[key]]} tokens on an earlier row, here {plen}", field=where(line, 'prefix_len'))
        if plen > p:
            raise WorkloadError(f"{p} tokens, shorter than "
                                f"its {plen}-token prefix {key!r}", field=where(line, 'prompt_tokens'))
        return self.prefix_index[key]

    def _previous_turn(self, line: int, row: dict[str, Any], p: int, t: float, i: int) -> int:
        """Index of the previous turn of the row's conversation, -1 for none; the row becomes the latest."""
        if "conversation_id" not in row:
            return -1
        par = -1
        conv = str(row["conversation_id"])
        if conv in self.last_turn:
            par = self.last_turn[conv]
            ctx = self.prompt[par] + self.output[par]
            if p < ctx:
                raise WorkloadError(
                    f"{p} tokens, fewer than the {ctx}-token context "
                    f"(prompt + output) of the previous turn of conversation {conv!r} on line {self.lines[par]}", field=self.where(line, 'prompt_tokens'))
            if t < self.arrival[par]:
                col = "arrival_time" if self.unit == "s" else "arrival_step"
                raise WorkloadError(f"arrives before the previous turn of "
                                    f"conversation {conv!r} on line {self.lines[par]}", field=self.where(line, col))
        self.last_turn[conv] = i
        return par

    def workload(self) -> Workload:
        if not self.prompt:
            raise WorkloadError("no requests in the trace", field=self.name)
        if len(set(self.ids)) != len(self.ids):
            seen: set[str] = set()
            for k, rid in enumerate(self.ids):
                if rid in seen:
                    raise WorkloadError(f"duplicate request id {rid!r}", field=self.where(self.lines[k], 'id'))
                seen.add(rid)
        return Workload(
            prompt_len=np.asarray(self.prompt, np.int64),
            output_len=np.asarray(self.output, np.int64),
            arrival=np.asarray(self.arrival, np.float64),
            arrival_unit=self.unit or "step",
            prefix_id=np.asarray(self.pid, np.int64),
            prefix_len=np.asarray(self.prefix_len, np.int64),
            parent=np.asarray(self.parent, np.int64),
            priority=np.asarray(self.priority, np.int64),
            ids=tuple(self.ids),
            prefix_names=tuple(self.prefix_index),
        )


def trace_format(path: str | Path) -> str | None:
    """``"csv"`` or ``"jsonl"`` from a file name's extension, else None."""
    suffix = Path(path).suffix.lower()
    return {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}.get(suffix)


def read_trace(path: str | Path, fmt: str | None = None) -> Workload:
    """Read a CSV or JSONL trace file (format from the extension unless ``fmt``).

    Raises
    ------
    WorkloadError
        Missing or unreadable file, unknown format or column, or a bad value
        (the message names the file, line and column).
    """
    p = Path(path)
    fmt = fmt or trace_format(p)
    if fmt is None:
        raise WorkloadError("unknown trace format (use a .csv or .jsonl file)", field=p.name)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkloadError("no such file", field=p) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"cannot read ({getattr(exc, 'strerror', None) or exc})", field=p) from None
    return parse_trace(text, fmt=fmt, name=p.name)


def workload_to_oracle_dict(workload: Workload, *, seed: int = 0, meta: dict | None = None) -> dict[str, Any]:
    """The oracle's compact workload JSON for ``workload``.

    Parameters
    ----------
    workload : Workload
    seed : int
        Written as the file's ``seed`` (the oracle derives unique prompt tails
        from it) and used to draw the shared prefixes' token ids in [3, 32000).
    meta : dict, optional
        Stored under ``"generator"`` (for example the WorkloadSpec and seed).

    Returns
    -------
    dict
        ``{"generator"?, "seed", "prefixes": {name: [token ids]}, "requests": [...], "note"}``.
    """
    if len(set(workload.ids)) != workload.n:
        raise WorkloadError("request ids must be unique (the oracle derives each prompt from its id)", field="ids")
    rng = np.random.default_rng(seed)
    prefixes = {name: rng.integers(3, ORACLE_VOCAB, int(length)).tolist()
                for name, length in zip(workload.prefix_names, workload.prefix_len)}
    akey = "arrival_step" if workload.arrival_unit == "step" else "arrival_time"
    arrivals = (workload.arrival.astype(np.int64).tolist() if akey == "arrival_step"
                else [round(float(x), 6) for x in workload.arrival])
    requests = []
    for i in range(workload.n):
        r: dict[str, Any] = {"id": workload.ids[i], akey: arrivals[i],
                             "max_tokens": int(workload.output_len[i]),
                             "prompt_len": int(workload.prompt_len[i])}
        par = int(workload.parent[i])
        if par >= 0:
            r["parent"] = workload.ids[par]
            if workload.parent_len[i] >= 0:
                r["parent_len"] = int(workload.parent_len[i])
        elif workload.prefix_id[i] >= 0:
            r["prefix"] = workload.prefix_names[int(workload.prefix_id[i])]
        if workload.priority[i]:
            r["priority"] = int(workload.priority[i])
        requests.append(r)
    out: dict[str, Any] = {}
    if meta is not None:
        out["generator"] = meta
    out.update({
        "seed": int(seed),
        "prefixes": prefixes,
        "requests": requests,
        "note": ("compact form: full prompt = prefixes[request.prefix] (if any) + unique tail up to "
                 "prompt_len tokens; 'parent' (KV Planner extension, ignored by the oracle) = the "
                 "previous turn whose prompt and output start this prompt"),
    })
    return out


def write_oracle_json(workload: Workload, file: str | Path | TextIO, *, seed: int = 0,
                      meta: dict | None = None) -> None:
    """Write :func:`workload_to_oracle_dict` as compact JSON to a path or open text file."""
    text = json.dumps(workload_to_oracle_dict(workload, seed=seed, meta=meta), separators=(",", ":")) + "\n"
    if hasattr(file, "write"):
        file.write(text)
    else:
        Path(file).write_text(text)


def apply_parents(workload: Workload, data: dict[str, Any]) -> Workload:
    """Add the ``parent`` links of an oracle-style JSON (our extension) to ``workload``.

    ``workload`` is what the oracle reader made of ``data`` (the requests in
    the same order); each request's ``"parent"`` names an earlier request id.
    """
    reqs = data.get("requests") if isinstance(data, dict) else None
    if not isinstance(reqs, list) or not any(isinstance(r, dict) and "parent" in r for r in reqs):
        return workload
    index = {rid: i for i, rid in enumerate(workload.ids)}
    parent = np.full(workload.n, -1, np.int64)
    parent_len = np.full(workload.n, -1, np.int64)
    for i, r in enumerate(reqs):
        if isinstance(r, dict) and r.get("parent") is not None:
            p = index.get(str(r["parent"]))
            if p is None or p >= i:
                raise WorkloadError(f"{r['parent']!r} is not the id of an earlier request", field=f"requests[{i}].parent")
            parent[i] = p
            if r.get("parent_len") is not None:
                parent_len[i] = _whole(r["parent_len"], f"requests[{i}].parent_len", 1, MAX_TOKENS)
    return Workload(
        prompt_len=workload.prompt_len, output_len=workload.output_len, arrival=workload.arrival,
        arrival_unit=workload.arrival_unit, prefix_id=np.where(parent >= 0, -1, workload.prefix_id),
        prefix_len=workload.prefix_len, parent=parent, ids=workload.ids, prefix_names=workload.prefix_names,
        parent_len=parent_len, priority=workload.priority,
    )


__all__ = ["COLUMNS", "parse_trace", "read_trace", "trace_format", "workload_to_oracle_dict",
           "write_oracle_json", "apply_parents"]
