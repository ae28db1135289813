"""How many replicas for this traffic: the smallest instance count meeting latency SLOs (issue 8).

Input is a one-simulation definition (model + GPU or engine, a generated
workload with arrivals in seconds) plus ``slo`` and optionally ``cluster``
(routing, router delay) and ``max_instances``; the answer comes from
:func:`simulator.cluster.replicas.smallest_replicas` on the sized engine (its roofline
clock when the definition names a model and a GPU). No ORM beyond the
catalog lookups of :func:`planner.sweeps.definition.validate`. The search is priced first
(:func:`check_replicas`: refused over ``KVP_RUN_MAX_BYTES`` or the chunk limit ``KVP_CHUNK_MAX_SECONDS``,
:mod:`planner.sweeps.pricing`); within ``KVP_INLINE_MAX_SECONDS`` it runs in the web request, in a child process
stopped after ``KVP_SYNC_HARD_SECONDS`` (:mod:`planner.sweeps.bounded`), else on a worker (:mod:`planner.runs`).
:func:`answer_replicas` shapes the same answer either way.
"""

from __future__ import annotations

from typing import Any

from planner.api.validation import context_problems
from planner.errors import FieldErrors
from planner.sampling_words import sampling_answer
from planner.sweeps import definition as defn
from planner.sweeps import pricing
from planner.sweeps.bounded import run_bounded
from simulator.base.errors import FieldError
from simulator.batch import WorkloadSize

#: Most instances the search may try, and most requests it may simulate per try.
MAX_REPLICAS = 64
MAX_REPLICA_REQUESTS = 2_000


def _search(wl, config, slo: dict, cl: dict, max_n: int, group: dict | None = None):
    """The search itself (in a child process of the web request, :func:`planner.sweeps.bounded.run_bounded`, or
    on a worker). ``group``: the point's DP group (``point["data_parallel"]``): a replica is one DP group."""
    from simulator.cluster import smallest_replicas

    return smallest_replicas(wl, config, slo_ttft_s=slo.get("ttft_s"), slo_itl_s=slo.get("itl_s"),
                             routing=cl["routing"], router_delay_s=cl["router_delay_s"], max_instances=max_n,
                             percentile=slo.get("percentile", "p90"), simulate=_groups(wl, config, group, slo))


def _groups(wl, config, group: dict | None, slo: dict | None = None):
    """``N -> ClusterResult`` of ``N`` DP groups behind a round-robin router (:mod:`planner.sweeps.data_parallel`),
    or None for a single engine's replicas."""
    if group is None:
        return None
    from planner.sweeps import data_parallel as dpg

    slo = slo or {}
    return lambda n: dpg.run(wl, config, group, n, slo_ttft_s=slo.get("ttft_s"), slo_itl_s=slo.get("itl_s")).cluster


def check_replicas(raw: Any, *, owner) -> dict:
    """Validate a replicas search without running it, every problem at once; raises
    :class:`planner.sweeps.definition.DefinitionError` with field messages, else returns what
    :func:`find_replicas` runs (the page checks a form with refused fields this way, for the others)."""
    from config.strict_input import unknown_field_errors
    from planner.sweeps.points import engine_config
    from planner.sweeps.runner import workload_of

    if not isinstance(raw, dict):
        raise defn.DefinitionError({"non_field_errors": ["must be a JSON object"]})
    err = FieldErrors()
    data = dict(raw)
    unknown = unknown_field_errors(data, [*sorted(defn.KNOWN_FIELDS), "max_instances"])
    if unknown:  # (before the other checks: a misspelt max_instances or slo is named as such)
        raise defn.DefinitionError(unknown)
    max_n = data.pop("max_instances", 16)
    if isinstance(max_n, bool) or not isinstance(max_n, int) or not 1 <= max_n <= MAX_REPLICAS:
        err.add("max_instances", f"must be a whole number from 1 to {MAX_REPLICAS}")
        max_n = 16
    if data.get("slo") is None:
        err.add("slo", "give the latency targets: {\"ttft_s\": ..., \"itl_s\": ...}")
    cluster = data.pop("cluster", None)
    try:
        _, snapshot, points = defn.validate({**data, **({"cluster": cluster} if cluster else {})}, owner=owner,
                                            single=True)
    except defn.DefinitionError as exc:
        err.merge(exc)
        _context_beside(data, owner, err)
        err.raise_if_any()
        raise
    wl_base = snapshot["workload"]
    if wl_base["arrival_unit"] != "s":
        err.add("workload.spec.arrival", "give arrivals in seconds (e.g. {\"kind\": \"poisson\", \"rate\": 20, "
                                         "\"unit\": \"s\"}): latency targets are in seconds")
    if wl_base["n"] > MAX_REPLICA_REQUESTS:
        err.add("workload.spec.n", f"at most {MAX_REPLICA_REQUESTS:,} requests (each replica count tried simulates "
                                   "them all)")
    err.raise_if_any()
    p = points[0]
    wl = workload_of(p["workload"], wl_base)
    config = engine_config(p)
    check_context(data, snapshot, wl)
    price = pricing.check_replicas(WorkloadSize.of(wl), config, max_n,
                                   (p.get("data_parallel") or {}).get("data_parallel_size", 1))
    return {"snapshot": snapshot, "point": p, "workload": wl, "config": config, "max_n": max_n, "price": price,
            "cluster": snapshot.get("cluster") or {"routing": "round-robin", "router_delay_s": 0.0}}


def find_replicas(raw: Any, *, owner) -> dict:
    """Validate and answer in this request (under the wall clock, whatever the price); raises
    :class:`planner.sweeps.definition.DefinitionError` with field messages."""
    return answer_replicas(check_replicas(raw, owner=owner), inline=True)


def answer_replicas(checked: dict, *, inline: bool) -> dict:
    """Run a search :func:`check_replicas` returned and shape the answer: ``inline`` in a child process under the
    wall clock (:func:`planner.sweeps.bounded.run_bounded`), else here (a worker)."""
    from simulator.cluster import ClusterError

    snapshot, p, wl, config, max_n, cl = (checked[k] for k in ("snapshot", "point", "workload", "config", "max_n",
                                                               "cluster"))
    slo = snapshot["slo"]
    try:
        if inline:
            found = run_bounded(_search, wl, config, slo, cl, max_n, p.get("data_parallel"),
                                what=f"This replicas search (up to {max_n} instances)")
        else:
            found = _search(wl, config, slo, cl, max_n, p.get("data_parallel"))
    except ClusterError as exc:  # at its field under the cluster (its routing), the words as they are
        raise FieldError.nested(exc, "cluster") from None
    sizing = snapshot.get("sizing") or {}
    price = p["meta"].get("price_per_hour")
    rate = (snapshot["workload"].get("spec") or {}).get("arrival", {}).get("rate")
    return {
        "advice": replicas_advice(found, wl, config, price=price, rate=rate, max_n=max_n,
                                  router_delay_s=cl["router_delay_s"], simulate=_groups(wl, config, p.get("data_parallel"))),
        **found.to_dict(),
        "requests": wl.n,
        "rate_per_s": (snapshot["workload"].get("spec") or {}).get("arrival", {}).get("rate"),
        "num_gpu_blocks": p["meta"]["num_gpu_blocks"],
        "gpus_per_replica": sizing.get("num_gpus") or p["meta"].get("num_gpus"),
        "cost_per_hour": (price * found.num_instances) if (price and found.num_instances) else None,
        "clock": "cost_model" if config.cost_model is not None else "step_time_model",
        "clock_note": p["meta"].get("clock_note"),
        **({"deployment_shape": p["data_parallel"]["shape"]} if p.get("data_parallel") else {}),
        "launch": replicas_launch(snapshot, p, found),
        **sampling_answer(snapshot),
    }


def replicas_launch(snapshot: dict, point: dict, found) -> dict | None:
    """What to run for the answer (None when no count meets the targets or the engine has no model): the
    engine knobs it was simulated with on vLLM's command line, ``found.num_instances`` replicas."""
    from planner.search.exports import model_id
    from simulator.launch import LaunchSpec, launch

    if found.num_instances is None or not snapshot.get("model") or not snapshot.get("gpu"):
        return None
    dep, cfg = snapshot.get("deployment") or {}, point["config"]
    spec = LaunchSpec(
        model=model_id(snapshot), tensor_parallel_size=int(dep.get("tensor_parallel_size", 1)),
        pipeline_parallel_size=int(dep.get("pipeline_parallel_size", 1)),
        data_parallel_size=int(dep.get("data_parallel_size", 1)),
        enable_expert_parallel=bool(dep.get("enable_expert_parallel", False)), max_num_seqs=cfg.get("max_num_seqs"),
        max_num_batched_tokens=cfg.get("max_num_batched_tokens"), max_model_len=cfg.get("max_model_len"),
        gpu_memory_utilization=float(dep.get("gpu_memory_utilization", 0.9)),
        kv_cache_dtype=dep.get("kv_cache_dtype") or "auto",
        quantization=(snapshot["model"].get("spec") or {}).get("quantization"),
        replicas=int(found.num_instances), gpu_name=str((snapshot["gpu"].get("spec") or {}).get("name", "")),
        vllm_version=dep.get("vllm_version"))
    return launch(spec)


def _context_beside(data: dict, owner, err: FieldErrors) -> None:
    """The requests' lengths against the context when the definition was refused for something else (its
    model and workload read again on their own, their problems already in ``err``)."""
    from planner.sweeps.runner import build_workload
    from planner.sweeps.sections import parse_workload
    from planner.sweeps.specs import resolve_profile

    scratch = FieldErrors()
    model = resolve_profile("model", data["model"], owner, "model", scratch) if data.get("model") else None
    variant = parse_workload(data.get("workload"), scratch)
    if scratch.errors or not variant or variant["source"] != "spec":
        return
    try:
        check_context(data, {"model": model}, build_workload(variant))
    except defn.DefinitionError as exc:
        for field, messages in exc.errors.items():
            if field not in err.errors:
                for message in messages:
                    err.add(field, message)


def check_context(data: dict, snapshot: dict, wl) -> None:
    """Refuse a request longer than the deployment's ``max_model_len`` (or the model's positions) and a
    ``max_model_len`` beyond them, by the rule sizing and the search follow
    (:func:`planner.api.validation.context_problems`)."""
    model = (snapshot.get("model") or {}).get("spec") or {}
    part = data.get("deployment" if model else "engine")
    given = part.get("max_model_len") if isinstance(part, dict) else None  # (a part that is no object: refused)
    given = given if isinstance(given, int) and not isinstance(given, bool) else None
    problems = context_problems(model_name=model.get("name", "the model"),
                                max_positions=model.get("max_position_embeddings"), max_model_len=given,
                                longest=int((wl.prompt_len + wl.output_len).max()) if wl.n else None)
    where = "deployment.max_model_len" if model else "engine.max_model_len"
    errors = {}
    if "max_model_len" in problems:
        errors[where] = [problems["max_model_len"]]
    if "request" in problems:
        errors[where if given else "workload.spec.prompt"] = [problems["request"]]
    if errors:
        raise defn.DefinitionError(errors)


def replicas_advice(found, wl, config, *, price: float | None, rate: float | None, max_n: int,
                    router_delay_s: float = 0.0, simulate=None) -> list[str]:
    """Sentences for the replicas answer: the cheapest count meeting the targets (or that none does, and
    how far the offered load exceeds what the most replicas serve), and a lopsided prefix-affinity router."""
    from simulator.cluster import simulate_cluster

    out = []
    if found.num_instances is not None:
        cost = f" at ${price * found.num_instances:,.2f}/h" if price else ""
        out.append(f"The cheapest deployment that meets the targets is {found.num_instances} "
                   f"replica{'s' if found.num_instances > 1 else ''}{cost}: every count tried below it misses them.")
    else:
        out.append(f"No replica count up to {max_n} meets the targets, so there is no cheapest deployment "
                   "to name here.")
        served = _served_rate(simulate(max_n) if simulate is not None else simulate_cluster(
            wl, config, max_n, routing=found.routing, router_delay_s=router_delay_s))
        if rate and served and served < 0.8 * rate:
            out.append(f"The offered load exceeds what {max_n} replicas serve: {rate:,.3g} requests/s arrive but "
                       f"they complete about {served:,.3g} requests/s ({served / rate:.0%}), so the queue grows "
                       f"without bound; about {rate / served:.1f}x the capacity is needed.")
    if "prefix-affinity" in found.routing:
        lopsided = [t for t in found.trials if t.num_instances > 1 and t.request_imbalance / t.num_instances > 0.5]
        if lopsided:
            t = max(lopsided, key=lambda t: t.request_imbalance / t.num_instances)
            out.append(f"Prefix-affinity routing sends {t.request_imbalance / t.num_instances:.0%} of the requests to "
                       f"one of {t.num_instances} replicas: that replica is the bottleneck. Weight the router toward "
                       "load (weighted:prefix-affinity:1,queue-depth:1) or use round-robin.")
    return out


def _served_rate(res) -> float | None:
    """Completed requests per second over the run (first arrival to last finish)."""
    lat = res.latency
    if lat is None or not lat.num_completed or not lat.duration_s > 0:
        return None
    return lat.num_completed / lat.duration_s
