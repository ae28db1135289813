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
the same limits (field ``disaggregated``). A search with ``check_seeds`` K (a generated workload) adds to that
stage the answer, and one replica fewer, simulated on K more seeds (:func:`simulator.search.check_seeds`), priced
as K runs of ``space.max_replicas`` and K of one fewer of the heaviest shape
(:func:`simulator.batch.budget.price_seed_check`; field ``check_seeds``). Every run is priced by
:func:`simulator.batch.budget.price_run`, the one price of a simulation: a speculative shape by its drafted output
tokens and requests (``SECONDS_PER_DRAFTED_OUTPUT_TOKEN``, ``SECONDS_PER_SPECULATIVE_REQUEST``). No ORM here: a snapshot in, a :class:`SearchPrice` out (also each shape's
price, from which a running search's time left is estimated).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from planner.sweeps.pricing import chunk_max_seconds, run_max_bytes
from simulator.batch import OverBudget, Price, WorkloadSize, budget
from simulator.search import default_max_model_len, prepare_candidate

__all__ = ["OverBudget", "SearchPrice", "check_search", "price_pools", "price_search", "price_stage"]


@dataclass(frozen=True)
class SearchPrice:
    """What pricing a search finds in one pass over its shapes."""

    #: The most memory of one simulation and the most time of one shape's replicas search.
    heaviest: Price
    #: The same of the last stage: the xPyD splits asked and the seed check (``Price()`` without either).
    stage: Price
    #: ``{candidate index: [least cost per hour, estimated seconds of one simulation]}`` of every shape that
    #: will be simulated: what a running search's time left is estimated from
    #: (:func:`planner.search.selectors.time_left`). The least cost is the shape's fewest replicas that could
    #: meet the SLO times the price of one: a shape whose least cost is not below the best answer found is
    #: skipped without a simulation.
    shapes: dict[int, list[float]] = field(default_factory=dict)
    #: The whole search at its worst: every shape's replicas search up to ``space.max_replicas`` one after
    #: another, plus the last stage (pruning only makes it less). What counts against its owner's queue
    #: (``KVP_USER_QUEUE_SECONDS``, :mod:`planner.jobs.quota`).  # seconds
    total_seconds: float = 0.0


def _max(a: Price, b: Price) -> Price:
    return Price(max(a.memory_bytes, b.memory_bytes), max(a.seconds, b.seconds))


def _splits_price(size: WorkloadSize, config, splits: list[tuple[int, int]], ranks: int = 1) -> Price:
    """The xPyD stage on one shape: each split one run of its x + y instances (of ``ranks`` engines each, a DP
    group's), one after another."""
    runs = [budget.price_run(size, config, instances=(x + y) * ranks) for x, y in splits]
    return Price(max((p.memory_bytes for p in runs), default=0), sum(p.seconds for p in runs))


def _stage_price(size: WorkloadSize, config, splits: list[tuple[int, int]] | None, max_replicas: int,
                 seeds: int, ranks: int = 1) -> tuple[Price, Price]:
    """The last stage on one shape as its answer: ``(xPyD splits, seed check)``, each ``Price()`` when not asked."""
    xpyd = _splits_price(size, config, splits, ranks) if splits else Price()
    seeded = budget.price_seed_check(size, config, max_replicas, seeds) if seeds else Price()
    return xpyd, seeded


def price_search(workload, model, space, slo, splits: list[tuple[int, int]] | None = None,
                 seeds: int = 0) -> SearchPrice:
    """Price every shape that sizes and can meet the SLO (rejected shapes are never simulated), once; the last
    stage (``splits``, ``seeds`` more seeds) for the heaviest answer it may have."""
    size = WorkloadSize.of(workload)
    max_model_len = space.max_model_len or default_max_model_len(workload, model)
    heaviest, stage, shapes, total = Price(), Price(), {}, 0.0
    for i, cand in enumerate(space.candidates()):
        p = prepare_candidate(i, cand, model, space, max_model_len, workload, slo)
        if p.config is None:
            continue
        ranks = cand.data_parallel if p.group is not None else 1  # a DP group: one engine a rank
        shape = budget.price_replicas_search(size, p.config, space.max_replicas * ranks)
        heaviest, total = _max(heaviest, shape), total + shape.seconds
        xpyd, seeded = _stage_price(size, p.config, splits, space.max_replicas * ranks, seeds, ranks)
        stage = _max(stage, Price(max(xpyd.memory_bytes, seeded.memory_bytes), xpyd.seconds + seeded.seconds))
        shapes[i] = [round(p.min_replicas * p.candidate.price_per_replica, 6),
                     round(budget.price_run(size, p.config, instances=ranks).seconds, 4)]
    return SearchPrice(heaviest, stage, shapes, total + stage.seconds)


def price_stage(workload, model, space, slo, answer: dict, dis: dict | None, seeds: int) -> Price:
    """The last stage for the answer found (``answer``: the result's ``best``, its shape and replicas): its xPyD
    splits of N and N - 1 instances (``dis``) and its seed check (``seeds``). What the stage's chunk is
    estimated at once the answer is known, for the time left (the limit was checked at the heaviest answer):
    seconds in the unit of the shape chunks' costs, its simulations times one simulation of one instance."""
    from simulator.search import split_counts

    index, replicas = int(answer["index"]), int(answer["replicas"])
    max_model_len = space.max_model_len or default_max_model_len(workload, model)
    p = prepare_candidate(index, space.candidates()[index], model, space, max_model_len, workload, slo)
    if p.config is None:
        return Price()
    splits = None if dis is None else split_counts(replicas, dis.get("prefill_instances"), dis.get("decode_instances"))
    size = WorkloadSize.of(workload)
    ranks = p.candidate.data_parallel if p.group is not None else 1  # a DP group's splits: one engine a rank
    xpyd, seeded = _stage_price(size, p.config, splits, replicas * ranks, seeds, ranks)
    # In the shape chunks' unit (one simulation of one instance, shapes[i][1]): the time left scales every chunk's
    # cost by what the finished shape chunks took per unit, which holds their replica counts already; the stage's
    # own price at ``replicas`` instances would count them twice (shown 7.5 s with 1.4 s left).
    simulations = len(splits or ()) + seeds * len([n for n in (replicas, replicas - 1) if n >= 1])
    unit = budget.price_run(size, p.config).seconds
    joint = price_pools(workload, model, space, slo, worst=False) if (dis or {}).get("pools") else Price()
    return Price(max(xpyd.memory_bytes, seeded.memory_bytes, joint.memory_bytes), simulations * unit + joint.seconds)


def price_pools(workload, model, space, slo, *, worst: bool = True) -> Price:
    """The joint prefill/decode pools search (:func:`simulator.search.search_pools`, ``disaggregated.pools``)
    in the shape chunks' unit. ``worst``: its most simulations (every pooled shape's prefill and decode counts
    found by doubling and bisection up to ``space.max_replicas``, the decode sizing tried behind
    ``1 + FRONT_MARGIN`` prefill counts, ``MAX_PAIR_CHECKS`` pairs), what the limit is checked at; else the
    simulations a search typically makes (one count search a shape and role, two pairs), for the time left."""
    import math

    from simulator.search.pools import FRONT_MARGIN, MAX_PAIR_CHECKS, first_tokens

    max_model_len = space.max_model_len or default_max_model_len(workload, model)
    size, first = WorkloadSize.of(workload), WorkloadSize.of(first_tokens(workload))
    top = space.max_replicas
    count_runs = 2 * math.ceil(math.log2(max(2, top))) + 1 if worst else math.ceil(math.log2(max(2, top))) + 1
    retries, pairs = (1 + FRONT_MARGIN, MAX_PAIR_CHECKS) if worst else (1, 2)
    memory, seconds, dearest = 0, 0.0, 0.0
    for i, cand in enumerate(space.candidates()):
        p = prepare_candidate(i, cand, model, space, max_model_len, workload, slo)
        if p.config is None:
            continue
        ranks = cand.data_parallel if p.group is not None else 1  # a DP group's pool: one engine a rank
        prefill = budget.price_run(first, p.config, instances=(top if worst else 1) * ranks)
        decode = budget.price_run(size, p.config, instances=(2 * top if worst else 2) * ranks)
        memory = max(memory, prefill.memory_bytes, decode.memory_bytes)
        seconds += count_runs * (prefill.seconds + retries * decode.seconds)
        dearest = max(dearest, decode.seconds)
    return Price(memory, seconds + pairs * dearest)


def check_search(workload, model, space, slo, splits: list[tuple[int, int]] | None = None,
                 seeds: int = 0, pools: bool = False) -> SearchPrice:
    """The search's price (:func:`price_search`); raise :class:`OverBudget` (field ``workload``) when the
    heaviest shape is over a limit, or when the last stage is: field ``disaggregated`` with ``splits``, else
    ``check_seeds``."""
    priced = price_search(workload, model, space, slo, splits, seeds)
    if pools:  # the pools search runs in the last stage too
        joint = price_pools(workload, model, space, slo)
        budget.check(joint, max_bytes=run_max_bytes(), max_seconds=chunk_max_seconds(),
                     what="The joint prefill/decode pools search", field="disaggregated.pools",
                     advice="search fewer shapes (GPUs, TP, precisions), use fewer or shorter requests, or a smaller "
                            "space.max_replicas")
        stage = Price(max(priced.stage.memory_bytes, joint.memory_bytes), priced.stage.seconds + joint.seconds)
        priced = replace(priced, stage=stage, total_seconds=priced.total_seconds + joint.seconds)
    price, stage = priced.heaviest, priced.stage
    budget.check(price, max_bytes=run_max_bytes(), max_seconds=chunk_max_seconds(),
                 what="One deployment shape of this search", field="workload",
                 advice="use fewer or shorter requests, or a smaller space.max_replicas")
    seeded = f"the answer on {seeds} more seed{'s' if seeds > 1 else ''}" if seeds else ""
    if splits:
        also = f" and {seeded}" if seeds else ""
        budget.check(stage, max_bytes=run_max_bytes(), max_seconds=chunk_max_seconds(),
                     what=f"The prefill/decode stage ({len(splits)} splits of up to {space.max_replicas} "
                          f"instances{also})",
                     field="disaggregated", advice="restrict disaggregated.prefill_instances or decode_instances, "
                     "use fewer or shorter requests, or a smaller space.max_replicas" + (
                         ", or fewer check_seeds" if seeds else ""))
    elif seeds:
        budget.check(stage, max_bytes=run_max_bytes(), max_seconds=chunk_max_seconds(),
                     what=f"The seed check ({seeded}, up to {space.max_replicas} replicas, and one fewer)",
                     field="check_seeds", advice="ask fewer check_seeds (0: none), use fewer or shorter requests, "
                     "or a smaller space.max_replicas")
    return priced
