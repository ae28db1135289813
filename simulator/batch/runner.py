"""Public entry point: simulate one workload under a batch of engine configurations.

>>> from simulator.batch.runner import simulate
>>> results = simulate(workload, [EngineConfig(num_gpu_blocks=2000)])  # doctest: +SKIP
>>> results[0].totals["preemptions"]                                   # doctest: +SKIP

Each configuration's result is exactly what simulating it alone gives. The
engine is :class:`simulator.engine.core.FastEngine` (vLLM 0.33.0's v1 scheduler rules
over struct-of-arrays state, assembled from :mod:`simulator.engine.scheduler`, the block
pool, the clock and the accelerators: see the engine map in ``docs/simulator.md``),
bit-identical to the scalar reference kernel kept in ``tests/simulator/reference_core.py``.
``accelerate=False`` switches every shortcut off (same results, slower).
Configurations share the workload-derived precomputation
(:class:`simulator.engine.core.WorkloadPrep`), and those that make the same decisions
at every step share one run: a leader runs, and the configurations it covers
(other KV block counts, caps above its peak of running requests) are derived
exactly, each with its own block pool metrics (:mod:`simulator.batch.sharing`). With
``processes > 1`` the leaders run in that many forked worker processes; results
do not depend on the number of processes.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from simulator.batch.sharing import LeaderQueue, covers, share_key, shared_pool_factory
from simulator.cluster import ClusterResult, Deployment
from simulator.engine import FastEngine, SimResult, StepTimeFn, WorkloadPrep, assemble_result
from simulator.engine.config import ConfigError, EngineConfig
from simulator.workload import Workload

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
    on_result: Callable[[int, SimResult | ClusterResult], None] | None = None,
) -> list[SimResult | ClusterResult]:
    """Simulate ``workload`` under each of ``configs``.

    Parameters
    ----------
    workload : Workload
    configs : sequence of EngineConfig or Deployment, length B
        A :class:`simulator.cluster.replicas.Deployment` item (N replicas behind a
        router) gives a :class:`simulator.cluster.replicas.ClusterResult` equal to
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
        :class:`simulator.clock.cost_model.BatchStepTime`): each step of
        configuration ``b`` takes ``step_cost.step_time(prefill_tokens,
        prefill_attention_tokens, decode_tokens, decode_context_tokens,
        num_reqs)[b]`` seconds, with the inputs taken from the scheduled
        batch (see :meth:`simulator.engine.core.FastEngine.step_terms`). Overrides
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
    on_result : callable, optional
        Called with ``(b, result)`` as soon as configuration ``b`` is finished, before the others are (a
        caller that stops the batch part-way, e.g. from ``progress``, keeps what was finished).

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
        out = {lead: assemble_result(sim, record_steps, max_step_points)}
        for b in others:
            got = covers(sim, configs[b], sim._unservable)
            if got is not None:
                out[b] = assemble_result(sim, record_steps, max_step_points, *got)
        return out

    results: list[SimResult | None] = [None] * nb
    workers = min(processes or os.cpu_count() or 1, nb)
    if workers > 1 and _can_fork():
        _in_processes(job, queue, results, workers, progress, on_result)
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
            if on_result is not None:
                on_result(b, r)
        queue.done(lead, list(got))
        if progress is not None:
            progress(sum(r is not None for r in results) / nb)
    return results


def _checked(workload, configs, max_step_points, step_time, step_cost, processes):
    """:func:`simulate`'s arguments checked: the Deployment items by index, and every item's config."""
    if not isinstance(workload, Workload):
        raise ConfigError("must be a simulator.workload.requests.Workload", field="workload")
    items = list(configs)
    for i, c in enumerate(items):
        if not isinstance(c, (EngineConfig, Deployment)):
            raise ConfigError("must be an EngineConfig or a simulator.cluster.replicas.Deployment", field=f"configs[{i}]")
    clusters = {i: d for i, d in enumerate(items) if isinstance(d, Deployment)}
    if clusters and (step_time is not None or step_cost is not None):
        raise ConfigError("not supported in a batch with Deployment items (give the cost model in the "
                          "configuration)", field="step_time, step_cost")
    configs = [d.config if isinstance(d, Deployment) else d for d in items]
    if max_step_points is not None and max_step_points < 2:
        raise ConfigError("must be at least 2", field="max_step_points")
    if step_time is not None and len(step_time) != len(configs):
        raise ConfigError("one entry per configuration", field="step_time")
    if not isinstance(processes, int) or not 0 <= processes <= MAX_PROCESSES:
        raise ConfigError(f"must be a whole number from 0 to {MAX_PROCESSES}", field="processes")
    return clusters, configs


_JOB: Callable[..., dict[int, SimResult]] | None = None  # the batch a forked worker runs (inherited, not pickled)
_JOB_LOCK = threading.Lock()  # one batch at a time sets _JOB (threads of one process)


def _run_job(lead: int, others: list[int]) -> dict[int, SimResult]:
    return _JOB(lead, others)


def _can_fork() -> bool:
    return ("fork" in multiprocessing.get_all_start_methods()
            and not multiprocessing.current_process().daemon)


def _in_processes(job: Callable[..., dict[int, SimResult]], queue: LeaderQueue, results: list,
                  workers: int, progress: Callable[[float], None] | None, on_result=None) -> None:
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
                                if on_result is not None:
                                    on_result(b, r)
                        queue.done(lead, list(got))
                        if progress is not None:  # once per finished leader, however many finish together
                            progress(sum(r is not None for r in results) / nb)
                    fill()
        finally:
            _JOB = None
