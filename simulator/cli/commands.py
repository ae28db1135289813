"""Command line: python -m simulator COMMAND (--help after a command for its options).

  run       simulate one workload under one engine configuration.
  sweep     simulate one workload over a grid of configurations, as one
            batched simulation.
  workload  generate a synthetic workload file (the oracle's compact JSON).
  cluster   simulate N engine instances behind a router (replicas and
            routing), or find the fewest instances that meet latency SLOs.
  search    the cheapest deployment meeting an SLO (simulator/search/deployments.py).
  validate  score the step clock against real vLLM runs (the training split
            of the sim-to-real study).

Every input problem (missing or unreadable file, invalid JSON, unknown field,
impossible value) prints one line 'error: ...' to stderr and exits with
status 2; an unexpected internal failure prints one line and exits with 1. A run that stops at its
step limit (max_steps) with requests unfinished prints a warning and exits with 3.
Long runs show a progress bar on stderr when it is a terminal; every default
a run assumes for what its configuration leaves out is printed there too.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import itertools
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.base.errors import FieldError
from simulator.cli.traces import add_trace_arguments, read_trace_file
from simulator.cli.values import option_words, whole_numbers
from simulator.engine import jsonable
from simulator.engine.config import POLICIES, ConfigError, EngineConfig, StepTimeModel
from simulator.engine.windows import time_windows
from simulator.speculative.acceptance import inline_trace_file
from simulator.workload import (
    TraceReport,
    Workload,
    WorkloadError,
    apply_parents,
    read_trace,
    trace_format,
    write_oracle_json,
)

if TYPE_CHECKING:  # the workload generator is imported by the one command that uses it
    from simulator.workload import PrefixGroup, WorkloadSpec

#: Most grid points one sweep may hold.
MAX_SWEEP_POINTS = 4096
#: Step series points ``run --windows`` records to measure queues per window.
WINDOW_STEP_POINTS = 200_000


class CliError(Exception):
    """A user error: printed as one ``error:`` line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as a single line (status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {message} (see '{self.prog} --help')\n")


# --------------------------------------------------------------------------- I/O


def _read_json(path: str, what: str) -> Any:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"{what} file {path!r}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{what} file {path!r}: is a directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{what} file {path!r}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{what} file {path!r}: invalid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None


def load_workload_file(path: str, args: argparse.Namespace | None = None,
                       max_model_len: int | None = None) -> Workload:
    """A Workload from a public trace (:mod:`simulator.cli.traces`), an oracle workload JSON, or the planner's
    own CSV/JSONL trace."""
    return load_workload(path, args, max_model_len)[0]


def load_workload(path: str, args: argparse.Namespace | None = None,
                  max_model_len: int | None = None) -> tuple[Workload, TraceReport | None]:
    """:func:`load_workload_file` with the public trace's report (None for the other kinds of file)."""
    public = read_trace_file(path, args, max_model_len, CliError)
    if public is not None:
        return public
    return _load_own_workload(path), None


def _load_own_workload(path: str) -> Workload:
    if trace_format(path) is not None:
        try:
            return read_trace(path)
        except WorkloadError as exc:
            raise CliError(f"workload: {exc}") from None
    data = _read_json(path, "workload")
    import simulator.workload.oracle_io as oracle_io  # the engine's reader of the oracle's JSON

    plain = data
    if isinstance(data, dict) and isinstance(data.get("requests"), list):
        # our multi-turn extension: the oracle reader need not know "parent"
        plain = dict(data, requests=[{k: v for k, v in r.items() if k not in ("parent", "parent_len")} if isinstance(r, dict) else r
                                     for r in data["requests"]])
    try:
        workload = oracle_io.load_workload(plain)
        return apply_parents(workload, data)
    except (WorkloadError, ValueError, KeyError, TypeError) as exc:
        raise CliError(f"workload file {path!r}: {_message(exc)}") from None


def load_config_file(path: str, *, data_parallel: dict[str, Any] | None = None,
                     sized: dict[str, Any] | None = None) -> dict[str, Any]:
    """The config JSON object (validated by building an EngineConfig). With ``data_parallel`` (a dict, ``run``'s),
    the DP fields (:data:`simulator.cluster.data_parallel.DP_FIELDS`) are taken out into it first, and
    ``"num_gpu_blocks": "auto"`` is sized for one rank of the shape
    (:func:`simulator.cluster.data_parallel.sized_rank_config`), what was sized written into ``sized``."""
    data = _read_json(path, "config")
    if data_parallel is not None and isinstance(data, dict):
        from simulator.cluster.data_parallel import DPError, sized_rank_config, split_dp_fields

        data, fields = split_dp_fields(data)
        data_parallel.update(fields)
        try:
            data, sizing = sized_rank_config(data, fields)
        except DPError as exc:
            raise CliError(f"config file {path!r}: {exc}") from None
        if sizing is not None and sized is not None:
            sized.update(sizing)
    if not isinstance(data, dict):
        raise CliError(f"config file {path!r}: must be a JSON object")
    try:  # (an acceptance trace in a file of its own, relative to the config's folder)
        data = inline_trace_file(data, Path(path).parent)
    except FieldError as exc:
        raise CliError(f"config file {path!r}: {exc}") from None
    _config(data, f"config file {path!r}")
    return data


def _config(data: dict[str, Any], where: str) -> EngineConfig:
    try:
        return EngineConfig.from_dict(data)
    except (ConfigError, TypeError, ValueError) as exc:
        raise CliError(f"{where}: {_message(exc)}") from None


def _message(exc: BaseException) -> str:
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


def _emit(text: str | Iterable[str], out: str | None, end: str = "") -> None:
    """Write ``text`` (or its pieces, in order) and ``end`` to the file ``out``, or to stdout."""
    pieces = [text] if isinstance(text, str) else text
    if out:
        try:
            with open(out, "w") as f:
                f.writelines(pieces)
                f.write(end)
        except OSError as exc:
            raise CliError(f"--output {out!r}: cannot write ({exc.strerror or exc})") from None
    else:
        sys.stdout.writelines(pieces)
        sys.stdout.write(end)


def _dump(obj: Any, indent: int | None) -> str:
    return json.dumps(jsonable(obj), indent=indent, separators=None if indent else (",", ":")) + "\n"


@contextlib.contextmanager
def _progress(what: str):
    """A progress bar on stderr when it is a terminal (tqdm), else nothing; yields ``simulate``'s callback."""
    if not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm

    fmt = "{desc}: {percentage:3.0f}%|{bar}| {elapsed} elapsed, {remaining} left"
    with tqdm(total=1.0, desc=what, file=sys.stderr, leave=False, bar_format=fmt, mininterval=0.2) as bar:
        yield lambda fraction: bar.update(max(0.0, min(1.0, fraction) - bar.n))


#: Config fields that change results, so a default assumed for them is printed (stderr).
_NOTED_DEFAULTS = ("num_gpu_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens",
                   "enable_prefix_caching", "enable_chunked_prefill", "async_scheduling", "max_model_len")


def _note_defaults(data: dict[str, Any], where: str, varied: Sequence[str] = ()) -> None:
    """Print, on stderr, every default the run assumes for what ``data`` leaves out."""
    default = EngineConfig()
    left = [f"{k}={getattr(default, k)}" for k in _NOTED_DEFAULTS if k not in data and k not in varied]
    if "cost_model" not in data and "step_time_model" not in data and not any(
            k.startswith("step_time_model.") for k in varied):
        stm = default.step_time_model
        left.append(f"step_time_model={{base_s: {stm.base_s}, per_token_s: {stm.per_token_s}, "
                    f"per_req_s: {stm.per_req_s}}} ({stm.base_s * 1000:g} ms per step whatever it computes; "
                    "give step_time_model or cost_model for real timings)")
    if left:
        sys.stderr.write(f"note: {where} leaves these at their defaults: {', '.join(left)}\n")


# --------------------------------------------------------------------------- run


def _check_memory(price, args: argparse.Namespace, what: str) -> None:
    """Refuse a run estimated past ``--max-memory-gib`` (default: 80 % of this machine's memory)."""
    from simulator.batch import OverBudget, check

    limit = args.max_memory_gib * 2**30 if args.max_memory_gib else None
    if limit is None and hasattr(os, "sysconf") and "SC_PHYS_PAGES" in os.sysconf_names:
        limit = 0.8 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        check(price, max_bytes=int(limit) if limit else None, max_seconds=None, what=what,
              advice="use fewer or shorter requests or fewer KV blocks, or raise --max-memory-gib")
    except OverBudget as exc:
        raise CliError(str(exc)) from None


def _with_policy(data: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The config object with ``--scheduling-policy`` (vLLM's flag) as its ``policy``, when given."""
    return data if args.scheduling_policy is None else {**data, "policy": args.scheduling_policy}


def _add_policy(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scheduling-policy", choices=POLICIES, metavar="{" + ",".join(POLICIES) + "}",
                        help="vLLM's --scheduling-policy, replacing the config's \"policy\": fcfs (arrival order) or "
                             "priority (each request's \"priority\" in the workload, lower first, ties by arrival; "
                             "preemption takes the lowest-priority running request)")


def cmd_run(args: argparse.Namespace) -> int:
    from simulator.batch import WorkloadSize, price_run

    dp_fields: dict[str, Any] = {}
    sized: dict[str, Any] = {}
    data = _with_policy(load_config_file(args.config, data_parallel=dp_fields, sized=sized), args)
    if sized:
        sys.stderr.write(f"num_gpu_blocks auto: {sized['num_gpu_blocks']:,} blocks a rank "
                         f"({sized['kv_cache_tokens']:,} tokens, {sized['shape']})\n")
    config = _config(data, f"config file {args.config!r}")
    dp_run = _dp_run(dp_fields, data, config, args.config)
    workload, trace = load_workload(args.workload, args, config.max_model_len)
    _check_memory(price_run(WorkloadSize.of(workload), config), args, "This run")
    if dp_run.active:
        return _cmd_run_dp(args, dp_run, workload, config, data, trace, sized)
    from simulator.batch import simulate

    if args.windows is not None and workload.arrival_unit != "s":
        raise CliError("--windows: the workload's arrivals must be in seconds")
    points = args.max_step_points or (WINDOW_STEP_POINTS if args.windows else None)
    with _progress(f"simulating {workload.n:,} requests") as progress:
        result = simulate(workload, [config], record_steps=bool(args.steps or args.windows), max_step_points=points,
                          progress=progress)[0]
    _note_defaults(data, f"config file {args.config!r}")  # after the run: an input error stays one line
    head = {"sizing": sized} if sized else {}
    if trace is not None:
        head["trace"] = trace.to_dict()
    if args.windows is not None:
        try:
            head["windows"] = time_windows(result, args.windows)
        except ValueError as exc:
            raise CliError("--" + str(exc)) from None
    if args.indent is None:
        pieces = result.json_pieces(steps=bool(args.steps))  # written piece by piece, never whole
        if head:
            next(pieces)  # '{"totals":' after the heads
            pieces = itertools.chain([json.dumps(jsonable(head), separators=(",", ":"))[:-1] + ',"totals":'], pieces)
        _emit(pieces, args.output, end="\n")
        return _limit_status(result.totals, "run")
    d = dict(result.to_dict())
    if not args.steps:
        d.pop("steps", None)
    _emit(_dump({**head, **d}, args.indent), args.output)
    return _limit_status(result.totals, "run")


def _dp_run(fields: dict[str, Any], data: dict[str, Any], config: EngineConfig, path: str):
    """The config's DP shape (:func:`simulator.cluster.data_parallel.dp_run_from_config`); a refused shape is one
    line naming the field and vLLM's rule."""
    from simulator.cluster.data_parallel import DPError, dp_run_from_config

    try:
        return dp_run_from_config(fields, data.get("cost_model"), config)
    except DPError as exc:
        raise CliError(f"config file {path!r}: {exc}") from None


def _cmd_run_dp(args: argparse.Namespace, dp_run, workload: Workload, config: EngineConfig, data, trace,
                sized: dict[str, Any]) -> int:
    """``run`` of a DP group (``data_parallel_size`` > 1 or ``enable_expert_parallel``): the group's totals,
    latency, load and every rank's figures (``data_parallel.ranks``), docs/moe_parallelism.md."""
    from simulator.cluster.data_parallel import DPError

    if args.windows is not None or args.steps:
        raise CliError("--windows / --steps: not available for a DP group yet (data_parallel_size > 1)")
    try:
        with _progress(f"simulating {workload.n:,} requests on DP {dp_run.data_parallel_size}"):
            result = dp_run.simulate(workload, config)
    except DPError as exc:
        raise CliError(f"config file {args.config!r}: {exc}") from None
    _note_defaults(data, f"config file {args.config!r}")
    d = result.to_dict()
    if trace is not None:
        d = {"trace": trace.to_dict(), **d}
    if sized:
        d = {"sizing": sized, **d}
    _emit(_dump(d, args.indent), args.output)
    return _limit_status(result.totals, "run")


def _limit_status(totals: dict[str, Any], what: str) -> int:
    """0, or 3 with a warning on stderr when the run stopped at its step limit with requests unfinished."""
    left = int(totals.get("unfinished", 0) or 0)
    if not left:
        return 0
    sys.stderr.write(f"warning: the {what} stopped at its step limit (max_steps) with {left:,} requests unfinished: "
                     f"its latencies leave them out; raise max_steps in the config (exit status 3)\n")
    return 3


# --------------------------------------------------------------------------- sweep

_CONFIG_FIELDS = {f.name for f in fields(EngineConfig)} - {"step_time_model"}
_STM_FIELDS = {f.name for f in fields(StepTimeModel)}
#: Objects of the config whose fields a --grid may vary one by one (``step_time_model.base_s``).
_SUB_FIELDS = {"step_time_model": _STM_FIELDS,
               "speculative": {"method", "num_speculative_tokens", "acceptance_rate", "seed"}}


def _grid_value(text: str) -> Any:
    t = text.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none"):
        return None
    try:
        v = json.loads(t)
        if isinstance(v, (int, float)):
            return v
    except json.JSONDecodeError:
        pass
    return t


def parse_grid(items: Sequence[str]) -> list[tuple[str, list[Any]]]:
    """``["num_gpu_blocks=1000,2000", ...]`` -> ``[("num_gpu_blocks", [1000, 2000]), ...]``."""
    grid: list[tuple[str, list[Any]]] = []
    for item in items:
        key, eq, vals = item.partition("=")
        key = key.strip()
        if not eq or not key or not vals.strip():
            raise CliError(f"--grid {item!r}: expected FIELD=V1,V2,... (e.g. num_gpu_blocks=1000,2000)")
        obj, dot, sub = key.partition(".")
        if dot and obj in _SUB_FIELDS:
            if sub not in _SUB_FIELDS[obj]:
                raise CliError(f"--grid {key}: unknown field ({obj} has {', '.join(sorted(_SUB_FIELDS[obj]))})")
        elif key not in _CONFIG_FIELDS:
            raise CliError(f"--grid {key}: unknown config field (known: {', '.join(sorted(_CONFIG_FIELDS))})")
        if any(k == key for k, _ in grid):
            raise CliError(f"--grid {key}: given twice")
        grid.append((key, [_grid_value(v) for v in vals.split(",")]))
    return grid


def _apply(base: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    d = dict(base)
    for key, value in params.items():
        obj, dot, sub = key.partition(".")
        if dot and obj in _SUB_FIELDS:
            part = dict(d.get(obj) or {})
            if sub == "acceptance_rate":  # (replaces whichever acceptance model the base gives)
                for other in ("position_acceptance_rates", "acceptance_length_probs", "acceptance_pattern",
                              "acceptance_trace"):
                    part.pop(other, None)
            part[sub] = value
            d[obj] = part
        else:
            d[key] = value
    return d


def _flat(prefix: str, d: dict[str, Any], out: dict[str, Any]) -> None:
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            _flat(f"{key}.", v, out)
        elif not isinstance(v, (list, tuple, np.ndarray)):
            out[key] = v


def cmd_sweep(args: argparse.Namespace) -> int:
    from simulator.batch import simulate

    _check_processes(args.processes)
    grid = parse_grid(args.grid or [])
    if not grid:
        raise CliError("sweep: give at least one --grid FIELD=V1,V2,...")
    npoints = math.prod(len(v) for _, v in grid)
    if npoints > MAX_SWEEP_POINTS:
        raise CliError(f"--grid: {npoints:,} points, more than the {MAX_SWEEP_POINTS:,} one sweep may hold")
    base = _with_policy(load_config_file(args.config) if args.config else {}, args)
    keys = [k for k, _ in grid]
    points = [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in grid))]
    configs = [_config(_apply(base, p), "--grid " + ", ".join(f"{k}={v}" for k, v in p.items())) for p in points]
    workload, trace = load_workload(args.workload, args, _common_max_model_len(configs))
    from simulator.batch import WorkloadSize, price_configs

    _check_memory(price_configs(WorkloadSize.of(workload), configs), args, f"This sweep of {len(configs)} points")
    with _progress(f"{len(configs)} configurations x {workload.n:,} requests") as progress:
        results = simulate(workload, configs, record_steps=False, processes=args.processes, progress=progress)
    _note_defaults(base, f"config file {args.config!r}" if args.config else "the sweep (no --config)", keys)
    rows = [{"params": p, "totals": r.to_dict()["totals"]} for p, r in zip(points, results)]
    if args.csv:
        flat = []
        for row in rows:
            f: dict[str, Any] = {}
            _flat("", row["params"], f)
            _flat("", row["totals"], f)
            flat.append(jsonable(f))
        header = list(dict.fromkeys(k for f in flat for k in f))
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
        w.writeheader()
        for f in flat:
            w.writerow({k: ("" if f.get(k) is None else f.get(k)) for k in header})
        _emit(buf.getvalue(), args.output)
    else:
        out = {"grid": dict(grid), "points": rows}
        _emit(_dump({"trace": trace.to_dict(), **out} if trace is not None else out, args.indent), args.output)
    return max(_limit_status(r.totals, "sweep point") for r in results)


def _common_max_model_len(configs: Sequence[EngineConfig]) -> int | None:
    """The max_model_len every configuration shares (a trace is cut to it), else None."""
    lens = {c.max_model_len for c in configs}
    return lens.pop() if len(lens) == 1 else None


# --------------------------------------------------------------------------- workload


def _prefix_group(text: str) -> PrefixGroup:
    from simulator.workload import PrefixGroup

    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise CliError(f"--prefix-group {text!r}: expected LEN:FRAC or LEN:FRAC:COUNT (e.g. 512:0.8:2)")
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        raise CliError(f"--prefix-group {text!r}: LEN, FRAC and COUNT must be numbers") from None
    return PrefixGroup(length=nums[0], fraction=nums[1], count=nums[2] if len(nums) == 3 else 1)


def build_spec(args: argparse.Namespace) -> WorkloadSpec:
    """The WorkloadSpec described by the ``workload`` subcommand's options."""
    from simulator.workload import PrefixGroup, TurnSpec, WorkloadSpec, parse_arrival, parse_distribution

    prompt = parse_distribution(args.prompt, name="--prompt", min=args.prompt_min, max=args.prompt_max)
    output = parse_distribution(args.output, name="--output", min=args.output_min, max=args.output_max)
    arrival = parse_arrival(args.arrival, unit=args.unit)
    groups = [_prefix_group(g) for g in args.prefix_group or []]
    if args.shared_prefix_len or args.shared_prefix_frac:
        if not (args.shared_prefix_len and args.shared_prefix_frac):
            raise CliError("--shared-prefix-len and --shared-prefix-frac go together (both > 0)")
        groups.insert(0, PrefixGroup(args.shared_prefix_len, args.shared_prefix_frac, args.num_prefixes))
    turns = None
    if args.turns:
        turns = TurnSpec(
            turns=parse_distribution(args.turns, name="--turns"),
            user_tokens=parse_distribution(args.user_tokens, name="--user-tokens"),
            think_time=args.think_time,
            seconds_per_output_token=args.seconds_per_output_token,
        )
    return WorkloadSpec(n=args.n, prompt=prompt, output=output, arrival=arrival, prefixes=tuple(groups),
                        prefix_mode=args.prefix_mode, turns=turns)


def cmd_workload(args: argparse.Namespace) -> int:
    from simulator.workload import generate_workload

    spec = build_spec(args)
    workload = generate_workload(spec, args.seed)
    buf = io.StringIO()
    write_oracle_json(workload, buf, seed=args.seed, meta={"spec": spec.to_dict(), "seed": args.seed})
    _emit(buf.getvalue(), args.out)
    return 0


# --------------------------------------------------------------------------- cluster


#: Cluster argument names -> the options that set them (error messages name the option).
_CLUSTER_OPTIONS = {"num_instances": "--instances", "router_delay_s": "--router-delay-s", "seed": "--seed",
                    "slo_ttft_s": "--slo-ttft-s", "slo_itl_s": "--slo-itl-s", "max_instances": "--max-instances"}


def _check_processes(p: int) -> None:
    from simulator.batch import MAX_PROCESSES

    if not 0 <= p <= MAX_PROCESSES:
        raise CliError(f"--processes: {p} is not a whole number from 0 to {MAX_PROCESSES}")


def _cmd_disaggregated(args: argparse.Namespace) -> int:
    """``cluster --disaggregated FILE``: prefill and decode pools (simulator/cli/disaggregated.py)."""
    from simulator.cli.disaggregated import run_disaggregated_command
    from simulator.cluster import DisaggError

    try:
        out = run_disaggregated_command(args, load_workload_file=load_workload_file, progress=_progress,
                                        check_memory=lambda price, what: _check_memory(price, args, what))
    except DisaggError as exc:
        raise CliError(str(exc)) from None
    _emit(_dump(out, args.indent), args.output)
    return 0


def _cmd_closed_loop(args: argparse.Namespace, workload, trace, config, counts, policies, data) -> int:
    """``cluster --clients N``: the workload's requests sent by N closed-loop clients (docs/traffic.md)."""
    from simulator.batch import WorkloadSize, price_run
    from simulator.cluster import ClusterError
    from simulator.cluster.closed_loop import ClosedLoop, simulate_closed_loop

    if args.find_replicas or len(counts) != 1 or len(policies) != 1:
        raise CliError("--clients: give one --instances N and one --routing (not --find-replicas)")
    think: float | str = args.think
    try:
        think = float(think)
    except ValueError:
        pass
    try:
        load = ClosedLoop(args.clients, think, paced=args.paced, seed=args.seed)
        _check_memory(price_run(WorkloadSize.of(workload), config, instances=counts[0]), args, "This closed loop")
        with _progress(f"{args.clients:,} clients x {workload.n:,} requests") as progress:
            res = simulate_closed_loop(workload, config, load, num_instances=counts[0], routing=policies[0],
                                       seed=args.seed, progress=progress)
    except ClusterError as exc:
        raise CliError(option_words(exc, {"closed_loop.clients": "--clients", "closed_loop.think_s": "--think",
                                          **_CLUSTER_OPTIONS})) from None
    _note_defaults(data, f"config file {args.config!r}")
    out = res.to_dict(requests=args.requests)
    _emit(_dump({"trace": trace.to_dict(), **out} if trace is not None else out, args.indent), args.output)
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    from simulator.cluster import ClusterError, parse_routing, smallest_replicas
    from simulator.engine import MetricsError

    if args.disaggregated or args.prefill_instances or args.decode_instances:
        return _cmd_disaggregated(args)
    if not args.config:
        raise CliError("cluster: give --config FILE (one instance's engine configuration), or --disaggregated FILE")
    counts = whole_numbers(args.instances, "--instances", CliError) if args.instances else []
    try:
        policies = [parse_routing(r) for r in (args.routing or ["round-robin"])]
    except ClusterError as exc:
        raise CliError(option_words(exc, {"routing": "--routing"})) from None
    if args.find_replicas:
        if counts:
            raise CliError("--find-replicas searches the instance count itself: leave out --instances")
        if len(policies) > 1:
            raise CliError("--find-replicas takes one --routing")
        if args.slo_ttft_s is None and args.slo_itl_s is None:
            raise CliError("--find-replicas needs --slo-ttft-s or --slo-itl-s (or both)")
    elif not counts:
        raise CliError("cluster: give --instances N (or N1,N2,...), or --find-replicas with SLOs")
    data = load_config_file(args.config)
    config = _config(data, f"config file {args.config!r}")
    workload, trace = load_workload(args.workload, args, config.max_model_len)
    if args.clients is not None:
        return _cmd_closed_loop(args, workload, trace, config, counts, policies, data)
    from simulator.batch import WorkloadSize, price_batch, price_replicas_search, price_run

    size = WorkloadSize.of(workload)
    _check_memory(price_replicas_search(size, config, args.max_instances) if args.find_replicas else
                  price_batch(price_run(size, config, instances=n) for n in counts for _ in policies), args,
                  "This cluster run")
    try:
        if args.find_replicas:
            found = smallest_replicas(workload, config, slo_ttft_s=args.slo_ttft_s, slo_itl_s=args.slo_itl_s,
                                      routing=policies[0], router_delay_s=args.router_delay_s,
                                      max_instances=args.max_instances, percentile=args.percentile,
                                      seed=args.seed)
            _note_defaults(data, f"config file {args.config!r}")
            _emit(_dump(found.to_dict(), args.indent), args.output)
            return 0
        from simulator.batch import simulate
        from simulator.cluster import Deployment

        _check_processes(args.processes)
        items = [Deployment(config, n, pol, args.router_delay_s, args.seed, args.slo_ttft_s, args.slo_itl_s)
                 for n in counts for pol in policies]
        with _progress(f"{len(items)} deployments x {workload.n:,} requests") as progress:
            done = simulate(workload, items, processes=args.processes, progress=progress)
        points = [r.to_dict(requests=args.requests) for r in done]
        _note_defaults(data, f"config file {args.config!r}")
    except (ClusterError, MetricsError) as exc:
        raise CliError(option_words(exc, _CLUSTER_OPTIONS)) from None
    out = points[0] if len(points) == 1 else {"points": points}
    _emit(_dump({"trace": trace.to_dict(), **out} if trace is not None else out, args.indent), args.output)
    return 0


# --------------------------------------------------------------------------- parser

_DIST_HELP = ("const:L | uniform:LO,HI | normal:MEAN,STD | lognormal:MEAN,STD | lognormal-mu:MU,SIGMA | "
              "paretolognormal[:ALPHA,XM,MU,SIGMA,MIX] | empirical:FILE, optionally followed by ,min=N,max=N; "
              "all in tokens")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Adds "(default: X)" to an option's help unless its help already names a default or X is None/False."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = action.default not in (None, False, argparse.SUPPRESS) and action.option_strings
        return text if not shown or "default" in text else f"{text} (default: %(default)s)"


def _plain(text: str) -> str:
    """Docstring markup for the terminal: ``x`` -> 'x'."""
    return re.sub(r"``([^`]+)``", r"'\1'", text)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m simulator", description=_plain(__doc__), formatter_class=_HelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub._parser_class = lambda **kw: _Parser(**{"formatter_class": _HelpFormatter, **kw})  # noqa: SLF001
    sub.required = True

    _add_run_parser(sub)
    _add_sweep_parser(sub)
    _add_workload_parser(sub)
    _add_cluster_parser(sub)
    _add_search_parser(sub)
    _add_validate(sub)
    from simulator.cli.day import add_day_parser

    add_day_parser(sub, add_trace_arguments)
    sub.choices["day"].set_defaults(func=cmd_day)
    return p


def cmd_day(args: argparse.Namespace) -> int:
    """``day``: a day of traffic against an autoscaling policy (simulator/cli/day.py, docs/autoscaling.md)."""
    from simulator.cli.day import run_day

    data = load_config_file(args.config)
    config = _config(data, f"config file {args.config!r}")
    workload, trace = load_workload(args.workload, args, config.max_model_len)
    out = run_day(args, workload, config, CliError)
    if trace is not None:
        out["trace"] = trace.to_dict()
    _emit(_dump(out, args.indent), args.output)
    return 0


def _add_memory_cap(parser: argparse.ArgumentParser) -> None:
    """``--max-memory-gib``, shared by the subcommands that simulate."""
    parser.add_argument("--max-memory-gib", type=float, metavar="GIB",
                        help="refuse a run estimated to need more memory (default: 80%% of this machine's)")


def _add_run_parser(sub) -> None:
    """``run``: one workload under one configuration."""
    run = sub.add_parser("run", help="simulate one workload under one configuration, print result JSON",
                         description="Simulate a workload under one engine configuration and print the result "
                         "JSON: {\"totals\": {...}, \"requests\": [...]} (plus \"steps\" with --steps).")
    _add_memory_cap(run)
    run.add_argument("--workload", required=True, metavar="FILE",
                     help="workload: the oracle's workload JSON (as it is), or a trace .csv/.jsonl "
                          "(columns arrival_time [s] or arrival_step, prompt_tokens, output_tokens, optional "
                          "id, prefix_id + prefix_len [tokens], conversation_id)")
    run.add_argument("--config", required=True, metavar="FILE",
                     help="engine configuration: the oracle's config JSON (vLLM field names; "
                          "num_gpu_blocks counts the null block)")
    run.add_argument("--steps", action="store_true", help="add the per-step time series (\"steps\")")
    run.add_argument("--max-step-points", type=int, metavar="N",
                     help="downsample the step series to at most N points (with --steps)")
    run.add_argument("--windows", type=float, metavar="SECONDS",
                     help="add \"windows\": latency percentiles, throughput and queue per SECONDS of the run "
                          "(arrivals in seconds; docs/traffic.md)")
    run.add_argument("--output", "-o", metavar="FILE", help="write the JSON here instead of stdout")
    run.add_argument("--indent", type=int, metavar="N", help="pretty-print JSON with N spaces")
    _add_policy(run)
    add_trace_arguments(run)
    run.set_defaults(func=cmd_run)


def _add_sweep_parser(sub) -> None:
    """``sweep``: one workload over a grid of configurations."""
    sw = sub.add_parser("sweep", help="simulate one workload over a grid of configurations (one batched run)",
                        description="Run one workload over the cartesian product of --grid values, as one "
                        "batched simulation. Points that make the same decisions at every step (KV block "
                        "counts past the preemption cliff, caps above the peak of running requests) share "
                        "one run, with results equal to running each alone. Prints {\"grid\": {...}, "
                        "\"points\": [{\"params\": {...}, \"totals\": {...}}, ...]} (first --grid varies "
                        "slowest), or a CSV table with --csv.")
    _add_memory_cap(sw)
    sw.add_argument("--workload", required=True, metavar="FILE", help="workload JSON or trace (as for run)")
    sw.add_argument("--config", metavar="FILE", help="base configuration JSON (default: all defaults)")
    sw.add_argument("--grid", action="append", metavar="FIELD=V1,V2,...",
                    help="a config field and its values, repeatable, e.g. num_gpu_blocks=1000,2000 or "
                         "enable_prefix_caching=true,false or step_time_model.base_s=0.02,0.03 "
                         f"(at most {MAX_SWEEP_POINTS:,} points in all)")
    sw.add_argument("--processes", type=int, default=1, metavar="P",
                    help="spread the configurations over P worker processes (0: one per CPU); "
                         "results do not depend on P")
    sw.add_argument("--csv", action="store_true", help="print a CSV table (parameters, then totals) instead of JSON")
    sw.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")
    sw.add_argument("--indent", type=int, metavar="N", help="pretty-print JSON with N spaces")
    _add_policy(sw)
    add_trace_arguments(sw)
    sw.set_defaults(func=cmd_sweep)


def _add_workload_parser(sub) -> None:
    """``workload``: a synthetic workload file."""
    wl = sub.add_parser("workload", help="generate a synthetic workload file (oracle compact JSON)",
                        description="Generate a reproducible synthetic workload and write it as the oracle's "
                        "compact workload JSON (usable by 'run', 'sweep' and the vLLM oracle). Length "
                        "distributions: " + _DIST_HELP + ".")
    wl.add_argument("--n", type=int, default=200, help="number of requests, all turns counted (1 to 2,000,000)")
    wl.add_argument("--prompt", default="normal:512,128", metavar="DIST",
                    help="prompt length distribution, tokens (before a shared prefix is prepended)")
    wl.add_argument("--prompt-min", type=int, metavar="TOKENS", help="clip prompts below (default 1)")
    wl.add_argument("--prompt-max", type=int, metavar="TOKENS", help="clip prompts above (default 10,000,000)")
    wl.add_argument("--output", default="normal:256,64", metavar="DIST", help="output length distribution, tokens")
    wl.add_argument("--output-min", type=int, metavar="TOKENS", help="clip outputs below (default 1)")
    wl.add_argument("--output-max", type=int, metavar="TOKENS", help="clip outputs above (default 10,000,000)")
    wl.add_argument("--arrival", default="burst", metavar="PROCESS",
                    help="burst (all at 0) | poisson:RATE (requests per unit) | gamma:RATE,CV (bursty: CV of "
                         "the gaps, >1 burstier) | every:K (one per K units); also the oracle's uniform:K and "
                         "poisson-time:RATE (per second)")
    wl.add_argument("--unit", choices=["step", "s"], default=None,
                    help="arrival unit: engine steps or seconds (default step; s for poisson-time)")
    wl.add_argument("--shared-prefix-len", type=int, default=0, metavar="TOKENS",
                    help="length of a shared system prompt")
    wl.add_argument("--shared-prefix-frac", type=float, default=0.0, metavar="FRAC",
                    help="fraction of requests (conversations) that start with it, 0 to 1")
    wl.add_argument("--num-prefixes", type=int, default=1, metavar="K",
                    help="distinct shared prefixes of that length, each request picking one at random")
    wl.add_argument("--prefix-group", action="append", metavar="LEN:FRAC[:COUNT]",
                    help="another prefix group: COUNT prefixes of LEN tokens shared by a fraction FRAC "
                         "(repeatable; fractions add up to at most 1)")
    wl.add_argument("--prefix-mode", choices=["prepend", "include"], default="prepend",
                    help="prepend: prefix + sampled prompt; include: the sampled length includes the prefix")
    wl.add_argument("--turns", metavar="DIST",
                    help="multi-turn: turns per conversation (e.g. const:3, uniform:1,6); each follow-up turn "
                         "re-sends the previous turn's prompt and output plus new user tokens")
    wl.add_argument("--user-tokens", default="normal:128,32", metavar="DIST",
                    help="new user tokens per follow-up turn (with --turns)")
    wl.add_argument("--think-time", type=float, default=10.0, metavar="T",
                    help="mean exponential think time before a follow-up turn, in arrival units (with --turns)")
    wl.add_argument("--seconds-per-output-token", type=float, default=0.025, metavar="S",
                    help="with --turns and --unit s: seconds per output token before the user can answer "
                         "(in steps: one step per token)")
    wl.add_argument("--seed", type=int, default=0, help="random seed (same seed, same workload)")
    wl.add_argument("--out", "-o", metavar="FILE", help="write the JSON here instead of stdout")
    wl.set_defaults(func=cmd_workload)


def _add_cluster_parser(sub) -> None:
    """``cluster``: N engine instances behind a router."""
    cl = sub.add_parser(
        "cluster", help="simulate N engine instances behind a router (replicas and routing)",
        description="Simulate one workload on N identical engine instances (data-parallel replicas, each with "
        "its own KV cache) behind a router, and print {\"num_instances\", \"routing\", \"totals\" (summed; "
        "token-weighted prefix hit rate), \"latency\", \"load\" (per-instance share of requests and "
        "tokens), \"instances\": [...]}; several --instances or --routing values print {\"points\": [...]} "
        "(instance counts vary slowest). With --find-replicas, print the smallest instance count whose TTFT "
        "and ITL percentiles meet the SLOs, with the figures of every count tried. See docs/cluster.md.")
    _add_memory_cap(cl)
    cl.add_argument("--workload", required=True, metavar="FILE", help="workload JSON or trace (as for run)")
    cl.add_argument("--config", metavar="FILE",
                    help="one instance's engine configuration JSON (as for run; every instance gets it); "
                         "required unless --disaggregated")
    cl.add_argument("--disaggregated", metavar="FILE",
                    help="a disaggregated deployment JSON instead of --config: prefill and decode pools (engine "
                         "config, instance count, routing each), the KV link, kv_bytes_per_token "
                         "(docs/disaggregated_serving.md)")
    cl.add_argument("--prefill-instances", metavar="N[,N...]",
                    help="with --disaggregated: prefill instances, replacing the file's; a list sweeps")
    cl.add_argument("--decode-instances", metavar="N[,N...]",
                    help="with --disaggregated: decode instances, replacing the file's; a list sweeps")
    cl.add_argument("--instances", metavar="N[,N...]",
                    help="number of instances, 1 to 256; a comma-separated list sweeps the count")
    cl.add_argument("--routing", action="append", metavar="POLICY",
                    help="round-robin (default) | least-loaded (fewest waiting + running, then lowest KV usage) | "
                         "prefix-affinity (instance holding the longest leading run of the prompt's blocks) | "
                         "random (seeded) | weighted:SCORER:W,... with scorers queue-depth, running, kv-usage, "
                         "prefix-affinity, round-robin (e.g. weighted:prefix-affinity:3,queue-depth:1); "
                         "repeatable to compare policies")
    cl.add_argument("--router-delay-s", type=float, default=0.0, metavar="S",
                    help="age of the router's view of each instance's prefix cache, seconds (needs arrivals in "
                         "seconds; default 0: the live cache); load signals are always current")
    cl.add_argument("--seed", type=int, default=0, help="seed of the random policy (default 0)")
    cl.add_argument("--slo-ttft-s", type=float, metavar="S",
                    help="time-to-first-token SLO, seconds (goodput in the latency summary; --find-replicas)")
    cl.add_argument("--slo-itl-s", type=float, metavar="S",
                    help="inter-token latency SLO, seconds (goodput in the latency summary; --find-replicas)")
    cl.add_argument("--find-replicas", action="store_true",
                    help="search the smallest instance count meeting the SLOs (every request finished and the "
                         "--percentile of TTFT and ITL within them); needs arrivals in seconds")
    cl.add_argument("--max-instances", type=int, default=64, metavar="N",
                    help="largest instance count --find-replicas tries (1 to 256; default 64)")
    cl.add_argument("--percentile", choices=["p50", "p90", "p99"], default="p90",
                    help="percentile of TTFT and ITL that --find-replicas compares with the SLOs (default p90)")
    cl.add_argument("--processes", type=int, default=1, metavar="P",
                    help="run the (count, policy) points over P worker processes (0: one per CPU); results do "
                         "not depend on P")
    cl.add_argument("--clients", type=int, metavar="N",
                    help="closed loop: N clients each holding one request in flight, sending the next when the "
                         "answer has arrived plus --think (vllm bench serve --max-concurrency N); a request with a "
                         "parent (a session's next turn) is sent on its parent's client; the workload's own arrival "
                         "times are ignored unless --paced (docs/traffic.md)")
    cl.add_argument("--think", default="0", metavar="S|DIST",
                    help="with --clients: think time after each answer, seconds, or exponential:MEAN or "
                         "uniform:LO,HI (default 0)")
    cl.add_argument("--paced", action="store_true",
                    help="with --clients: a request without a parent is not sent before its own arrival time (a "
                         "request rate gated by the clients, --request-rate with --max-concurrency)")
    cl.add_argument("--requests", action="store_true",
                    help="add every request's columns (with its instance) and each instance's request indices")
    cl.add_argument("--output", "-o", metavar="FILE", help="write the JSON here instead of stdout")
    cl.add_argument("--indent", type=int, metavar="N", help="pretty-print JSON with N spaces")
    add_trace_arguments(cl)
    cl.set_defaults(func=cmd_cluster)


def _add_search_parser(sub) -> None:
    """``search``: the cheapest deployment meeting an SLO (simulator/cli/search.py, docs/search.md)."""
    from simulator.cli.search import add_search_arguments

    add_search_arguments(sub.add_parser(
        "search", help="find the cheapest deployment (GPU, TP/PP, precision, max_num_seqs, replicas) meeting an SLO",
        description="Search GPUs x TP/PP x weight precision x KV dtype x max_num_seqs x replicas for the cheapest "
        "deployment whose latency percentiles meet the SLO; prints the answer, the Pareto frontier and every "
        "deployment tried with the reason it was rejected (see docs/search.md).")).set_defaults(func=cmd_search)


def cmd_search(args: argparse.Namespace) -> int:
    from simulator.cli.search import run_search_command
    from simulator.search import SearchError

    try:
        text = run_search_command(args, load_workload_file=load_workload_file)
    except SearchError as exc:
        raise CliError(str(exc)) from None
    _emit(text if text.endswith("\n") else text + "\n", args.out)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Score the roofline clock on the sim-to-real study's 13 training runs (docs/cost-model.md)."""
    from simulator.calibration import format_table, validate

    if args.against:
        from simulator.calibration.crosscheck import cross_check, format_cross_check
        from simulator.calibration.crosscheck_moe import format_moe_cross_check, moe_cross_check

        live = {"auto": None, "live": True, "shipped": False}[args.reference]
        try:
            if args.against == "aiconfigurator-moe":
                text = format_moe_cross_check(*moe_cross_check(live))
            else:
                text = format_cross_check(*cross_check(live))
        except ValueError as exc:
            raise CliError(str(exc)) from None
        _emit(text, args.output, end="\n")
        return 0
    if args.max_requests is not None and args.max_requests < 13:
        raise CliError(f"--max-requests: must be at least 13, got {args.max_requests}")
    coefficients = _read_json(args.coefficients, "coefficients") if args.coefficients else None
    _check_processes(args.processes)
    try:
        scores = validate(args.max_requests, coefficients, processes=args.processes)
    except ValueError as exc:  # CostModelError and ValidationError name the field
        raise CliError(str(exc)) from None
    _emit(format_table(scores), args.output, end="\n")
    return 0


def _add_validate(sub) -> None:
    va = sub.add_parser("validate", help="score the step clock against the 13 real vLLM runs of the training split "
                                         "(per-run and median MAPE of TTFT, ITL, E2E next to BLIS)")
    va.add_argument("--max-requests", type=int, metavar="M",
                    help="about M requests per run, each stage keeping its rate (quick check; default: all)")
    va.add_argument("--coefficients", metavar="FILE", help="JSON object of roofline coefficients to score instead "
                                                           "of the defaults (RooflineCoefficients fields)")
    va.add_argument("--processes", type=int, default=1, metavar="P", help="worker processes (0: one per CPU)")
    va.add_argument("--output", "-o", metavar="FILE", help="write the table here instead of stdout")
    va.add_argument("--against", choices=("aiconfigurator", "aiconfigurator-moe"),
                    help="instead of the real runs, compare the clock's forward pass step by step with NVIDIA "
                         "AIConfigurator's measured operators (models x GPUs x TP x precisions; median and worst "
                         "ratio per group); aiconfigurator-moe: the DP / EP clock (step_time_dp) on MoE models at "
                         "DP x EP 2-32 (docs/moe_parallelism.md)")
    va.add_argument("--reference", choices=("auto", "live", "shipped"), default="auto",
                    help="with --against: query the installed aiconfigurator-core package (live), use the table "
                         "shipped in simulator/data/aic_steps.json or aic_moe_steps.json (shipped), or live when installed (auto)")
    va.set_defaults(func=cmd_validate)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 bad input, 1 internal error, 3 step limit reached)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (CliError, WorkloadError, ConfigError) as exc:
        sys.stderr.write(f"error: {_one_line(exc)}\n")
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
    except MemoryError:
        sys.stderr.write("error: out of memory (try a smaller workload or grid)\n")
        return 2
    except Exception as exc:  # never a traceback on the command line
        sys.stderr.write(f"error: internal error ({type(exc).__name__}: {_one_line(exc)}); please report it\n")
        return 1


def _one_line(exc: BaseException) -> str:
    return " ".join(_message(exc).split())
