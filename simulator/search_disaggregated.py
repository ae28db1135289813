"""xPyD splits of the deployment search's answer: is disaggregation cheaper or better at equal GPUs?

:func:`xpyd_alternatives` takes a :class:`simulator.search.SearchResult` whose answer is N replicas
of one shape, and simulates every split of N instances of that shape into x prefill and N - x decode
instances, and of N - 1 instances (one replica cheaper), judging each against the same SLO as the
search judges replicas (:func:`simulator.search_eval.judge`). Every split of N costs what the answer
costs; a split of N - 1 that meets the SLO is a cheaper answer. ``python -m simulator search
--disaggregated`` adds the rows to its output (``docs/disaggregated_serving.md``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from simulator.disaggregated import DisaggregatedDeployment, KvLink, Pool
from simulator.search_eval import default_max_model_len, judge, prepare_candidate
from simulator.search_space import SearchSpace, Slo
from simulator.specs import ModelSpec
from simulator.workload import Workload


def _as_cluster(res, instances: int) -> SimpleNamespace:
    """What :func:`judge` reads of a cluster, from a disaggregated result (the client's requests)."""
    totals = {**res.decode.totals, **{k: res.totals[k] for k in ("finished", "dropped_unservable", "unfinished")}}
    return SimpleNamespace(latency=res.latency, totals=totals, requests=res.decode.requests,
                           num_instances=instances, load=res.decode.load)


def _row(dep: DisaggregatedDeployment, res, trial) -> dict[str, Any]:
    return {"name": dep.name, "prefill_instances": dep.prefill.num_instances,
            "decode_instances": dep.decode.num_instances, "num_gpus": dep.num_gpus,
            "cost_per_hour": dep.cost_per_hour, "meets": trial.meets, "values": trial.values,
            "misses": list(trial.misses), "goodput": trial.goodput, "transfer_p90_s": res.transfer["p90_s"],
            "prefill_utilisation": res.pools["prefill"]["utilisation"],
            "decode_utilisation": res.pools["decode"]["utilisation"]}


def xpyd_alternatives(result, workload: Workload, model: ModelSpec, space: SearchSpace, slo: Slo, *,
                      link: KvLink | None = None) -> dict[str, Any] | None:
    """Every xPyD split of the answer's N instances and of N - 1, judged like the search's trials.

    Returns None when there is no answer or it has a single replica (no split), else
    ``{"shape", "aggregated": {"replicas", "cost_per_hour"}, "splits": [row, ...], "best": row or None}``
    where ``best`` is the cheapest split meeting the SLO (fewest GPUs, then the lowest first SLO
    figure); each row has the split, GPUs, cost, ``meets``, the SLO ``values``, ``misses``, goodput,
    transfer p90 and pool utilisations.
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
    for n in sorted({best.replicas - 1, best.replicas}):
        for x in range(1, n):
            pool = dict(config=prep.config, routing=space.routing, gpus_per_instance=cand.gpus_per_replica,
                        cost_per_hour=cand.price_per_replica, label=cand.label)
            dep = DisaggregatedDeployment(Pool(num_instances=x, **pool), Pool(num_instances=n - x, **pool),
                                          link or KvLink())
            res = dep.run(workload)
            rows.append(_row(dep, res, judge(_as_cluster(res, n), workload, slo, dep.cost_per_hour)))
    first = slo.targets[0].label
    meeting = [r for r in rows if r["meets"]]
    top = min(meeting, key=lambda r: (r["cost_per_hour"], r["num_gpus"], r["values"].get(first) or 0.0),
              default=None)
    return {"shape": cand.label, "aggregated": {"replicas": best.replicas, "cost_per_hour": best.cost_per_hour},
            "splits": rows, "best": top}


__all__ = ["xpyd_alternatives"]
