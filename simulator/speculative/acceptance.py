"""Explicit per-request acceptance: a pattern, or a trace of accepted lengths measured on a deployment.

``acceptance_pattern`` (a list of whole numbers in ``0..k``): the ``j``-th verification of request
``i`` (0-based, workload order) accepts ``min(pattern[(i + j) mod len(pattern)], d)`` of its ``d``
drafts scored.

``acceptance_trace`` (``{"requests": [line, ...], "match": ..., "beyond": ...}``): one line per
recorded request, in the form vLLM 0.33 gives with ``--per-request-spec-decode-metrics detailed``
(``metrics.speculative_decoding``: ``num_spec_tokens``, ``per_step_accepted``, ``per_step_drafted``,
``acceptance_histogram``) plus the request's ``id`` and ``usage``; the ``j``-th verification of a
request accepts ``min(a_j, d)``. The first entry of a line whose prompt was cached but for its last
token (``cached_tokens == prompt_tokens - 1``) is vLLM's padded admission (rule R7) and is not
replayed by a real verification. ``docs/speculative_decoding.md``, "Replaying measured acceptance".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from simulator.base.errors import FieldError

MAX_TRACE_REQUESTS = 100_000
MAX_TRACE_ENTRIES = 10_000_000
MATCHES = ("id", "order")
BEYONDS = ("cycle", "histogram")
_TRACE_FIELDS = ("requests", "match", "beyond")


class AcceptanceError(FieldError):
    """An acceptance pattern or trace that cannot be replayed; ``field`` names where."""


def _whole(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _whole_array(v: Any, name: str, hi: int, what: str) -> np.ndarray:
    """``v`` as an int64 array of whole numbers in ``0..hi``; errors name the first bad entry."""
    if not isinstance(v, (list, tuple)):
        raise AcceptanceError("must be a list of whole numbers", field=name)
    a = np.array(v, dtype=object if bool in map(type, v) else None) if v else np.zeros(0, np.int64)
    if a.dtype.kind not in "iu" or a.ndim != 1 or (a.size and (a.min() < 0 or a.max() > hi)):
        for i, x in enumerate(v):
            if not _whole(x) or not 0 <= x <= hi:
                raise AcceptanceError(f"must be a whole number from 0 to {hi}{what}, got {x!r}", field=f"{name}[{i}]")
        raise AcceptanceError("must be a list of whole numbers", field=name)  # (not reached)
    return a.astype(np.int64)


def check_pattern(v: Any, k: int, name: str = "speculative.acceptance_pattern") -> tuple[int, ...]:
    """The pattern as a tuple of whole numbers in ``0..k`` (at least one)."""
    if not isinstance(v, (list, tuple)) or not v:
        raise AcceptanceError(f"must be a non-empty list of whole numbers from 0 to {k}", field=name)
    if len(v) > MAX_TRACE_ENTRIES:
        raise AcceptanceError(f"at most {MAX_TRACE_ENTRIES:,} entries, got {len(v):,}", field=name)
    return tuple(int(x) for x in _whole_array(list(v), name, k, " (num_speculative_tokens)"))


def _spec_part(line: dict) -> dict:
    """The ``speculative_decoding`` object of a line: the line itself, or its ``metrics.speculative_decoding``."""
    m = line.get("metrics")
    if "per_step_accepted" not in line and isinstance(m, dict) and isinstance(m.get("speculative_decoding"), dict):
        return m["speculative_decoding"]
    return line


def _padded(line: dict) -> bool:
    """vLLM padded the request's first verification (rule R7): its prompt was cached but its last token."""
    u = line.get("usage")
    if not isinstance(u, dict):
        return False
    p, c = u.get("prompt_tokens"), (u.get("prompt_tokens_details") or {}).get("cached_tokens")
    return _whole(p) and _whole(c) and c == p - 1 and p >= 1


class AcceptanceTrace:
    """A parsed acceptance trace (validated; see the module docstring). Lines keep their order."""

    def __init__(self, data: Any, name: str = "speculative.acceptance_trace") -> None:
        if not isinstance(data, dict) or not isinstance(data.get("requests"), list):
            raise AcceptanceError('must be an object {"requests": [...]} (or {"path": ...} in a file read by the CLI)',
                                  field=name)
        bad = sorted(set(data) - set(_TRACE_FIELDS))
        if bad:
            raise AcceptanceError(f"unknown field (known: {', '.join(_TRACE_FIELDS)})", field=f"{name}.{bad[0]}")
        self.match = data.get("match")
        if self.match is not None and self.match not in MATCHES:
            raise AcceptanceError(f"must be one of {', '.join(MATCHES)}, got {self.match!r}", field=f"{name}.match")
        self.beyond = data.get("beyond") or "cycle"
        if self.beyond not in BEYONDS:
            raise AcceptanceError(f"must be one of {', '.join(BEYONDS)}, got {self.beyond!r}", field=f"{name}.beyond")
        lines = data["requests"]
        if not lines or len(lines) > MAX_TRACE_REQUESTS:
            raise AcceptanceError(f"must hold 1 to {MAX_TRACE_REQUESTS:,} requests, got {len(lines):,}",
                                  field=f"{name}.requests")
        self._read(lines, f"{name}.requests")

    def _read(self, lines: list, name: str) -> None:
        ids: list[str | None] = []
        acc: list[np.ndarray] = []
        self.num_spec_tokens = np.zeros(len(lines), np.int64)
        self.padded = np.zeros(len(lines), bool)
        self.histograms: list[np.ndarray] = []
        total = 0
        for i, line in enumerate(lines):
            at = f"{name}[{i}]"
            if not isinstance(line, dict):
                raise AcceptanceError("must be an object (a request's speculative_decoding metrics)", field=at)
            a, h, kt = self._line(line, at)
            total += a.size
            if total > MAX_TRACE_ENTRIES:
                raise AcceptanceError(f"at most {MAX_TRACE_ENTRIES:,} entries in all", field=f"{at}.per_step_accepted")
            rid = line.get("id")
            ids.append(None if rid is None else str(rid))
            acc.append(a)
            self.histograms.append(h)
            self.num_spec_tokens[i], self.padded[i] = kt, _padded(line)
        self.ids = tuple(ids)
        self.lengths = np.array([a.size for a in acc], np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)
        self.accepted = np.concatenate(acc) if total else np.zeros(0, np.int64)
        self._lines = lines  # (to_dict gives them back as read)

    @staticmethod
    def _line(line: dict, at: str) -> tuple[np.ndarray, np.ndarray, int]:
        sd = _spec_part(line)
        kt = sd.get("num_spec_tokens")
        if not _whole(kt) or not 1 <= kt <= 64:
            raise AcceptanceError(f"must be a whole number from 1 to 64, got {kt!r}", field=f"{at}.num_spec_tokens")
        what = " (num_speculative_tokens of the trace)"
        a = _whole_array(sd.get("per_step_accepted"), f"{at}.per_step_accepted", kt, what)
        dr = sd.get("per_step_drafted")
        if dr is not None:
            d = _whole_array(dr, f"{at}.per_step_drafted", kt, what)
            if d.size != a.size:
                raise AcceptanceError(f"{d.size} entries, per_step_accepted has {a.size}", field=f"{at}.per_step_drafted")
            over = np.flatnonzero(a > d)
            if over.size:
                j = int(over[0])
                raise AcceptanceError(f"{d[j]} drafted but {a[j]} accepted", field=f"{at}.per_step_drafted[{j}]")
        hist = sd.get("acceptance_histogram")
        if hist is None:
            h = np.bincount(a, minlength=kt + 1)
        else:
            h = _whole_array(hist, f"{at}.acceptance_histogram", 2**62, "")
            if h.size != kt + 1:
                raise AcceptanceError(f"must have num_spec_tokens + 1 = {kt + 1} counts, got {h.size}",
                                      field=f"{at}.acceptance_histogram")
        return a, h, int(kt)

    def check_k(self, k: int, name: str = "speculative.acceptance_trace") -> None:
        kt = int(self.num_spec_tokens.min())
        if k > kt:
            raise AcceptanceError(f"recorded with num_speculative_tokens {kt}, cannot replay k = {k}", field=name)

    def rows(self, workload_ids: tuple[str, ...], name: str = "speculative.acceptance_trace") -> np.ndarray:
        """The line each workload request replays (``match``: by id, or request ``i`` -> line ``i mod N``)."""
        index = {rid: i for i, rid in enumerate(self.ids) if rid is not None}
        match = self.match or ("id" if all(r in index for r in workload_ids) else "order")
        if match == "order":
            return np.arange(len(workload_ids), dtype=np.int64) % len(self.ids)
        missing = [r for r in workload_ids if r not in index]
        if missing:
            raise AcceptanceError(f"workload request {missing[0]!r} has no line with its id in the trace "
                                  f"({len(missing):,} of {len(workload_ids):,} have none; match order replays "
                                  "line i mod N)", field=f"{name}.match")
        return np.array([index[r] for r in workload_ids], np.int64)

    def survival(self, k: int) -> np.ndarray:
        """Per line, ``P(A >= i)`` for ``i = 1..k`` from its histogram (without the padded entry), shape ``(N, k)``."""
        out = np.zeros((len(self.ids), k), np.float64)
        for i, h in enumerate(self.histograms):
            h = h.astype(np.float64)
            if self.padded[i] and self.lengths[i] and self.accepted[self.offsets[i]] == 0 and h[0] > 0:
                h[0] -= 1
            if h.sum() > 0:
                out[i] = np.clip(1.0 - np.cumsum(h / h.sum())[:-1], 0.0, 1.0)[:k]
        return out

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"requests": self._lines}
        if self.match is not None:
            d["match"] = self.match
        if self.beyond != "cycle":
            d["beyond"] = self.beyond
        return d

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AcceptanceTrace) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.ids, self.accepted.tobytes(), self.match, self.beyond))

    def __repr__(self) -> str:
        return f"AcceptanceTrace({len(self.ids):,} requests, {self.accepted.size:,} entries)"


MAX_TRACE_FILE_BYTES = 64 * 2**20


def read_trace_file(path: str | Path, name: str = "speculative.acceptance_trace.path") -> list[dict]:
    """The lines of a JSON Lines acceptance trace (one request's metrics a line; blank lines skipped)."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_TRACE_FILE_BYTES:
            raise AcceptanceError(f"{str(path)!r}: {size:,} bytes, at most {MAX_TRACE_FILE_BYTES:,}", field=name)
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AcceptanceError(f"{str(path)!r}: cannot read ({getattr(exc, 'strerror', None) or exc})",
                              field=name) from None
    lines = []
    for no, raw in enumerate(text.splitlines(), 1):
        if raw.strip():
            try:
                lines.append(json.loads(raw))
            except json.JSONDecodeError as exc:
                raise AcceptanceError(f"{str(path)!r} line {no}: invalid JSON ({exc.msg})", field=name) from None
    return lines


def inline_trace_file(config: dict, base: str | Path = ".") -> dict:
    """``config`` with a ``speculative.acceptance_trace`` ``{"path": ...}`` (relative to ``base``, the
    config file's folder) read into ``{"requests": [...]}`` (its ``match`` and ``beyond`` kept)."""
    sp = config.get("speculative")
    tr = sp.get("acceptance_trace") if isinstance(sp, dict) else None
    if not isinstance(tr, dict) or "path" not in tr:
        return config
    if "requests" in tr:
        raise AcceptanceError("give path or requests, not both", field="speculative.acceptance_trace.path")
    path = tr["path"]
    if not isinstance(path, str) or not path:
        raise AcceptanceError(f"must be a file name, got {path!r}", field="speculative.acceptance_trace.path")
    full = Path(base) / path
    rest = {k: v for k, v in tr.items() if k != "path"}
    return {**config, "speculative": {**sp, "acceptance_trace": {**rest, "requests": read_trace_file(full)}}}
