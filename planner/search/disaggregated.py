"""Prefill/decode (xPyD) splits in a deployment search (``docs/disaggregated_serving.md``).

A search definition may carry ``"disaggregated": {"link_gbps": 50, "link_latency_s": 0.0001,
"routing": "least-loaded", "prefill_instances": [1, 2], "decode_instances": [2, 3]}`` (every field
optional; ``true`` takes the defaults). Once the cheapest aggregated answer (N replicas of one shape)
is known, a last stage of the search simulates the splits of N and of N - 1 instances of that shape
into x prefill and y decode instances (:func:`simulator.search.disaggregated.xpyd_alternatives`),
judged against the same SLO, and says which wins at equal GPUs and cost. ``prefill_instances`` and
``decode_instances`` restrict the pool sizes tried. ``"pools": true`` also searches a prefill pool and a decode
pool of their own shapes and counts among the whole space (:func:`run_pools`). This module validates the object (every bad field
named), prices the stage and runs it. No ORM.
"""

from __future__ import annotations

from typing import Any

from config.strict_input import unknown_field_errors
from planner.errors import field_and_message
from planner.sweeps.disaggregated import _number
from simulator.cluster import ClusterError, parse_routing

FIELDS = ("link_gbps", "link_latency_s", "routing", "prefill_instances", "decode_instances", "pools")
DEFAULTS = {"link_gbps": 50.0, "link_latency_s": 1e-4, "routing": None, "prefill_instances": None,
            "decode_instances": None, "pools": False}
EXAMPLE = {"link_gbps": 50, "link_latency_s": 0.0001, "routing": "least-loaded"}


def _counts(raw: Any, field: str, most: int, add) -> list[int] | None:
    """A list of pool sizes (each a whole number from 1 to ``most``), or None for any."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        add(field, "must be a non-empty list of instance counts, e.g. [1, 2]")
        return None
    bad = [v for v in raw if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= most]
    if bad:
        zero = " (a pool of zero instances is no pool: give 1 or more)" if 0 in bad else ""
        add(field, f"every count must be a whole number of instances from 1 to {most} (space.max_replicas - 1), "
                   f"got {bad[0]!r}{zero}")
        return None
    return sorted(set(raw))


def parse(raw: Any, *, max_replicas: int, add) -> dict | None:
    """The ``disaggregated`` object with defaults filled in, or None (off or invalid); ``add(field, message)``."""
    if raw is None or raw is False:
        return None
    if raw is True:
        raw = {}
    if not isinstance(raw, dict):
        add("disaggregated", f"must be true or an object with {', '.join(FIELDS)}")
        return None
    n_errors = 0

    def bad(field: str, message: str) -> None:
        nonlocal n_errors
        n_errors += 1
        add(field, message)

    for field, messages in unknown_field_errors(raw, FIELDS, prefix="disaggregated").items():
        bad(field, messages[0])
    out = {**DEFAULTS, **{k: v for k, v in raw.items() if k in FIELDS}}
    if not isinstance(max_replicas, int) or max_replicas < 2:
        bad("disaggregated", "needs space.max_replicas of 2 or more: a split has a prefill and a decode instance")
    if not _number(out["link_gbps"], 0.0, 1e5, positive=True):
        bad("disaggregated.link_gbps", f"must be a bandwidth in GB/s above 0 and at most 100,000 (one 400 Gb/s NIC "
                                       f"is 50 GB/s), got {out['link_gbps']!r}")
    if not _number(out["link_latency_s"], 0.0, 10.0, positive=False):
        bad("disaggregated.link_latency_s", f"must be a number of seconds from 0 to 10, got {out['link_latency_s']!r}")
    if out["routing"] is not None:
        try:
            out["routing"] = str(parse_routing(str(out["routing"])))
        except ClusterError as exc:
            bad("disaggregated.routing", field_and_message(exc)[1])  # (its field: routing)
    if not isinstance(out["pools"], bool):
        bad("disaggregated.pools", f"must be true or false (also search a prefill pool and a decode pool of their "
                                   f"own shapes jointly), got {out['pools']!r}")
    most = max(1, (max_replicas if isinstance(max_replicas, int) else 2) - 1)
    for k in ("prefill_instances", "decode_instances"):
        if out[k] is not None:
            out[k] = _counts(out[k], f"disaggregated.{k}", most, bad)
    if not n_errors and not splits_priced(out, max_replicas):
        bad("disaggregated.decode_instances" if out["decode_instances"] else "disaggregated.prefill_instances",
            f"no split of 2 to {max_replicas} instances (space.max_replicas) has these pool sizes")
    if n_errors:
        return None
    return {**out, "link_gbps": float(out["link_gbps"]), "link_latency_s": float(out["link_latency_s"])}


def splits_priced(dis: dict, max_replicas: int) -> list[tuple[int, int]]:
    """The heaviest list of splits the stage may try: over the answers of 2 to ``max_replicas`` replicas,
    the one with the most instances simulated in all."""
    from simulator.search import split_counts

    lists = [split_counts(n, dis.get("prefill_instances"), dis.get("decode_instances"))
             for n in range(2, max_replicas + 1)]
    return max(lists, key=lambda splits: sum(x + y for x, y in splits), default=[])


def run_stage(result: dict, dis: dict, workload, model, space, slo) -> dict | None:
    """The xPyD splits of a finished search's answer (``result``: ``SearchResult.to_dict()``)."""
    from types import SimpleNamespace

    from simulator.cluster import KvLink
    from simulator.search import Outcome, xpyd_alternatives

    best = None if result.get("best") is None else Outcome.from_dict(result["best"])
    return xpyd_alternatives(SimpleNamespace(best=best), workload, model, space, slo,
                             link=KvLink(dis["link_gbps"], dis["link_latency_s"]), routing=dis.get("routing"),
                             prefill_counts=dis.get("prefill_instances"), decode_counts=dis.get("decode_instances"))


def run_pools(result: dict, dis: dict, workload, model, space, slo) -> dict:
    """The joint prefill/decode pools search (``disaggregated.pools``,
    :func:`simulator.search.search_pools`) with its verdict against the gathered answer (``result``)."""
    from types import SimpleNamespace

    from simulator.cluster import KvLink
    from simulator.search import Outcome, pools_verdict, search_pools

    pools = search_pools(workload, model, space, slo, link=KvLink(dis["link_gbps"], dis["link_latency_s"]),
                         routing=dis.get("routing"))
    best = None if result.get("best") is None else Outcome.from_dict(result["best"])
    return {**pools, "verdict": pools_verdict(pools, SimpleNamespace(best=best))}
