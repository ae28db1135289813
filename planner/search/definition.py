"""Validate a search definition (JSON) into a snapshot of resolved inputs.

::

    {"name": "...", "model": "llama-3-1-8b",                       # slug, id of your profile, or inline spec
     "workload": {"spec": {"n": 12000, "prompt": "normal:1024,256", "output": "normal:256,64",
                           "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 0},
     "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5}], "min_goodput": 0.9},
     "space": {"gpus": ["h100-sxm5-80gb", "l40s"],                  # default: every catalog GPU with a price
               "tensor_parallel": [1, 2, 4, 8], "precisions": ["bf16", "fp8", "int4"],
               "kv_cache_dtypes": ["auto"], "max_num_seqs": [64, 256], "max_replicas": 16},
     "disaggregated": {"link_gbps": 50, "link_latency_s": 0.0001},   # optional: xPyD splits of the answer
     "calibration": 3,                                               # optional: one of your calibrations
     "check_seeds": 3}                                               # the answer on 3 more seeds (0: off)

``space.speculative`` lists speculative decoding settings to try (``null``: without; ``"eagle:3:0.7"`` or
``{"method", "num_speculative_tokens", "acceptance_rate"}``), as the command line's ``--speculative``.

Every error is collected under its field path (``space.gpus[1]``, ``slo.max_s``,
``workload.spec.arrival.rate``) and raised as one
:class:`planner.sweeps.definition.DefinitionError`.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings

from planner.api.validation import context_problems
from planner.calibration.fields import calibration_on
from planner.errors import FieldErrors, InputError, every_problem, field_and_message
from planner.sampling_words import timed_path
from planner.search import disaggregated as sdis
from planner.search.pricing import OverBudget, SearchPrice, check_search
from planner.sweeps import definition as defn
from planner.sweeps import specs
from planner.sweeps.sections import parse_workload
from simulator.search import DEFAULT_SEED_COUNT, SearchError, SearchSpace, Slo, seed_count

#: Fields of a definition and of its space.
FIELDS = {"name", "model", "workload", "slo", "space", "disaggregated", "calibration", "check_seeds"}
SPACE_FIELDS = {"gpus", "tensor_parallel", "pipeline_parallel", "precisions", "kv_cache_dtypes", "max_num_seqs",
                "max_replicas", "routing", "gpu_memory_utilization", "max_model_len", "sampling",
                "async_scheduling", "speculative", "data_parallel", "expert_parallel", "max_gpus"}


def max_requests() -> int:
    """Most requests a search workload may hold (each replica count tried simulates them all)."""
    return int(getattr(settings, "KVP_SEARCH_MAX_REQUESTS", 20_000))


def _add_search_error(err, exc: SearchError) -> None:
    field, message = field_and_message(exc)
    err.add(field or "non_field_errors", message)


def priced_catalog_gpus() -> list[str]:
    """Slugs of the catalog GPUs with a price (the default space)."""
    from gpuprofiles.models import GpuProfile
    from gpuprofiles.selectors import visible_profiles

    return list(visible_profiles(GpuProfile, user=None, scope="catalog").filter(price_per_hour__isnull=False)
                .order_by("name").values_list("slug", flat=True))


def _gpus(raw: Any, owner, err) -> list[dict]:
    refs = priced_catalog_gpus() if raw is None else raw
    if not isinstance(refs, list):
        err.add("space.gpus", "must be a list of GPU slugs, ids of your profiles or inline specs")
        return []
    if not refs:
        err.add("space.gpus", "give at least one GPU type (the space is empty)")
    return [g for i, r in enumerate(refs) if (g := specs.resolve_profile("gpu", r, owner, f"space.gpus[{i}]", err))]


def validate(raw: Any, *, owner) -> tuple[dict, dict, SearchPrice]:
    """``(normalized definition, snapshot, price)``; raises DefinitionError with messages per field.

    The price (:class:`planner.search.pricing.SearchPrice`: each shape's ``[least cost per hour, seconds of one
    simulation]``, the last stage's estimate) comes from the check that the search fits the limits."""
    err = FieldErrors()
    if not isinstance(raw, dict):
        raise defn.DefinitionError({"non_field_errors": ["must be a JSON object"]})
    err.unknown(raw, sorted(FIELDS))
    name = raw.get("name", "")
    if not isinstance(name, str) or len(name) > 200:
        err.add("name", "must be text of at most 200 characters")
    if raw.get("model") is None:
        err.add("model", "give the model: a catalog slug, the id of your profile, or an inline spec")
        model = None
    else:
        model = specs.resolve_profile("model", raw["model"], owner, "model", err)
    workload = parse_workload(raw.get("workload"), err) if "workload" in raw else err.add(
        "workload", "give the traffic: {\"spec\": {...}, \"seed\": 0} or {\"trace\": \"...\"}")
    if workload and workload["arrival_unit"] != "s":
        err.add("workload.spec.arrival", "give arrivals in seconds (\"unit\": \"s\"): latency targets are in seconds")
    if workload and workload["n"] > max_requests():
        err.add("workload.spec.n", f"at most {max_requests():,} requests per search, got {workload['n']:,}")
    slo = None
    try:
        slo = Slo.from_dict(raw.get("slo"))
    except SearchError as exc:
        _add_search_error(err, exc)
    space_raw = raw.get("space") or {}
    if not isinstance(space_raw, dict):
        err.add("space", "must be an object")
        space_raw = {}
    err.unknown(space_raw, sorted(SPACE_FIELDS), "space")
    gpus = _gpus(space_raw.get("gpus"), owner, err)
    space = {k: v for k, v in space_raw.items() if k in SPACE_FIELDS - {"gpus"}}
    before = set(err.errors)
    _check_space(gpus, space, err)
    if model is not None and gpus and not any(f.startswith("space") for f in set(err.errors) - before):
        _check_shapes(model, gpus, space, err)
    dis = sdis.parse(raw.get("disaggregated"), max_replicas=space.get("max_replicas", SearchSpace.max_replicas),
                     add=err.add)
    if dis is not None and dis["pools"] and slo is not None and not any(t.metric == "ttft" for t in slo.targets):
        err.add("disaggregated.pools", "needs a TTFT target in slo.targets: the prefill pool is sized by it")
    calibration = _calibration(raw.get("calibration"), owner, gpus, err)
    check_seeds = _check_seeds(raw.get("check_seeds", DEFAULT_SEED_COUNT), err)
    if model is not None and workload:  # the requests' lengths against the context, with the other problems
        _check_runnable(model, space, build_workload({"workload": workload}), err)
    err.raise_if_any()
    snapshot = {"model": model, "gpus": gpus, "workload": workload, "slo": slo.to_dict(), "space": space,
                "check_seeds": check_seeds}
    if calibration is not None:
        snapshot["calibration"] = calibration
    if model is not None:  # the sampler path every shape's clock times, and why (planner.sampling_words)
        snapshot["sampling"], snapshot["sampling_source"] = timed_path(space.get("sampling"),
                                                                       model["spec"].get("sampling"))
    if dis is not None:
        snapshot["disaggregated"] = dis
    inputs = build_inputs(snapshot)
    price = _check_price(inputs, err, dis, seeds_to_check(snapshot))
    err.raise_if_any()
    norm = {"name": name, "model": raw["model"], "workload": raw["workload"], "slo": slo.to_dict(),
            "space": {**space_raw}, "check_seeds": check_seeds}
    if dis is not None:
        norm["disaggregated"] = raw["disaggregated"]
    if calibration is not None:
        norm["calibration"] = raw["calibration"]
    return norm, snapshot, price


def _check_seeds(raw: Any, err) -> int:
    """``check_seeds``: how many more traffic seeds the answer is simulated on (:func:`simulator.search.seed_count`
    checks the range for every door); the default when refused, so that the other fields are still checked."""
    try:
        return seed_count(raw, "check_seeds")
    except SearchError as exc:
        _add_search_error(err, exc)
        return DEFAULT_SEED_COUNT


def seeds_to_check(snapshot: dict) -> int:
    """Seeds the search's last stage checks the answer on: ``check_seeds`` of a generated workload; 0 for a trace
    (one draw: nothing to re-draw) and for a search stored before the check existed."""
    if (snapshot.get("workload") or {}).get("source") != "spec":
        return 0
    return int(snapshot.get("check_seeds", 0))


def has_stage(snapshot: dict) -> bool:
    """Whether the search ends with a stage after its shapes are searched (its last chunk, with no candidates):
    the xPyD splits of the answer (``disaggregated``), its seed check (``check_seeds``), or both."""
    return snapshot.get("disaggregated") is not None or seeds_to_check(snapshot) > 0


def _calibration(ref: Any, owner, gpus: list[dict], err) -> dict | None:
    """The owner's calibration ``ref`` for the shapes on the GPU it was fitted on (one of the space's GPUs)."""
    if ref is None:
        return None
    found = calibration_on(owner, ref)
    if found is None:
        err.add("calibration", f"no calibration {ref!r} among yours (see /calibrations/)")
        return None
    if found["gpu"] not in {g["spec"]["name"] for g in gpus}:
        err.add("calibration", f"the calibration {found['name']!r} was fitted on {found['gpu']}, which this search "
                               "does not consider: add that GPU to the GPUs to consider, or choose no calibration")
        return None
    return found


def _check_space(gpus: list[dict], space: dict, err) -> None:
    """The space as :class:`simulator.search.SearchSpace` checks it, every refused field at once (a refused
    field is put back to its default and the space checked again: :func:`planner.errors.every_problem`)."""
    if not gpus:
        return

    def attempt(values: dict) -> None:
        try:
            build_space({"gpus": gpus, "space": values})
        except SearchError as exc:
            field, message = field_and_message(exc)
            raise InputError.one(field or "non_field_errors", message) from None
        except (TypeError, ValueError) as exc:
            raise InputError.one("space", str(exc)) from None

    def reset(values: dict, field: str) -> bool:  # space.speculative[1].method: the whole of space.speculative
        key = re.split(r"[.\[]", field.removeprefix("space."), maxsplit=1)[0]
        return field.startswith("space.") and values.pop(key, None) is not None

    try:
        every_problem(attempt, space, reset=reset)
    except InputError as exc:
        for field, messages in exc.errors.items():
            for message in messages:
                err.add(field, message)


def _check_shapes(model_d: dict, gpus: list[dict], space: dict, err) -> None:
    """The space's DP / EP dimensions against the model, as vLLM refuses them at start-up
    (:func:`simulator.search.check_space_for_model`: EP on a dense model, a DP size no TP of the space runs, a DP
    whose smallest replica needs more GPUs than ``space.max_gpus``), at the space's field."""
    from simulator.search import check_space_for_model

    try:
        check_space_for_model(build_space({"gpus": gpus, "space": space}), specs.model_spec(model_d["spec"]))
    except SearchError as exc:
        _add_search_error(err, exc)


def _check_runnable(model_d: dict, space: dict, wl, err) -> None:
    """The workload's longest request must fit the model's context (checked before queueing), by the rule
    sizing and the replicas search follow (:func:`planner.api.validation.context_problems`)."""
    model = specs.model_spec(model_d["spec"])
    given = space.get("max_model_len")
    given = given if isinstance(given, int) and not isinstance(given, bool) else None  # (else: the space's error)
    problems = context_problems(model_name=model.name, max_positions=model.max_position_embeddings,
                                max_model_len=given, longest=int((wl.prompt_len + wl.output_len).max()))
    if "max_model_len" in problems:
        err.add("space.max_model_len", problems["max_model_len"])
    if "request" in problems:
        err.add("space.max_model_len" if given else "workload", problems["request"])


def _check_price(inputs: tuple, err, dis: dict | None = None, seeds: int = 0) -> SearchPrice | None:
    """The heaviest shape of the search, and its last stage (xPyD splits, seed check), must fit the limits of
    one chunk (``planner/search/pricing.py``): the search's price, or None with the error added."""
    splits = None if dis is None else sdis.splits_priced(dis, inputs[2].max_replicas)
    try:
        return check_search(*inputs, splits=splits, seeds=seeds, pools=bool(dis and dis.get("pools")))
    except OverBudget as exc:
        err.merge(exc)
        return None


def build_space(snapshot: dict) -> SearchSpace:
    """The snapshot's space; a calibration's coefficients (its sampler terms merged with the chosen path's, as
    for a sweep: :func:`planner.sweeps.specs.clock_coefficients`) time the shapes on the GPU it was fitted on."""
    gpus = tuple(specs.gpu_spec(g["spec"]) for g in snapshot["gpus"])
    space = {k: (tuple(v) if isinstance(v, list) else v) for k, v in snapshot["space"].items()}
    cal = snapshot.get("calibration")
    if cal:
        space["coefficients_by_gpu"] = {cal["gpu"]: specs.clock_coefficients(space.get("sampling"), cal["coefficients"],
                                                                             cal["fitted"])}
    return SearchSpace(gpus, **space)


def build_workload(snapshot: dict):
    from planner.sweeps.runner import workload_of

    wl = snapshot["workload"]
    return workload_of(wl, wl)


def build_inputs(snapshot: dict):
    """``(workload, model, space, slo)`` for :func:`simulator.search.deployments.search_deployments`."""
    return (build_workload(snapshot), specs.model_spec(snapshot["model"]["spec"]), build_space(snapshot),
            Slo.from_dict(snapshot["slo"]))
