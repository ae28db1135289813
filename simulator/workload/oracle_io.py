"""Read the oracle's workload JSON into a :class:`Workload`; name results as the oracle does.

The oracle (``tests/data/oracle``, recorded from vLLM 0.33.0) accepts two
request forms, both read here:

* full: ``prompt_token_ids`` (the prompt is ``prefixes[prefix] + ids``);
* compact: ``prompt_len`` (``prefixes[prefix]`` plus a unique tail).

The simulator needs lengths and sharing only. For the full form, requests
sharing a named prefix share it; any other shared content is not detected
(the oracle's generator draws unique tails), which the docs state.
Arrivals are all ``arrival_step`` (engine steps) or all ``arrival_time``
(seconds).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np

from simulator.workload.requests import MAX_PRIORITY, Workload, WorkloadError


def workload_from_dict(data: dict[str, Any]) -> Workload:
    """Build a :class:`Workload` from the oracle's workload JSON object.

    Raises
    ------
    WorkloadError
        On a missing or malformed field; the message names it.
    """
    if not isinstance(data, dict) or not isinstance(data.get("requests"), list):
        raise WorkloadError("the workload needs a list of requests", field="requests")
    prefixes = data.get("prefixes") or {}
    if not isinstance(prefixes, dict):
        raise WorkloadError("must be an object of name -> token list", field="prefixes")
    names = list(prefixes)
    plen = []
    for name in names:
        toks = prefixes[name]
        if not isinstance(toks, list) or not toks:
            raise WorkloadError("must be a non-empty token list", field=f"prefixes.{name}")
        plen.append(len(toks))
    reqs = data["requests"]
    n = len(reqs)
    prompt = np.zeros(n, np.int64)
    output = np.zeros(n, np.int64)
    arrival = np.zeros(n, np.float64)
    pid = np.full(n, -1, np.int64)
    priority = np.zeros(n, np.int64)
    ids = []
    kinds = set()
    for i, r in enumerate(reqs):
        if not isinstance(r, dict):
            raise WorkloadError("must be an object", field=f"requests[{i}]")
        ids.append(str(r.get("id", i)))
        priority[i] = _priority(r.get("priority", 0), f"requests[{i}].priority")
        kinds.add(_read_request(i, r, prefixes, names, plen, prompt, output, arrival, pid))
    if len(kinds) > 1:
        raise WorkloadError("mix of arrival_time and arrival_step", field="requests")
    return Workload(
        prompt_len=prompt, output_len=output, arrival=arrival,
        arrival_unit=kinds.pop() if kinds else "step", prefix_id=pid,
        prefix_len=np.asarray(plen, np.int64), ids=tuple(ids), prefix_names=tuple(names), priority=priority,
    )



def _priority(v: Any, where: str) -> int:
    """A whole number (not a bool) of magnitude at most :data:`MAX_PRIORITY`, else a :class:`WorkloadError`."""
    if isinstance(v, bool) or not isinstance(v, int) or abs(v) > MAX_PRIORITY:
        raise WorkloadError(f"must be a whole number from {-MAX_PRIORITY:,} to {MAX_PRIORITY:,} "
                            f"(lower is served first with the priority policy), got {v!r}", field=where)
    return v


def _read_request(i: int, r: dict[str, Any], prefixes: dict, names: list[str], plen: list[int], prompt: np.ndarray,
                  output: np.ndarray, arrival: np.ndarray, pid: np.ndarray) -> str:
    """Writes request ``i``'s prompt and output lengths, arrival and prefix index into the columns; returns
    its arrival unit (``"s"`` or ``"step"``)."""
    p = r.get("prefix")
    base = 0
    if p:
        if p not in prefixes:
            raise WorkloadError(f"unknown prefix {p!r}", field=f"requests[{i}].prefix")
        pid[i] = names.index(p)
        base = plen[pid[i]]
    if "prompt_token_ids" in r:
        toks = r["prompt_token_ids"]
        if not isinstance(toks, list):
            raise WorkloadError("must be a list", field=f"requests[{i}].prompt_token_ids")
        prompt[i] = base + len(toks)
    elif "prompt_len" in r:
        try:
            prompt[i] = int(r["prompt_len"])
        except (TypeError, ValueError) as exc:
            raise WorkloadError("must be a whole number", field=f"requests[{i}].prompt_len") from exc
    else:
        raise WorkloadError("needs prompt_token_ids or prompt_len", field=f"requests[{i}]")
    if "max_tokens" not in r:
        raise WorkloadError("missing", field=f"requests[{i}].max_tokens")
    try:
        output[i] = int(r["max_tokens"])
    except (TypeError, ValueError) as exc:
        raise WorkloadError("must be a whole number", field=f"requests[{i}].max_tokens") from exc
    if "arrival_time" in r:
        arrival[i] = float(r["arrival_time"])
        return "s"
    arrival[i] = float(r.get("arrival_step", 0))
    return "step"


def load_json(path: str | Path) -> Any:
    """Read JSON, gzip-compressed when the name ends in ``.gz``."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def read_workload(path: str | Path) -> Workload:
    """Read an oracle workload file (``.json`` or ``.json.gz``)."""
    return workload_from_dict(load_json(path))


#: The CLI's name for :func:`workload_from_dict`.
load_workload = workload_from_dict
