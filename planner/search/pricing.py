"""Price a deployment search before it is queued (issue 23: every run priced before it runs).

A search simulates, shape after shape, replica counts of each deployment shape that survives sizing and
the latency floors (``simulator/search/deployments.py``); how many it simulates depends on its pruning, which cannot
be known before it runs. What can be priced is each shape's worst case: its whole replicas search up to
``space.max_replicas`` (:func:`simulator.batch.budget.price_replicas_search`). The heaviest shape must fit one
chunk's time limit (``KVP_CHUNK_MAX_SECONDS``) and its largest simulation the memory limit of one
simulation call (``KVP_RUN_MAX_BYTES``); otherwise the search is refused with a 400 that states the
limit and the estimate. A search with ``disaggregated`` adds a last stage, the prefill/decode splits of
the answer (``planner/search/disaggregated.py``): priced for the largest answer (``space.max_replicas``
replicas of the heaviest shape), each split as one run of its instances, one after another, it must fit
the same limits (field ``disaggregated``). No ORM here: a snapshot in, a :class:`SearchPrice` out (also each shape's
price, from which a running search's time left is estimated).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.sweeps.pricing import chunk_max_seconds, run_max_bytes
from simulator.batch import OverBudget, Price, WorkloadSize, budget
from simulator.search import default_max_model_len, prepare_candidate

__all__ = ["OverBudget", "SearchPrice", "price_search", "check_search"]


@dataclass(frozen=True)
class SearchPrice:
    """What pricing a search finds in one pass over its shapes."""

    #: The most memory of one simulation and the most time of one shape's replicas search.
    heaviest: Price
    #: The same of the xPyD stage over the splits asked (``Price()`` without).
    stage: Price
    #: ``{candidate index: [least cost per hour, estimated seconds of one simulation]}`` of every shape that
    #: will be simulated: what a running search's time left is estimated from
    #: (:func:`planner.search.selectors.time_left`). The least cost is the shape's fewest replicas that could
    #: meet the SLO times the price of one: a shape whose least cost is not below the best answer found is
    #: skipped without a simulation.
    shapes: dict[int, list[float]] = field(default_factory=dict)


def _max(a: Price, b: Price) -> Price:
    return Price(max(a.memory_bytes, b.memory_bytes), max(a.seconds, b.seconds))


def _splits_price(size: WorkloadSize, config, splits: list[tuple[int, int]]) -> Price:
    """The xPyD stage on one shape: each split one run of its x + y instances, one after another."""
    runs = [budget.price_run(size, config, instances=x + y) for x, y in splits]
    return Price(max((p.memory_bytes for p in runs), default=0), sum(p.seconds for p in runs))


def price_search(workload, model, space, slo, splits: list[tuple[int, int]] | None = None) -> SearchPrice:
    """Price every shape that sizes and can meet the SLO (rejected shapes are never simulated), once."""
    size = WorkloadSize.of(workload)
    max_model_len = space.max_model_len or default_max_model_len(workload, model)
    heaviest, stage, shapes = Price(), Price(), {}
    for i, cand in enumerate(space.candidates()):
        p = prepare_candidate(i, cand, model, space, max_model_len, workload, slo)
        if p.config is None:
            continue
        heaviest = _max(heaviest, budget.price_replicas_search(size, p.config, space.max_replicas))
        if splits:
            stage = _max(stage, _splits_price(size, p.config, splits))
        shapes[i] = [round(p.min_replicas * p.candidate.price_per_replica, 6),
                     round(budget.price_run(size, p.config).seconds, 4)]
    return SearchPrice(heaviest, stage, shapes)


def check_search(workload, model, space, slo, splits: list[tuple[int, int]] | None = None) -> SearchPrice:
    """The search's price (:func:`price_search`); raise :class:`OverBudget` (field ``workload``) when the
    heaviest shape is over a limit, or (field ``disaggregated``) when the xPyD stage over ``splits`` is."""
    priced = price_search(workload, model, space, slo, splits)
    price, stage = priced.heaviest, priced.stage
    budget.check(price, max_bytes=run_max_bytes(), max_seconds=chunk_max_seconds(),
                 what="One deployment shape of this search", field="workload",
                 advice="use fewer or shorter requests, or a smaller space.max_replicas")
    if splits:
        budget.check(stage, max_bytes=run_max_bytes(), max_seconds=chunk_max_seconds(),
                     what=f"The prefill/decode stage ({len(splits)} splits of up to {space.max_replicas} instances)",
                     field="disaggregated", advice="restrict disaggregated.prefill_instances or decode_instances, "
                     "use fewer or shorter requests, or a smaller space.max_replicas")
    return priced
