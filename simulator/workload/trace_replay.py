"""A public trace made ready to replay: cut and scaled by :class:`TraceOptions`, its prefix sharing
turned into the engine's, and a :class:`TraceReport` of everything done.

Prefix sharing (Mooncake ``hash_ids``): two requests share exactly the leading blocks whose ids are
equal. A trie over the id sequences finds, for each request, the first earlier request with the longest
common run of leading ids; the request then starts with that many blocks of the earlier one's prompt
(:attr:`Workload.parent` / :attr:`Workload.parent_len`, in tokens: blocks x ``block_size``, at most
either prompt). Because equal leading ids mean equal leading content, any earlier request with that
run gives the same block contents, so the engine's prefix cache sees exactly the trace's sharing, at
its own block size.

>>> wl, report = read_public_trace(text, options=TraceOptions(speedup=2.0))  # doctest: +SKIP
>>> report.format, report.dropped                                             # doctest: +SKIP
('mooncake', {'longer_than_max_model_len': 3})
"""

from __future__ import annotations

import numpy as np

from simulator.workload.requests import MAX_REQUESTS, Workload, WorkloadError
from simulator.workload.trace_formats import (
    READERS,
    TRACE_FORMATS,
    TraceOptionError,
    TraceOptions,
    TraceReport,
    TraceTable,
    guess_format,
    read_vllm_bench,
)
from simulator.workload.traces import parse_trace


def read_public_trace(text: str, fmt: str | None = None, *, name: str = "trace",
                      options: TraceOptions | None = None) -> tuple[Workload, TraceReport]:
    """Read a trace in one of :data:`TRACE_FORMATS` (guessed from its content when ``fmt`` is None) and replay it.

    Raises
    ------
    WorkloadError
        An unknown or unguessable format, a bad row (the message names the file, line and field), or
        options that leave no request.
    """
    options = options or TraceOptions()
    guessed = fmt is None
    if fmt is None:
        fmt = guess_format(text)
        if fmt is None:
            raise WorkloadError(f"not a trace format this planner knows ({', '.join(TRACE_FORMATS)}, or "
                                f"its own CSV/JSONL columns); name one with --trace-format", field=name)
    if fmt not in READERS:
        raise WorkloadError(f"unknown trace format {fmt!r} (known: {', '.join(TRACE_FORMATS)})", field=name)
    if fmt == "vllm-bench":
        table = read_vllm_bench(text, name, options.seed)
    elif fmt == "mooncake":
        table = READERS[fmt](text, name, options.block_size)
    else:
        table = READERS[fmt](text, name)
    rows = table.n + sum(table.dropped.values())
    table = apply_options(table, options)
    workload, shared = table_workload(table, options.block_size)
    report = TraceReport(format=fmt, guessed=guessed, rows=rows, requests=workload.n, dropped=dict(table.dropped),
                         notes=tuple(table.notes), options=options.changed(), prefix_tokens=shared,
                         prompt_tokens=int(workload.prompt_len.sum()), measured=measured_summary(table))
    return workload, report


def read_any_trace(text: str, fmt: str | None = None, *, name: str = "trace",
                   options: TraceOptions | None = None) -> tuple[Workload, TraceReport | None]:
    """A trace in any format the planner reads: the planner's own columns (``fmt`` ``"csv"`` / ``"jsonl"``)
    or a public one (:data:`TRACE_FORMATS`; guessed when ``fmt`` is None or ``"auto"``, falling back to the
    planner's own CSV or JSONL by the first character). The report is None for the planner's own columns."""
    if fmt in (None, "auto"):
        fmt = guess_format(text) or ("jsonl" if text.lstrip().startswith("{") else "csv")
    if fmt in ("csv", "jsonl"):
        if options is not None and options.changed():
            raise TraceOptionError(f"trace options ({', '.join(options.changed())}) apply to the public "
                                f"formats ({', '.join(TRACE_FORMATS)}), not to the planner's own columns", field=name)
        return parse_trace(text, fmt=fmt, name=name), None
    return read_public_trace(text, fmt, name=name, options=options)


def apply_options(table: TraceTable, options: TraceOptions) -> TraceTable:
    """``table`` cut to the window, to ``max_model_len``, sampled, rate-scaled and sped up (in that order)."""
    if options.window is not None:
        start, end = options.window
        table.take((table.arrival >= start) & (table.arrival < end), "outside_window")
        table.arrival = table.arrival - start
    if options.max_model_len is not None:
        table.take(table.prompt + table.output <= options.max_model_len, "longer_than_max_model_len")
    rng = np.random.default_rng(options.seed)
    if options.sample is not None and options.sample < table.n:
        keep = np.zeros(table.n, bool)
        keep[rng.choice(table.n, options.sample, replace=False)] = True
        table.take(keep, "sampled_out")
    if options.rate_scale < 1.0:
        table.take(rng.random(table.n) < options.rate_scale, "thinned_by_rate_scale")
    elif options.rate_scale > 1.0:
        _add_copies(table, options.rate_scale, rng)
    if options.speedup != 1.0:
        table.arrival = table.arrival / options.speedup
    if table.n == 0:
        raise WorkloadError("no request is left after the options "
                            f"({', '.join(f'{k}: {v:,}' for k, v in table.dropped.items())} kept out)", field="trace")
    return table


def _add_copies(table: TraceTable, scale: float, rng: np.random.Generator) -> None:
    """Each request followed by its copies (same arrival and lengths, a prompt of their own except the
    leading blocks the original shares with earlier requests)."""
    counts = 1 + int(scale - 1.0) + (rng.random(table.n) < (scale % 1.0)).astype(np.int64)
    if int(counts.sum()) > MAX_REQUESTS:
        raise WorkloadError(f"trace rate_scale: {int(counts.sum()):,} requests, more than {MAX_REQUESTS:,}")
    idx = np.repeat(np.arange(table.n), counts)
    first = np.r_[True, idx[1:] != idx[:-1]]  # the original of each run of copies
    run = prefix_parents(table.hash_ids, table.hash_lens)[1] if table.hash_ids is not None else None
    table.rows(idx)
    if run is not None:
        # a copy keeps the original's shared leading ids; the rest become ids of its own (below 0: a
        # trace's ids are >= 0)
        lens = table.hash_lens
        place = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)  # position in its row
        own = np.repeat(~first, lens) & (place >= np.repeat(run[idx], lens))
        table.hash_ids = table.hash_ids.copy()
        table.hash_ids[own] = -1 - np.arange(int(own.sum()), dtype=np.int64)
    table.notes.append(f"rate_scale {scale:g}: {int((~first).sum()):,} copies added beside the trace's "
                       f"{int(first.sum()):,} requests")


def prefix_parents(hash_ids: np.ndarray, hash_lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each request, the first earlier request sharing its longest run of leading block ids, and that run.

    ``hash_ids`` holds every request's ids one after another (``hash_lens[r]`` of them for request ``r``).
    Each position is one level of a trie: the node of a request's first ``j + 1`` ids is numbered by
    (its node at ``j``, its id ``j``), all requests at once; the request shares ``j + 1`` blocks when an
    earlier request reached the same node.

    Returns
    -------
    parent : ndarray of int64, shape (n,)
        The first request that reached the request's deepest shared node; -1 where no earlier request
        shares the first block.
    run : ndarray of int64, shape (n,)
        Shared leading blocks (0 where ``parent`` is -1).
    """
    n = hash_lens.size
    parent = np.full(n, -1, np.int64)
    run = np.zeros(n, np.int64)
    if hash_ids.size == 0:
        return parent, run
    dense = np.unique(hash_ids, return_inverse=True)[1].astype(np.int64)  # ids as 0 .. distinct - 1
    base = int(dense.max()) + 1
    starts = np.concatenate(([0], np.cumsum(hash_lens)))[:-1]
    order = np.argsort(-hash_lens, kind="stable")  # longest first: the requests at level j are a prefix
    desc = -hash_lens[order]
    node = np.zeros(n, np.int64)
    numbered = 1
    for j in range(int(hash_lens.max())):
        at = order[:np.searchsorted(desc, -j, side="left")]  # requests with more than j ids
        keys, inv = np.unique(node[at] * base + dense[starts[at] + j], return_inverse=True)
        first = np.full(keys.size, n, np.int64)
        np.minimum.at(first, inv, at)
        node[at] = numbered + inv
        numbered += keys.size
        seen = first[inv] < at
        parent[at[seen]] = first[inv][seen]
        run[at[seen]] = j + 1
    return parent, run


def table_workload(table: TraceTable, block_size: int) -> tuple[Workload, int]:
    """The workload of a (cut, scaled) trace table, and the prompt tokens its block ids say are shared."""
    # readers refuse unsorted traces and the options keep the order, so a parent always arrives first
    parent = parent_len = None
    shared = 0
    if table.hash_ids is not None:
        parent, run = prefix_parents(table.hash_ids, table.hash_lens)
        has = parent >= 0
        tokens = np.where(has, np.minimum(run * block_size,
                                          np.minimum(table.prompt, table.prompt[np.maximum(parent, 0)])), -1)
        parent = np.where(tokens > 0, parent, -1)
        parent_len = np.where(tokens > 0, tokens, -1)
        shared = int(np.maximum(parent_len, 0).sum())
    workload = Workload(prompt_len=table.prompt, output_len=table.output, arrival=table.arrival,
                        arrival_unit="s", parent=parent, parent_len=parent_len,
                        ids=_row_ids(table.lines))
    return workload, shared


def _row_ids(lines: np.ndarray) -> tuple[str, ...]:
    """``line-12`` for the request read from line 12; its rate-scale copies ``line-12.1``, ``line-12.2``..."""
    out, seen = [], {}
    for x in lines.tolist():
        k = seen.get(x, 0)
        seen[x] = k + 1
        out.append(f"line-{x}" if k == 0 else f"line-{x}.{k}")
    return tuple(out)


def measured_summary(table: TraceTable) -> dict[str, float] | None:
    """Percentiles (ms) of what a vllm-bench result measured, over its kept requests, with vLLM bench's
    definitions (TTFT, TPOT = (E2E - TTFT) / (output - 1), ITL over every gap, E2E)."""
    if table.measured is None:
        return None
    out: dict[str, float] = {}
    ttft, e2e = table.measured.get("ttft"), table.measured.get("e2e")
    series = {"ttft": ttft, "e2e": e2e}
    if ttft is not None and e2e is not None:
        many = table.output > 1
        series["tpot"] = ((e2e - ttft)[many] / (table.output[many] - 1)) if many.any() else None
    if table.measured_all_itl is not None:
        series["itl"] = table.measured_all_itl
    for key, values in series.items():
        if values is None:
            continue
        values = values[np.isfinite(values)]
        if values.size:
            for p in (50, 90, 99):
                out[f"{key}_p{p}_ms"] = float(np.percentile(values, p) * 1000.0)
            out[f"{key}_mean_ms"] = float(values.mean() * 1000.0)
    return out
