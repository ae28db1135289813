"""Workloads: what requests arrive, when, how long, and what content they share.

A workload is a set of ``n`` requests described by arrays (one entry per
request, in submission order). Token *content* is described only as far as
prefix caching needs it: which leading tokens a request shares with a named
prefix or with an earlier request (multi-turn), everything else being unique.

Sharing model
-------------
The prompt of request ``r`` is, in order:

1. if ``parent[r] >= 0``: the context of request ``parent[r]`` (its prompt
   followed by its ``output_len`` generated tokens), which the parent must
   have *before* it in the arrays: all of it (a conversation's next turn), or
   its first ``parent_len[r]`` tokens where that is given (a trace whose
   requests share leading blocks, as Mooncake's ``hash_ids`` say); otherwise
2. if ``prefix_id[r] >= 0``: the ``prefix_len[prefix_id[r]]`` tokens of
   that shared prefix;
3. then unique tokens up to ``prompt_len[r]``.

``shared_len(r)`` is the length of parts 1–2. Two requests have identical
block hashes for block ``j`` (block size ``B``) exactly when both share the
same source for their first ``(j + 1) * B`` tokens, as vLLM's chained hashes do.
Generated tokens are unique to their request (the oracle's fake model samples
random tokens), except that a child turn re-reads its parent's outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from simulator.base.errors import FieldError

ArrivalUnit = Literal["step", "s"]

#: Longest prompt or output a distribution may draw or a trace may give, tokens.
MAX_TOKENS = 10_000_000
#: Most requests one trace may hold (and the cap of the readers' options that count requests).
MAX_REQUESTS = 1_000_000
#: Most requests one generated workload may hold: a day at 20 requests/s is 1.73 million (issue 36); generating
#: is cheap, and what a run of them may hold is the engine's and the day's own memory checks.
MAX_GENERATED_REQUESTS = 2_000_000
#: Largest magnitude of a request's priority (vLLM's is any int; this keeps it exact in int64 and float64).
MAX_PRIORITY = 2**31


class WorkloadError(FieldError):
    """A workload that cannot be simulated; the message names the field."""


def _int_column(name: str, value: Any, n: int, default: int | None = None) -> np.ndarray:
    """A read-only int64 column of ``n`` whole, finite values (``default`` everywhere when None)."""
    if value is None:
        value = np.full(n, default, dtype=np.int64)
    arr = np.asarray(value)
    if arr.shape != (n,):
        raise WorkloadError(f"expected {n} entries, got shape {arr.shape}", field=name)
    if arr.size and not np.all(np.isfinite(arr.astype(np.float64))):
        raise WorkloadError("values must be finite", field=name)
    if arr.size and not np.all(np.asarray(arr, np.float64) == np.round(np.asarray(arr, np.float64))):
        raise WorkloadError("values must be whole numbers", field=name)
    out = arr.astype(np.int64)
    out.setflags(write=False)
    return out


def _arrival_column(value: Any, unit: str, n: int) -> np.ndarray:
    """A read-only float64 copy of ``n`` arrivals: finite, >= 0, whole numbers when ``unit`` is steps."""
    if unit not in ("step", "s"):
        raise WorkloadError("must be 'step' or 's'", field="arrival_unit")
    arrival = np.asarray(value, dtype=np.float64)
    if arrival.shape != (n,):
        raise WorkloadError(f"expected {n} entries, got shape {arrival.shape}", field="arrival")
    if n and (not np.all(np.isfinite(arrival)) or arrival.min() < 0):
        raise WorkloadError("times must be finite and >= 0", field="arrival")
    if unit == "step" and n and not np.all(arrival == np.floor(arrival)):
        raise WorkloadError("step arrivals must be whole step numbers", field="arrival")
    arrival = arrival.copy()
    arrival.setflags(write=False)
    return arrival


@dataclass(frozen=True, eq=False)
class Workload:
    """An immutable, validated set of requests.

    Parameters
    ----------
    prompt_len : ndarray of int64, shape (n,)
        Prompt length of each request, in tokens (>= 1).
    output_len : ndarray of int64, shape (n,)
        Tokens each request generates (vLLM ``max_tokens`` with
        ``ignore_eos``), >= 1.
    arrival : ndarray of float64, shape (n,)
        Arrival of each request, in engine steps (``arrival_unit="step"``,
        whole numbers) or seconds (``arrival_unit="s"``). Non-decreasing is not
        required; ties keep submission order.
    arrival_unit : {"step", "s"}
        Unit of ``arrival``.
    prefix_id : ndarray of int64, shape (n,)
        Index into ``prefix_len`` of the shared prefix that starts the prompt,
        or -1 for none. Ignored where ``parent >= 0``.
    prefix_len : ndarray of int64, shape (num_prefixes,)
        Length of each named shared prefix, in tokens.
    parent : ndarray of int64, shape (n,)
        Index of an earlier request whose context (prompt + output) starts
        this request's prompt (multi-turn conversations), or -1.
    parent_len : ndarray of int64, shape (n,), optional
        How many leading tokens of the parent's context start this prompt:
        -1 (the default) for all of it, else 1 to the parent's context length
        (and at most this prompt). Ignored where ``parent`` is -1.
    ids : tuple of str, length n
        External request ids (the oracle's ``id``), for per-request output.
    prefix_names : tuple of str, length num_prefixes
        Names of the shared prefixes (the oracle's ``prefixes`` keys).
    priority : ndarray of int64, shape (n,), optional
        vLLM's request priority (``priority`` of a completion request): with
        ``EngineConfig.policy="priority"`` a lower value is served first, ties
        by arrival. Default 0 for all; ignored by FCFS scheduling.
    """

    prompt_len: np.ndarray
    output_len: np.ndarray
    arrival: np.ndarray
    arrival_unit: ArrivalUnit = "step"
    prefix_id: np.ndarray | None = None
    prefix_len: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    parent: np.ndarray | None = None
    ids: tuple[str, ...] | None = None
    prefix_names: tuple[str, ...] | None = None
    parent_len: np.ndarray | None = None
    priority: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = int(np.asarray(self.prompt_len).shape[0]) if np.ndim(self.prompt_len) == 1 else -1
        if n < 0:
            raise WorkloadError("must be a one-dimensional array", field="prompt_len")
        prompt = _int_column("prompt_len", self.prompt_len, n)
        output = _int_column("output_len", self.output_len, n)
        if n and prompt.min() < 1:
            raise WorkloadError("every prompt needs at least 1 token", field="prompt_len")
        if n and output.min() < 1:
            raise WorkloadError("every request generates at least 1 token", field="output_len")
        arrival = _arrival_column(self.arrival, self.arrival_unit, n)
        plen = np.asarray(self.prefix_len, dtype=np.int64).reshape(-1).copy()
        if plen.size and plen.min() < 1:
            raise WorkloadError("shared prefixes need at least 1 token", field="prefix_len")
        plen.setflags(write=False)
        pid = _int_column("prefix_id", self.prefix_id, n, -1)
        if n and (pid.min() < -1 or pid.max() >= plen.size):
            raise WorkloadError(f"must be -1 or an index below {plen.size}", field="prefix_id")
        par = _int_column("parent", self.parent, n, -1)
        if n and np.any((par < -1) | (par >= np.arange(n))):
            raise WorkloadError("must be -1 or the index of an earlier request", field="parent")
        plen_par = _int_column("parent_len", self.parent_len, n, -1)
        if n and np.any(plen_par != -1):
            ctx = prompt + output
            given = (plen_par != -1) & (par >= 0)
            bad = given & ((plen_par < 1) | (plen_par > ctx[np.maximum(par, 0)]))
            if bad.any():
                r = int(np.flatnonzero(bad)[0])
                raise WorkloadError(f"request {r} shares {plen_par[r]} tokens of request {par[r]}, "
                                    f"whose context is {ctx[par[r]]} tokens (give 1 to {ctx[par[r]]}, or -1 for all)", field="parent_len")
            plen_par = np.where(par >= 0, plen_par, -1)

        object.__setattr__(self, "prompt_len", prompt)
        object.__setattr__(self, "output_len", output)
        object.__setattr__(self, "arrival", arrival)
        object.__setattr__(self, "prefix_len", plen)
        object.__setattr__(self, "prefix_id", pid)
        object.__setattr__(self, "parent", par)
        prio = _int_column("priority", self.priority, n, 0)
        if n and np.abs(prio).max() > MAX_PRIORITY:
            raise WorkloadError(f"must be whole numbers from {-MAX_PRIORITY:,} to {MAX_PRIORITY:,}", field="priority")
        object.__setattr__(self, "priority", prio)
        plen_par.setflags(write=False)
        object.__setattr__(self, "parent_len", plen_par)
        shared = self.shared_len()
        if n and np.any(shared > prompt):
            bad = int(np.flatnonzero(shared > prompt)[0])
            raise WorkloadError(
                f"request {bad} is shorter ({prompt[bad]} tokens) than the "
                f"prefix or parent context it starts with ({shared[bad]} tokens)"
            , field="prompt_len")
        self._set_names(n, plen.size)

    def _set_names(self, n: int, num_prefixes: int) -> None:
        """Request ids (row numbers by default) and prefix names (``p0``, ``p1``... by default), checked."""
        ids = tuple(map(str, range(n) if self.ids is None else self.ids))
        if len(ids) != n:
            raise WorkloadError(f"expected {n} ids, got {len(ids)}", field="ids")
        object.__setattr__(self, "ids", ids)
        names = (
            tuple(f"p{i}" for i in range(num_prefixes))
            if self.prefix_names is None
            else tuple(str(s) for s in self.prefix_names)
        )
        if len(names) != num_prefixes:
            raise WorkloadError("one name per shared prefix", field="prefix_names")
        object.__setattr__(self, "prefix_names", names)

    @property
    def n(self) -> int:
        """Number of requests."""
        return int(self.prompt_len.shape[0])

    def select(self, idx: np.ndarray) -> Workload:
        """The requests ``idx`` (indices, in the order kept) as a workload of their own, every per-request
        column carried (priority and parent_len included). A parent among ``idx`` is renumbered; a parent
        left out is dropped, so that turn becomes a fresh prompt of the same length."""
        idx = np.asarray(idx, dtype=np.int64)
        local = np.full(self.n, -1, np.int64)
        local[idx] = np.arange(idx.size)
        parent = self.parent[idx]
        par = np.where(parent >= 0, local[np.maximum(parent, 0)], -1)
        return Workload(prompt_len=self.prompt_len[idx], output_len=self.output_len[idx],
                        arrival=self.arrival[idx], arrival_unit=self.arrival_unit,
                        prefix_id=self.prefix_id[idx], prefix_len=self.prefix_len, parent=par,
                        ids=tuple(self.ids[i] for i in idx.tolist()), prefix_names=self.prefix_names,
                        parent_len=np.where(par >= 0, self.parent_len[idx], -1), priority=self.priority[idx])

    def shared_len(self) -> np.ndarray:
        """Leading prompt tokens each request shares with a prefix or parent.

        Returns
        -------
        ndarray of int64, shape (n,)
            Tokens; 0 where the prompt is wholly unique.
        """
        if self.prefix_len.size == 0:
            shared = np.zeros(self.n, np.int64)
        else:
            shared = np.where(self.prefix_id >= 0, self.prefix_len[np.maximum(self.prefix_id, 0)], 0)
        has_parent = self.parent >= 0
        if has_parent.any():
            ctx = self.prompt_len + self.output_len
            shared = shared.copy()
            whole = ctx[self.parent[has_parent]]
            part = self.parent_len[has_parent]
            shared[has_parent] = np.where(part >= 0, part, whole)
        return shared.astype(np.int64)
