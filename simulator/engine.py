"""Public entry point: simulate one workload under a batch of engine configurations.

>>> from simulator.engine import simulate
>>> results = simulate(workload, [EngineConfig(num_gpu_blocks=2000)])  # doctest: +SKIP
>>> results[0].totals["preemptions"]                                   # doctest: +SKIP

Each configuration's result is exactly what simulating it alone gives. The
decision kernel is :mod:`simulator._fast` (vLLM 0.33.0's v1 scheduler rules
over struct-of-arrays state, see ``docs/simulator.md``), bit-identical to the
scalar reference kernel kept in ``tests/simulator/reference_core.py``.
Configurations run through their own kernels and share the workload-derived
precomputation (:class:`simulator._fast.WorkloadPrep`); with ``processes > 1``
they are spread over that many forked worker processes (each configuration
still runs alone, so results do not depend on the number of processes). They
are not advanced in lockstep over a batch axis.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np

from simulator._fast import FastEngine, StepTimeFn, WorkloadPrep
from simulator.config import ConfigError, EngineConfig
from simulator.results import SimResult
from simulator.workload import Workload

MAX_PROCESSES = 64  # worker processes one batch may use


def simulate(
    workload: Workload,
    configs: Sequence[EngineConfig],
    *,
    record_steps: bool = False,
    max_step_points: int | None = None,
    progress: Callable[[float], None] | None = None,
    step_time: Sequence[StepTimeFn | None] | None = None,
    step_cost=None,
    processes: int = 1,
) -> list[SimResult]:
    """Simulate ``workload`` under each of ``configs``.

    Parameters
    ----------
    workload : Workload
    configs : sequence of EngineConfig, length B
    record_steps : bool
        Return the per-step series in ``SimResult.steps``.
    max_step_points : int, optional
        Downsample each step series to at most this many points (evenly
        spaced schedule calls, always keeping the first and last).
    progress : callable, optional
        Called with the completed fraction in [0, 1] (all configurations).
    step_time : sequence of callables, optional
        Per configuration ``(num_tokens, num_reqs) -> seconds`` replacing the
        linear ``step_time_model`` (for cost models).
    step_cost : BatchStepTime-like, optional
        A batched cost model over the B configurations (e.g.
        :class:`simulator.cost_model.BatchStepTime`): each step of
        configuration ``b`` takes ``step_cost.step_time(prefill_tokens,
        prefill_attention_tokens, decode_tokens, decode_context_tokens,
        num_reqs)[b]`` seconds, with the inputs taken from the scheduled
        batch (see :meth:`simulator._fast.FastEngine.step_terms`). Overrides
        ``step_time``; decode-stretch jumps are off while it is set.
    processes : int
        Worker processes for a batch (1: in this process; 0: one per CPU).
        Forked, so only on platforms with ``fork`` and outside daemonic
        processes (a Celery prefork child runs its batch in process).

    Returns
    -------
    list of SimResult, length B, in the order of ``configs``.
    """
    if not isinstance(workload, Workload):
        raise TypeError("workload: must be a simulator.workload.Workload")
    configs = list(configs)
    for i, c in enumerate(configs):
        if not isinstance(c, EngineConfig):
            raise ConfigError(f"configs[{i}]: must be an EngineConfig")
    if max_step_points is not None and max_step_points < 2:
        raise ValueError("max_step_points: must be at least 2")
    if step_time is not None and len(step_time) != len(configs):
        raise ValueError("step_time: one entry per configuration")
    if not isinstance(processes, int) or not 0 <= processes <= MAX_PROCESSES:
        raise ValueError(f"processes: must be a whole number from 0 to {MAX_PROCESSES}")
    nb = len(configs)
    prep = WorkloadPrep(workload)

    def one(b: int, sub=None) -> SimResult:
        sim = FastEngine(workload, configs[b], record_steps=record_steps, prep=prep,
                         step_time=None if step_time is None else step_time[b],
                         step_cost=step_cost, cost_index=b)
        sim.run_all(sub)
        return _result(sim, record_steps, max_step_points)

    workers = min(processes or os.cpu_count() or 1, nb)
    if workers > 1 and _can_fork():
        return _in_processes(one, nb, workers, progress)
    out = []
    for b in range(nb):
        sub = None
        if progress is not None:
            def sub(f: float, b: int = b) -> None:
                progress((b + f) / nb)
        out.append(one(b, sub))
        if progress is not None:
            progress((b + 1) / nb)
    return out


_JOB: Callable[[int], SimResult] | None = None  # the batch a forked worker runs (inherited, not pickled)
_JOB_LOCK = threading.Lock()  # one batch at a time sets _JOB (threads of one process)


def _run_job(b: int) -> SimResult:
    return _JOB(b)


def _can_fork() -> bool:
    return ("fork" in multiprocessing.get_all_start_methods()
            and not multiprocessing.current_process().daemon)


def _in_processes(one: Callable[[int], SimResult], nb: int, workers: int,
                  progress: Callable[[float], None] | None) -> list[SimResult]:
    """Run configurations ``0 .. nb-1`` in ``workers`` forked processes (progress per configuration)."""
    global _JOB
    out: list[SimResult | None] = [None] * nb
    with _JOB_LOCK:
        _JOB = one
        try:
            ctx = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                futures = {pool.submit(_run_job, b): b for b in range(nb)}
                for done, fut in enumerate(as_completed(futures), 1):
                    out[futures[fut]] = fut.result()
                    if progress is not None:
                        progress(done / nb)
        finally:
            _JOB = None
    return out


def _result(sim, record_steps: bool, max_points: int | None) -> SimResult:
    """Assemble a SimResult from a finished :class:`FastEngine` (or the scalar reference)."""
    wl = sim.wl
    t = dict(sim.t)
    usable = sim.pool.usable
    t["unfinished"] = sim.unfinished
    t["requests_preempted_at_least_once"] = int((sim.npre > 0).sum())
    q_ = t["prefix_cache_queries"]
    t["prefix_cache_hit_rate"] = t["prefix_cache_hits"] / q_ if q_ else 0.0
    t["peak_kv_usage"] = t["peak_kv_blocks_used"] / usable
    steps = t.pop("kv_block_steps")
    t["mean_kv_usage"] = steps / t["num_steps"] / usable if t["num_steps"] else 0.0
    pool = sim.pool
    t["prefix_cache_evictions"] = pool.evictions
    t["mean_block_lifetime_steps"] = pool.lifetime_sum / pool.reuses if pool.reuses else 0.0
    t["mean_block_idle_steps"] = pool.idle_sum / pool.reuses if pool.reuses else 0.0
    tiers = getattr(sim, "tiers", None)  # the scalar reference kernel has none
    if tiers is not None:
        t.update(tiers.totals())
    if wl.arrival_unit == "s" or getattr(getattr(sim, "cfg", None), "cost_model", None) is not None:
        t["duration_s"] = sim.clock
    status = sim.status
    names = np.array(["waiting", "running", "waiting", "finished", "dropped_unservable"])
    requests = {
        "id": wl.ids,
        "prompt_len": wl.prompt_len,
        "max_tokens": wl.output_len,
        "arrival": wl.arrival,
        "first_scheduled_step": sim.first_sched.copy(),
        "first_token_step": sim.first_token.copy(),
        "finish_step": sim.finish.copy(),
        "num_preemptions": sim.npre.copy(),
        "prefix_hit_tokens": sim.hit_first.copy(),
        "num_output_tokens": sim.tok - wl.prompt_len,
        "first_token_time_s": sim.first_token_t.copy(),
        "finish_time_s": sim.finish_t.copy(),
        "status": tuple(names[status].tolist()),
    }
    series = None
    if record_steps and sim.log is not None:
        log = sim.log
        series = {
            "step": np.array(log["step"], np.int64),
            "time_s": np.array(log["time_s"], np.float64),
            "num_running": np.array(log["num_running"], np.int64),
            "num_waiting": np.array(log["num_waiting"], np.int64),
            "num_scheduled_tokens": np.array(log["num_scheduled_tokens"], np.int64),
            "kv_blocks_used": np.array(log["kv_blocks_used"], np.int64),
            "num_preempted": np.array(log["num_preempted"], np.int64),
        }
        series["kv_usage"] = series["kv_blocks_used"] / usable
        if wl.arrival_unit != "s":
            del series["time_s"]
        m = len(series["step"])
        if max_points is not None and m > max_points:
            idx = np.unique(np.linspace(0, m - 1, max_points).round().astype(np.int64))
            series = {k: v[idx] for k, v in series.items()}
    return SimResult(totals=t, requests=requests, steps=series, arrival_unit=wl.arrival_unit)
