"""Public entry point: simulate one workload under a batch of engine configurations.

>>> from simulator.engine import simulate
>>> results = simulate(workload, [EngineConfig(num_gpu_blocks=2000)])  # doctest: +SKIP
>>> results[0].totals["preemptions"]                                   # doctest: +SKIP

Each configuration's result is exactly what simulating it alone gives. The
engine is :class:`simulator._fast.FastEngine` (vLLM 0.33.0's v1 scheduler rules
over struct-of-arrays state, assembled from :mod:`simulator.scheduler`, the block
pool, the clock and the accelerators: see the engine map in ``docs/simulator.md``),
bit-identical to the scalar reference kernel kept in ``tests/simulator/reference_core.py``.
``accelerate=False`` switches every shortcut off (same results, slower).
Configurations share the workload-derived precomputation
(:class:`simulator._fast.WorkloadPrep`), and those that make the same decisions
at every step share one run: a leader runs, and the configurations it covers
(other KV block counts, caps above its peak of running requests) are derived
exactly, each with its own block pool metrics (:mod:`simulator.sharing`). With
``processes > 1`` the leaders run in that many forked worker processes; results
do not depend on the number of processes.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import TYPE_CHECKING

import numpy as np

from simulator._fast import FastEngine, StepTimeFn, WorkloadPrep
from simulator.config import ConfigError, EngineConfig
from simulator.results import SimResult
from simulator.serving import apply_serving
from simulator.sharing import LeaderQueue, covers, share_key, shared_pool_factory
from simulator.speculative import spec_totals
from simulator.workload import Workload

if TYPE_CHECKING:
    from simulator.cluster import ClusterResult, Deployment

MAX_PROCESSES = 64  # worker processes one batch may use


def simulate(
    workload: Workload,
    configs: Sequence[EngineConfig | Deployment],
    *,
    record_steps: bool = False,
    max_step_points: int | None = None,
    progress: Callable[[float], None] | None = None,
    step_time: Sequence[StepTimeFn | None] | None = None,
    step_cost=None,
    processes: int = 1,
    accelerate: bool = True,
) -> list[SimResult | ClusterResult]:
    """Simulate ``workload`` under each of ``configs``.

    Parameters
    ----------
    workload : Workload
    configs : sequence of EngineConfig or Deployment, length B
        A :class:`simulator.cluster.Deployment` item (N replicas behind a
        router) gives a :class:`simulator.cluster.ClusterResult` equal to
        running it alone; it runs in the same queue and worker processes as
        the plain configurations, and shares no schedule with them.
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
    accelerate : bool
        Take the engine's shortcuts (lazy decoders, decode jumps, lazy windows, own-key pool
        paths, kept tier loads) and share schedules across configurations. ``False`` runs every
        configuration alone, one step at a time through the general path: the same results,
        slower (the tests compare the two). Deployment items always run accelerated.

    Returns
    -------
    list of SimResult (ClusterResult for a Deployment), length B, in the order of ``configs``.
    """
    clusters, configs = _checked(workload, configs, max_step_points, step_time, step_cost, processes)
    nb = len(configs)
    prep = WorkloadPrep(workload)
    for d in clusters.values():
        d.check(workload, prep)
    shared = accelerate and step_time is None and step_cost is None  # per-configuration hooks: each runs alone
    queue = LeaderQueue(configs, [share_key(c, prep) if shared and b not in clusters else None
                                  for b, c in enumerate(configs)])

    def job(lead: int, others: list[int], sub=None) -> dict[int, SimResult]:
        """Run configuration ``lead``; its result and those of ``others`` its run gives exactly."""
        if lead in clusters:
            return {lead: clusters[lead].run(workload, prep=prep, record_steps=record_steps,
                                             max_step_points=max_step_points, progress=sub)}
        sizes = sorted({configs[b].num_gpu_blocks for b in others} - {configs[lead].num_gpu_blocks})
        sim = FastEngine(workload, configs[lead], record_steps=record_steps, prep=prep,
                         step_time=None if step_time is None else step_time[lead],
                         step_cost=step_cost, cost_index=lead,
                         pool_factory=shared_pool_factory(sizes) if sizes else None, accelerate=accelerate)
        sim.run_all(sub)
        out = {lead: _result(sim, record_steps, max_step_points)}
        for b in others:
            got = covers(sim, configs[b], sim._unservable)
            if got is not None:
                out[b] = _result(sim, record_steps, max_step_points, *got)
        return out

    results: list[SimResult | None] = [None] * nb
    workers = min(processes or os.cpu_count() or 1, nb)
    if workers > 1 and _can_fork():
        _in_processes(job, queue, results, workers, progress)
        return results
    while not queue.empty():
        lead, others = queue.next()
        sub = None
        if progress is not None:
            done = sum(r is not None for r in results)

            def sub(f: float, done: int = done) -> None:
                progress((done + f) / nb)
        got = job(lead, others, sub)
        for b, r in got.items():
            results[b] = r
        queue.done(lead, list(got))
        if progress is not None:
            progress(sum(r is not None for r in results) / nb)
    return results


def _checked(workload, configs, max_step_points, step_time, step_cost, processes):
    """:func:`simulate`'s arguments checked: the Deployment items by index, and every item's config."""
    from simulator.cluster import Deployment  # (simulator.cluster builds on this module)

    if not isinstance(workload, Workload):
        raise TypeError("workload: must be a simulator.workload.Workload")
    items = list(configs)
    for i, c in enumerate(items):
        if not isinstance(c, (EngineConfig, Deployment)):
            raise ConfigError(f"configs[{i}]: must be an EngineConfig or a simulator.cluster.Deployment")
    clusters = {i: d for i, d in enumerate(items) if isinstance(d, Deployment)}
    if clusters and (step_time is not None or step_cost is not None):
        raise ValueError("step_time, step_cost: not supported in a batch with Deployment items "
                         "(give the cost model in the configuration)")
    configs = [d.config if isinstance(d, Deployment) else d for d in items]
    if max_step_points is not None and max_step_points < 2:
        raise ValueError("max_step_points: must be at least 2")
    if step_time is not None and len(step_time) != len(configs):
        raise ValueError("step_time: one entry per configuration")
    if not isinstance(processes, int) or not 0 <= processes <= MAX_PROCESSES:
        raise ValueError(f"processes: must be a whole number from 0 to {MAX_PROCESSES}")
    return clusters, configs


_JOB: Callable[..., dict[int, SimResult]] | None = None  # the batch a forked worker runs (inherited, not pickled)
_JOB_LOCK = threading.Lock()  # one batch at a time sets _JOB (threads of one process)


def _run_job(lead: int, others: list[int]) -> dict[int, SimResult]:
    return _JOB(lead, others)


def _can_fork() -> bool:
    return ("fork" in multiprocessing.get_all_start_methods()
            and not multiprocessing.current_process().daemon)


def _in_processes(job: Callable[..., dict[int, SimResult]], queue: LeaderQueue, results: list,
                  workers: int, progress: Callable[[float], None] | None) -> None:
    """Run the queue's leaders in ``workers`` forked processes, filling ``results``."""
    global _JOB
    nb = len(results)
    with _JOB_LOCK:
        _JOB = job
        try:
            ctx = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                futures: dict = {}

                def fill() -> None:
                    while len(futures) < workers:
                        nxt = queue.next()
                        if nxt is None:
                            return
                        futures[pool.submit(_run_job, *nxt)] = nxt[0]

                fill()
                while futures:
                    finished, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        lead = futures.pop(fut)
                        got = fut.result()
                        for b, r in got.items():
                            if results[b] is None:
                                results[b] = r
                        queue.done(lead, list(got))
                        if progress is not None:  # once per finished leader, however many finish together
                            progress(sum(r is not None for r in results) / nb)
                    fill()
        finally:
            _JOB = None


def _result(sim, record_steps: bool, max_points: int | None, pool=None, tiers=None) -> SimResult:
    """Assemble a SimResult from a finished :class:`FastEngine` (or the scalar reference).

    ``pool``, ``tiers``: the block pool and KV tiers to report (default the engine's), for a
    configuration that shared the engine's schedule (:mod:`simulator.sharing`).
    """
    wl = sim.wl
    t = dict(sim.t)
    if pool is None:
        pool = sim.pool
    usable = pool.usable
    t["unfinished"] = sim.unfinished
    t["requests_preempted_at_least_once"] = int((sim.npre > 0).sum())
    q_ = t["prefix_cache_queries"]
    t["prefix_cache_hit_rate"] = t["prefix_cache_hits"] / q_ if q_ else 0.0
    t["peak_kv_usage"] = t["peak_kv_blocks_used"] / usable
    steps = t.pop("kv_block_steps")
    t["mean_kv_usage"] = steps / t["num_steps"] / usable if t["num_steps"] else 0.0
    t["prefix_cache_evictions"] = pool.evictions
    t["mean_block_lifetime_steps"] = pool.lifetime_sum / pool.reuses if pool.reuses else 0.0
    t["mean_block_idle_steps"] = pool.idle_sum / pool.reuses if pool.reuses else 0.0
    if tiers is None:
        tiers = getattr(sim, "tiers", None)  # the scalar reference kernel has none
    if tiers is not None:
        t.update(tiers.totals())
    t.update(spec_totals(sim))
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
    result = SimResult(totals=t, requests=requests, steps=series, arrival_unit=wl.arrival_unit)
    # time a served request pays outside the engine steps, added here once for every caller (docs/cost-model.md)
    return apply_serving(result, getattr(getattr(sim, "cfg", None), "cost_model", None))
