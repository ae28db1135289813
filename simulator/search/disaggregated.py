"""xPyD splits of the deployment search's answer: is disaggregation cheaper or better at equal GPUs?

:func:`xpyd_alternatives` takes a :class:`simulator.search.deployments.SearchResult` whose answer is N replicas
of one shape, and simulates every split of N instances of that shape into x prefill and N - x decode
instances, and of N - 1 instances (one replica cheaper), judging each against the same SLO as the
search judges replicas (:func:`simulator.search.evaluate.judge`). Every split of N costs what the answer
costs; a split of N - 1 that meets the SLO is a cheaper answer. :func:`verdict` says which of the
aggregated answer and the best split wins, and why. ``python -m simulator search --disaggregated``
and the search API's ``disaggregated`` object add the rows to their output
(``docs/disaggregated_serving.md``).
"""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

from simulator.base import ModelSpec
from simulator.cluster import DisaggregatedDeployment, KvLink, Pool
from simulator.search.evaluate import default_max_model_len, judge, prepare_candidate
from simulator.search.space import SearchSpace, Slo, format_seconds
from simulator.workload import Workload


def as_cluster(res, instances: int) -> SimpleNamespace:
    """What :func:`judge` reads of a cluster, from a disaggregated result (the client's requests)."""
    totals = {**res.decode.totals, **{k: res.totals[k] for k in ("finished", "dropped_unservable", "unfinished")}}
    return SimpleNamespace(latency=res.latency, totals=totals, requests=res.decode.requests,
                           num_instances=instances, load=res.decode.load)


def kv_bytes_per_token(d) -> int:
    """KV bytes one token of a request moves into the decode shape ``d`` (a prepared candidate): what one of its
    engines (a DP rank of a DP group) holds, ``kv_bytes_per_block`` x the rank's TP x PP GPUs / ``block_size``
    (:class:`simulator.cluster.DisaggregatedDeployment`'s default for a pool of single engines).  # bytes"""
    cfg, c = d.config, d.candidate
    return max(1, round(cfg.kv_bytes_per_block * c.tensor_parallel * c.pipeline_parallel / cfg.block_size))


def _row(dep: DisaggregatedDeployment, res, trial) -> dict[str, Any]:
    return {"name": dep.name, "prefill_instances": dep.prefill.num_instances,
            "decode_instances": dep.decode.num_instances, "num_gpus": dep.num_gpus,
            "cost_per_hour": dep.cost_per_hour, "meets": trial.meets, "values": trial.values,
            "misses": list(trial.misses), "goodput": trial.goodput,
            "output_tokens_per_s": trial.output_tokens_per_s,
            "cost_per_million_tokens": trial.cost_per_million_tokens, "transfer_p90_s": res.transfer["p90_s"],
            "prefill_utilisation": res.pools["prefill"]["utilisation"],
            "decode_utilisation": res.pools["decode"]["utilisation"]}


def split_counts(replicas: int, prefill_counts: Iterable[int] | None = None,
                 decode_counts: Iterable[int] | None = None) -> list[tuple[int, int]]:
    """``(x, y)`` splits of ``replicas - 1`` and ``replicas`` instances, x prefill and y decode (both >= 1),
    kept when x is in ``prefill_counts`` and y in ``decode_counts`` (None: any)."""
    pre = None if prefill_counts is None else set(prefill_counts)
    dec = None if decode_counts is None else set(decode_counts)
    return [(x, n - x) for n in sorted({replicas - 1, replicas}) for x in range(1, n)
            if (pre is None or x in pre) and (dec is None or n - x in dec)]


def _aggregated(best, gpus_per_replica: int) -> dict[str, Any]:
    """The answer as the comparison shows it: replicas, GPUs, cost and the SLO figures of its trial."""
    trial = next((t for t in best.trials if t.num_instances == best.replicas), None)
    return {"replicas": best.replicas, "cost_per_hour": best.cost_per_hour,
            "num_gpus": gpus_per_replica * best.replicas,
            "values": None if trial is None else dict(trial.values),
            "output_tokens_per_s": None if trial is None else trial.output_tokens_per_s}


def xpyd_alternatives(result, workload: Workload, model: ModelSpec, space: SearchSpace, slo: Slo, *,
                      link: KvLink | None = None, routing: str | None = None,
                      prefill_counts: Iterable[int] | None = None,
                      decode_counts: Iterable[int] | None = None) -> dict[str, Any] | None:
    """Every xPyD split of the answer's N instances and of N - 1, judged like the search's trials.

    Returns None when there is no answer or it has a single replica (no split), else
    ``{"shape", "aggregated": {"replicas", "cost_per_hour", "num_gpus", "values", "output_tokens_per_s"},
    "splits": [row, ...], "best": row or None, "verdict": {...}}`` where ``best`` is the cheapest split
    meeting the SLO (fewest GPUs, then the lowest first SLO figure); each row has the split, GPUs, cost,
    ``meets``, the SLO ``values``, ``misses``, goodput, output tokens/s, transfer p90 and pool
    utilisations. ``routing`` is both pools' router (default the space's); ``prefill_counts`` and
    ``decode_counts`` restrict the pool sizes tried (:func:`split_counts`).
    """
    best = result.best
    if best is None or best.replicas is None or best.replicas < 2:
        return None
    cand = space.candidates()[best.index]
    mml = space.max_model_len or default_max_model_len(workload, model)
    prep = prepare_candidate(best.index, cand, model, space, mml, workload, slo)
    if prep.config is None:
        return None
    rows = []
    group = prep.group  # a DP group's answer: each pool's instance is one DP group (round-robin across groups)
    pool = dict(config=prep.config, routing="round-robin" if group is not None else routing or space.routing,
                gpus_per_instance=cand.gpus_per_replica, cost_per_hour=cand.price_per_replica, label=cand.label,
                group=group)
    for x, y in split_counts(best.replicas, prefill_counts, decode_counts):
        dep = DisaggregatedDeployment(Pool(num_instances=x, **pool), Pool(num_instances=y, **pool),
                                      link or KvLink(), kv_bytes_per_token=kv_bytes_per_token(prep))
        res = dep.run(workload)
        rows.append(_row(dep, res, judge(as_cluster(res, x + y), workload, slo, dep.cost_per_hour)))
    first = slo.targets[0].label
    meeting = [r for r in rows if r["meets"]]
    top = min(meeting, key=lambda r: (r["cost_per_hour"], r["num_gpus"], r["values"].get(first) or 0.0),
              default=None)
    out = {"shape": cand.label, "aggregated": _aggregated(best, cand.gpus_per_replica), "splits": rows, "best": top}
    out["verdict"] = verdict(out, slo)
    return out


def _figures(values: dict[str, Any] | None) -> str:
    return ", ".join(f"{k} {format_seconds(v)}" for k, v in (values or {}).items() if v is not None)


def _same_gpus(alt: dict[str, Any]) -> dict[str, Any] | None:
    """The best split of as many GPUs as the answer: meeting first, then the lowest first SLO figure."""
    n = alt["aggregated"]["num_gpus"]
    same = [r for r in alt["splits"] if r["num_gpus"] == n]
    return min(same, key=lambda r: (not r["meets"], next(iter(r["values"].values()), None) or float("inf")),
               default=None)


def verdict(alt: dict[str, Any], slo: Slo) -> dict[str, Any]:
    """Which wins, aggregated or disaggregated, and why: ``{"winner", "split", "reason"}``.

    A split of fewer GPUs that meets the SLO is cheaper: disaggregated wins. Else, at equal GPUs and
    cost, a split that meets it wins when its figure for the SLO's first target is lower than the
    aggregated answer's; otherwise (no split meets it, or it is slower on that target) aggregated wins.
    """
    agg, best = alt["aggregated"], alt["best"]
    agg_text = f"{agg['replicas']} aggregated replicas (${agg['cost_per_hour']:,.2f}/h: {_figures(agg['values'])})"
    if best is not None and best["num_gpus"] < agg["num_gpus"]:
        return {"winner": "disaggregated", "split": best["name"],
                "reason": f"{best['name']} meets the SLO with {best['num_gpus']} GPUs at "
                          f"${best['cost_per_hour']:,.2f}/h ({_figures(best['values'])}), cheaper than {agg_text}"}
    same = _same_gpus(alt)
    if same is None:
        return {"winner": "aggregated", "split": None, "reason": f"no split was tried; the answer is {agg_text}"}
    if not same["meets"]:
        return {"winner": "aggregated", "split": same["name"],
                "reason": f"no split of {agg['num_gpus']} GPUs meets the SLO (the closest, {same['name']}, "
                          f"misses: {'; '.join(same['misses'])}); the answer is {agg_text}"}
    first = slo.targets[0].label
    a, d = (agg["values"] or {}).get(first), same["values"].get(first)
    wins = a is not None and d is not None and d < a
    return {"winner": "disaggregated" if wins else "aggregated", "split": same["name"],
            "reason": f"at {agg['num_gpus']} GPUs and ${agg['cost_per_hour']:,.2f}/h both meet the SLO; "
                      f"{first} is {_one(d)} for {same['name']} against {_one(a)} aggregated"
                      f"{_trade(same, agg, slo, wins)}"}


def _one(v: float | None) -> str:
    return "n/a" if v is None else format_seconds(v)


def _trade(split: dict[str, Any], agg: dict[str, Any], slo: Slo, split_wins: bool) -> str:
    """The other targets on which the loser is the better one (what choosing the winner gives up)."""
    loser, other, name = (agg, split, "aggregated") if split_wins else (split, agg, split["name"])
    better = [t.label for t in slo.targets[1:]
              if (loser["values"] or {}).get(t.label) is not None and (other["values"] or {}).get(t.label) is not None
              and loser["values"][t.label] < other["values"][t.label]]
    return "".join(f"; {name} is better on {lab} ({_one(loser['values'][lab])} against "
                   f"{_one(other['values'][lab])})" for lab in better)


__all__ = ["as_cluster", "kv_bytes_per_token", "split_counts", "verdict", "xpyd_alternatives"]
