"""``python -m simulator search``: the cheapest deployment meeting an SLO, from files and options.

The model is a Hugging Face ``config.json``; the GPUs a JSON list of
:class:`simulator.base.specs.GpuSpec` objects with ``price_per_hour`` (the
catalog's priced GPUs are in ``examples/search_gpus.json``); the traffic a
workload file or a Poisson rate with length distributions. Prints the
:class:`simulator.search.deployments.SearchResult` as JSON (``--summary``: the answer in
words and a table of every deployment tried). Input errors raise
:class:`simulator.search.space.SearchError` naming the option.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from simulator.base import DEFAULT_SAMPLER_PATH, SAMPLER_PATHS, path_words, timed_path
from simulator.base.errors import FieldError
from simulator.cli.values import option_words, read_json
from simulator.search import (
    DEFAULT_SEED_COUNT,
    DURATION_BOUNDS_S,
    MAX_SEEDS,
    TRAFFIC_DEFAULTS,
    SearchError,
    SearchSpace,
    Slo,
    format_seconds,
    parse_slo_target,
    seed_check_words,
    seed_count,
    space_defaults,
)


def add_search_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of the ``search`` subcommand."""
    p.add_argument("--model", required=True, metavar="CONFIG_JSON", help="the model's Hugging Face config.json")
    p.add_argument("--generation-config", metavar="FILE",
                   help="the model's generation_config.json: its sampling fields pick the sampler path the clock times "
                        "(default: the generation_config.json beside --model, else the shipped defaults of a model its "
                        f"config names in _name_or_path, else {DEFAULT_SAMPLER_PATH})")
    p.add_argument("--sampling", choices=list(SAMPLER_PATHS), metavar="PATH",
                   help=f"the requests' sampler path instead of the model's own: {', '.join(SAMPLER_PATHS)}")
    p.add_argument("--gpus", required=True, metavar="FILE",
                   help="JSON list of GPUs: {name, memory_gib, bandwidth_tbps, bf16_tflops, fp8_tflops, "
                        "interconnect_gbps, price_per_hour} (examples/search_gpus.json)")
    p.add_argument("--workload", metavar="FILE", help="workload JSON or trace (else --rate and --duration)")
    p.add_argument("--rate", type=float, metavar="REQ_PER_S", help="Poisson arrivals, requests per second")
    traffic, space = TRAFFIC_DEFAULTS, space_defaults()  # the defaults the API and the search page take too

    def listed(values) -> str:
        return ",".join(str(v) for v in values)

    p.add_argument("--duration", type=float, metavar="S",
                   help="seconds of traffic (with --rate); default: enough requests for the SLO's highest percentile "
                        "to be known within a quarter of its tail at 95 %% confidence, from "
                        f"{DURATION_BOUNDS_S[0]:g} to {DURATION_BOUNDS_S[1]:g} s (simulator.search.default_duration)")
    p.add_argument("--prompt", default=traffic["prompt"], metavar="DIST", help="prompt length distribution, tokens")
    p.add_argument("--output", default=traffic["output"], metavar="DIST", help="output length distribution, tokens")
    p.add_argument("--seed", type=int, default=traffic["seed"], help="workload seed")
    p.add_argument("--check-seeds", type=int, default=DEFAULT_SEED_COUNT, metavar="K",
                   help="with --rate: simulate the answer, and one replica fewer, on the K seeds after --seed and say "
                        f"on how many each meets the SLO (default {DEFAULT_SEED_COUNT}; 0 to skip; at most {MAX_SEEDS})")
    p.add_argument("--slo", action="append", required=True, metavar="METRIC:PCT:SECONDS",
                   help="a latency target METRIC:PERCENTILE:SECONDS, METRIC one of ttft, tpot, itl, e2e (vLLM bench's "
                        "definitions), e.g. ttft:p90:0.5 or tpot:p90:0.03 or itl:p99.9:0.1 (repeatable)")
    p.add_argument("--min-goodput", type=float, default=0.0, metavar="FRAC",
                   help="least share of requests that must meet every target (0 to 1)")
    p.add_argument("--tp", default=listed(space["tensor_parallel"]), metavar="LIST", help="tensor-parallel degrees")
    p.add_argument("--pp", default=listed(space["pipeline_parallel"]), metavar="LIST", help="pipeline-parallel degrees")
    p.add_argument("--dp", "--data-parallel", dest="dp", default="1", metavar="LIST",
                   help="data-parallel sizes (vLLM's --data-parallel-size): a replica is one DP group of TP x PP x DP "
                        "GPUs (default 1; docs/moe_parallelism.md)")
    p.add_argument("--ep", "--expert-parallel", dest="ep", default="off", metavar="LIST",
                   help="expert parallelism (vLLM's --enable-expert-parallel) to try: off, on or off,on (MoE models "
                        "only; default off)")
    p.add_argument("--precision", default=listed(space["precisions"]), metavar="LIST",
                   help="weight precisions: bf16, fp8, int4")
    p.add_argument("--kv-dtype", default=listed(space["kv_cache_dtypes"]), metavar="LIST",
                   help="KV cache dtypes (auto, fp8, ...)")
    p.add_argument("--max-num-seqs", default=listed(space["max_num_seqs"]), metavar="LIST", help="running-request caps")
    p.add_argument("--speculative", default="none", metavar="LIST",
                   help="speculative decoding settings to try, METHOD:K:ACCEPTANCE each (methods eagle, eagle3, mtp, "
                        "ngram), 'none' for without, e.g. none,eagle:3:0.7 (default none)")
    p.add_argument("--max-replicas", type=int, default=space["max_replicas"], metavar="N",
                   help="most replicas behind the router")
    p.add_argument("--max-gpus", type=int, metavar="N",
                   help="the GPUs there are: an answer's replicas x GPUs per replica stays within N (default: no "
                        "limit but --max-replicas)")
    p.add_argument("--routing", default=space["routing"], metavar="POLICY", help="router policy (docs/cluster.md)")
    p.add_argument("--disaggregated", action="store_true",
                   help="also simulate every prefill/decode split (xPyD) of the answer's replicas and of one fewer, "
                        "judged against the same SLO (docs/disaggregated_serving.md)")
    p.add_argument("--disaggregated-pools", action="store_true",
                   help="also search a prefill pool and a decode pool jointly, each of its own shape and count among "
                        "the space's (simulator.search.pools; docs/disaggregated_serving.md)")
    p.add_argument("--link-gbps", type=float, default=50.0, metavar="GBPS",
                   help="with --disaggregated or --disaggregated-pools: KV link bandwidth per decode instance, GB/s "
                        "(default 50)")
    p.add_argument("--summary", action="store_true", help="print the answer in words and a table, not JSON")
    p.add_argument("--launch", action="store_true",
                   help="also print what to run for the answer: the vllm serve command line and the Kubernetes "
                        "Deployment + Service (JSON: the answer's \"launch\")")
    p.add_argument("--model-id", metavar="HF_ID",
                   help="the Hugging Face repository id vllm serve loads (default: the config's _name_or_path, "
                        "else the model's name)")
    p.add_argument("--out", "-o", metavar="FILE", help="write here instead of stdout")
    return p


def _ints(text: str, option: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise SearchError(f"{text!r} must be whole numbers separated by commas", field=option) from None


def _switches(text: str, option: str) -> tuple[bool, ...]:
    """``off,on`` -> ``(False, True)``; anything else is an error naming the option."""
    words = {"off": False, "on": True, "false": False, "true": True}
    got = [w.lower() for w in _words(text)]
    bad = [w for w in got if w not in words]
    if bad or not got:
        raise SearchError(f"must be off, on or off,on, got {text!r}", field=option)
    return tuple(dict.fromkeys(words[w] for w in got))


def _words(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _speculative(text: str) -> tuple:
    """``none,eagle:3:0.7`` -> the space's settings (validated by :class:`simulator.search.SearchSpace`)."""
    return tuple(None if w == "none" else w for w in _words(text)) or ((),)


def _gpus(path: str) -> tuple:
    from simulator.base import GpuSpec

    data = read_json(path, "--gpus", SearchError)
    if not isinstance(data, list):
        raise SearchError("--gpus: the file must hold a JSON list of GPU objects")
    out = []
    for i, g in enumerate(data):
        try:
            out.append(GpuSpec.from_dict(g))
        except (TypeError, ValueError) as exc:
            raise SearchError(f"--gpus: GPU {i + 1}: {exc}") from None
    return tuple(out)


def _duration(args: argparse.Namespace, slo) -> tuple[float, str | None]:
    """``--duration``, or the one :func:`simulator.search.default_duration` chooses (with why)."""
    from simulator.search import default_duration

    if args.duration is None:
        return default_duration(args.rate, slo)
    if not (math.isfinite(args.duration) and args.duration > 0):
        raise SearchError(f"--duration: must be more than 0 seconds, got {args.duration:g}")
    return args.duration, None


def _workload(args: argparse.Namespace, load_workload_file, slo, seed: int | None = None):
    from simulator.workload import WorkloadSpec, generate_workload

    if args.workload:
        return load_workload_file(args.workload)
    if args.rate is None:
        raise SearchError("--rate: give the traffic (--rate and --duration) or a --workload file")
    if not (math.isfinite(args.rate) and args.rate > 0):
        raise SearchError(f"--rate: must be more than 0 requests per second, got {args.rate:g}")
    n = max(1, round(args.rate * _duration(args, slo)[0]))
    try:
        spec = WorkloadSpec.from_dict({"n": n, "prompt": args.prompt, "output": args.output,
                                       "arrival": {"kind": "poisson", "rate": args.rate, "unit": "s"}})
    except ValueError as exc:
        raise SearchError(f"--rate: {exc}") from None
    return generate_workload(spec, seed=args.seed if seed is None else seed)


def _seed_check(args: argparse.Namespace, result, load_workload_file, model, space, slo):
    """The answer on other seeds of the traffic (:mod:`simulator.search.seeds`); None when not asked for, when
    nothing meets, or when the traffic is a file (one draw, no seed to change)."""
    from simulator.search import check_seeds, other_seeds

    if seed_count(args.check_seeds, "--check-seeds") == 0 or args.workload or result.best is None:
        return None
    return check_seeds(result, lambda seed: _workload(args, load_workload_file, slo, seed), model, space, slo,
                       other_seeds(args.seed, args.check_seeds))


#: The space's fields and the options that set them (an error names the option).
SPACE_OPTIONS = {"space.tensor_parallel": "--tp", "space.pipeline_parallel": "--pp", "space.precisions": "--precision",
                 "space.kv_cache_dtypes": "--kv-dtype", "space.max_num_seqs": "--max-num-seqs",
                 "space.max_replicas": "--max-replicas", "space.routing": "--routing", "space.sampling": "--sampling",
                 "space.speculative": "--speculative", "space.data_parallel": "--dp",
                 "space.expert_parallel": "--ep", "space.max_gpus": "--max-gpus"}


def run_search_command(args: argparse.Namespace, *, load_workload_file) -> str:
    """Run the search the options describe; the text to print. A :class:`SearchError` of the space names the
    option that sets the field (``--dp: ...``)."""
    try:
        return _run_search_command(args, load_workload_file=load_workload_file)
    except SearchError as exc:
        if exc.field in SPACE_OPTIONS:
            raise SearchError(option_words(exc, SPACE_OPTIONS)) from None
        raise


def _run_search_command(args: argparse.Namespace, *, load_workload_file) -> str:
    from simulator.search import search_deployments
    from simulator.sizing import parse_hf_config

    try:
        config = read_json(args.model, "--model", SearchError)
        beside = Path(args.model).with_name("generation_config.json")  # a Hugging Face snapshot keeps both
        generation_file = args.generation_config or (str(beside) if beside.is_file() else None)
        generation = read_json(generation_file, "--generation-config", SearchError) if generation_file else None
        model = parse_hf_config(config, generation_config=generation)
    except SearchError:
        raise
    except ValueError as exc:
        field = exc.field if isinstance(exc, FieldError) else None  # (the field of the error, not its words)
        option = "--generation-config" if (field or "").startswith("generation_config") else "--model"
        raise SearchError(f"{exc}", field=option) from None
    slo = Slo(tuple(parse_slo_target(t) for t in args.slo), args.min_goodput)
    space = SearchSpace(_gpus(args.gpus), tensor_parallel=_ints(args.tp, "--tp"),
                        pipeline_parallel=_ints(args.pp, "--pp"), precisions=_words(args.precision),
                        kv_cache_dtypes=_words(args.kv_dtype), max_num_seqs=_ints(args.max_num_seqs, "--max-num-seqs"),
                        max_replicas=args.max_replicas, routing=args.routing, sampling=args.sampling,
                        speculative=_speculative(args.speculative), data_parallel=_ints(args.dp, "--dp"),
                        expert_parallel=_switches(args.ep, "--ep"), max_gpus=args.max_gpus)
    from simulator.search import check_space_for_model

    check_space_for_model(space, model)  # before the traffic is drawn
    workload = _workload(args, load_workload_file, slo)
    seed_count(args.check_seeds, "--check-seeds")  # before the search, not after it
    result = search_deployments(workload, model, space, slo)
    seeds = _seed_check(args, result, load_workload_file, model, space, slo)
    alt = _disaggregated(args, result, workload, model, space, slo) if args.disaggregated else None
    pools = _pools(args, result, workload, model, space, slo) if args.disaggregated_pools else None
    out = result.to_dict()
    out["seed_check"] = None if seeds is None else seeds.to_dict()
    out["traffic"] = traffic_words(workload, args, None if args.workload else _duration(args, slo)[1])
    launched = None
    if args.launch and out["best"] is not None:
        from simulator.launch import search_launch

        model_id = args.model_id or config.get("_name_or_path") or (model.name or "MODEL").replace(" ", "-")
        launched = search_launch(out["best"], model_id, gpu_memory_utilization=space.gpu_memory_utilization,
                                 async_scheduling=space.async_scheduling)
        out["launch"] = launched
    if args.summary:
        return (summary_text(result) + f"traffic: {out['traffic']}\n" + seed_line(seeds, args)
                + sampler_line(model, args.sampling)
                + (disaggregated_text(alt) if args.disaggregated else "")
                + (pools_text(pools) if pools is not None else "") + launch_text(args.launch, launched))
    if args.disaggregated:
        out["disaggregated"] = alt
    if pools is not None:
        out["disaggregated_pools"] = pools
    return json.dumps(out, allow_nan=False, default=_nan)


def traffic_words(workload, args: argparse.Namespace, chosen: str | None = None) -> str:
    """How much traffic every shape was judged on: requests, the span of their arrivals, where they came from
    (and, when the duration was left out, how it was chosen)."""
    span = float(workload.arrival.max() - workload.arrival.min()) if workload.n > 1 else 0.0
    if args.workload:
        rate = f", {(workload.n - 1) / span:,.3g} requests/s" if span > 0 else ""  # n arrivals: n - 1 gaps
        origin = f"file {Path(args.workload).name}{rate}"
    else:
        origin = f"Poisson at {args.rate:g} requests/s, seed {args.seed}"
        if chosen:
            origin += f"; duration left out: {chosen}"
    return f"{workload.n:,} requests arriving over {span:,.1f} s ({origin})"


def seed_line(check, args: argparse.Namespace) -> str:
    """The ``--summary`` line of the seed check, or why there is none."""
    words = seed_check_words(check, asked=args.check_seeds, one_draw="a workload file" if args.workload else None)
    return "" if words is None else f"across seeds: {words}\n"


def launch_text(asked: bool, launched: dict | None) -> str:
    """The ``--launch`` part of ``--summary``: the command line, then the manifests."""
    if not asked:
        return ""
    if launched is None:
        return "\nNothing to launch: no deployment meets the SLO.\n"
    notes = "".join(f"# {n}\n" for n in launched["notes"])
    return f"\nTo run it:\n\n{launched['vllm_serve']}\n\n{notes}{launched['kubernetes']}"


def _link(args: argparse.Namespace):
    """The KV link of ``--link-gbps``; a bad value is an error naming the option."""
    from simulator.cluster import DisaggError, KvLink

    try:
        return KvLink(args.link_gbps, 1e-4)
    except DisaggError as exc:
        raise SearchError(option_words(exc, {"link.bandwidth_gbps": "--link-gbps"})) from None


def _disaggregated(args: argparse.Namespace, result, workload, model, space, slo):
    """The xPyD splits of the answer (:mod:`simulator.search.disaggregated`)."""
    from simulator.search import xpyd_alternatives

    return xpyd_alternatives(result, workload, model, space, slo, link=_link(args))


def _pools(args: argparse.Namespace, result, workload, model, space, slo) -> dict:
    """Prefill and decode pools searched jointly (:mod:`simulator.search.pools`), with the verdict against the
    aggregated answer."""
    from simulator.search.pools import pools_verdict, search_pools

    pools = search_pools(workload, model, space, slo, link=_link(args))
    return {**pools, "verdict": pools_verdict(pools, result)}


def pools_text(pools: dict) -> str:
    """The joint pools search in words: each shape's prefill and decode count, each pair checked, the answer and
    the verdict."""
    lines = ["", f"Prefill and decode pools searched jointly ({pools['simulations']} simulations):"]
    for role, rows in (("prefill", pools.get("prefill", [])), ("decode", pools.get("decode", []))):
        for r in rows:
            n = r.get("instances")
            count = (f"{n} instance{'s' if n != 1 else ''}" + (f" behind {r['behind']}" if r.get("behind") else "")
                     if n else f"none: {r.get('reason')}")
            lines.append(f"{role} pool of {r['shape']}: {count}")
    for r in pools["pairs"]:
        if r.get("left_out"):
            lines.append(f"{r['name']}: left out: {r['left_out']}")
            continue
        figures = ", ".join(f"{k} {format_seconds(v)}" for k, v in r["values"].items() if v is not None)
        lines.append(f"{r['name']}  {r['num_gpus']} GPUs ${r['cost_per_hour']:,.2f}/h  "
                     f"{'meets' if r['meets'] else 'misses'}: {figures}")
    lines.append(pools["message"] + ".")
    lines.append(f"Winner: {pools['verdict']['winner']}: {pools['verdict']['reason']}.")
    return "\n".join(lines) + "\n"


def disaggregated_text(alt) -> str:
    """The splits in words: one line each, then the cheapest one meeting the SLO."""
    if alt is None:
        return "\nNo prefill/decode split to try: no answer, or a single replica.\n"
    lines = ["", f"Prefill/decode splits of {alt['shape']} (aggregated: {alt['aggregated']['replicas']} "
                 f"replicas at ${alt['aggregated']['cost_per_hour']:,.2f}/h):"]
    for r in alt["splits"]:
        figures = ", ".join(f"{k} {format_seconds(v)}" for k, v in r["values"].items() if v is not None)
        verdict = "meets" if r["meets"] else "misses"
        lines.append(f"{r['name']:6} {r['num_gpus']:3} GPUs ${r['cost_per_hour']:,.2f}/h  {verdict}: {figures}")
    b = alt["best"]
    lines.append(f"Cheapest split meeting the SLO: {b['name']} at ${b['cost_per_hour']:,.2f}/h" if b
                 else "No split meets the SLO.")
    v = alt["verdict"]
    lines.append(f"Winner: {v['winner']}: {v['reason']}.")
    return "\n".join(lines) + "\n"


def _nan(v: Any) -> Any:
    raise TypeError(f"not JSON: {type(v).__name__}")


def summary_text(result) -> str:
    """The answer in words, then one line per candidate (status, replicas, cost, reason)."""
    lines = [result.message, f"{result.num_simulations} simulations in {result.elapsed_s:.1f} s", ""]
    for o in result.outcomes:
        cost = "" if o.cost_per_hour is None else f"${o.cost_per_hour:,.2f}/h"
        reps = "" if o.replicas is None else f"x{o.replicas}"
        lines.append(f"{o.status:9} {reps:4} {cost:>11}  {o.candidate['label']}: {o.reason}")
    return "\n".join(lines) + "\n"


def sampler_line(model, chosen: str | None) -> str:
    """Which sampler path every candidate's clock timed, and why."""
    path, source = timed_path(chosen, model.sampling)
    why = {"chosen": "--sampling", "model": "the model's generation_config.json",
           "default": "the default: the model's sampling defaults are not known; --generation-config or --sampling "
                      "to say"}[source]
    return f"sampler: {path_words(path)} ({why})\n"


__all__ = ["add_search_arguments", "run_search_command", "summary_text", "sampler_line"]
