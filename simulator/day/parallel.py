"""A day's chunks on several processes, with the result of chunks one after another.

>>> chunks, met = chunks_in_processes(workload, config, policy, plans, cold_start_s=135.0)  # doctest: +SKIP

Chunk ``h + 1`` starts from chunk ``h``'s handover (:mod:`simulator.day.chunks`), so the chunks form a chain.
Two ways to run them on more than one core, each exact (a chunk is a function of its handover):

* **pipelined**: chunk ``h + 1`` is sent as soon as chunk ``h`` tells its handover (``on_handover``, at the last
  sync before chunk ``h + 1``'s start), while chunk ``h`` simulates its cool-down and drains: about 8 % of a
  one-hour chunk with 300 s overlaps runs beside the next one;
* **speculative** (``speculate``): a second chain starts at chunk ``K`` (about the middle) from a guessed
  handover, told by a **lead-in** (:func:`simulator.day.chunks.guess_handover`: chunk ``K - 1`` simulated from
  ``policy.start()`` replicas ready at its warm-up's start and no script, up to the handover). When the first chain tells the true handover
  of a chunk ``j`` that the second chain started from an equal one, the second chain's chunks from ``j`` on
  are those the first would have simulated, and the first stops. Until then the first chain goes on, so the
  worst case is the first chain alone, pipelined, beside a wasted one. A fleet forgets where it started within
  an hour when the policy decides on the current load (the HPA on a metric), so the chains meet at ``K``.

The processes are forked (inputs are inherited, not pickled); results come back through a queue. A process
that is itself a daemon (a Celery prefork child) cannot fork: the planner's workers run the same two chains as
Celery tasks instead (``planner/dayplans/services.py``).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

from simulator.autoscale import Policy
from simulator.base import ConfigError
from simulator.day.chunks import (
    ChunkPlan,
    DayChunk,
    Handover,
    chunk_plans,
    default_overlap_s,
    guess_handover,
    join_chunks,
    simulate_chunk,
    speculation_point,
)
from simulator.day.fleet_day import DayResult
from simulator.engine import EngineConfig
from simulator.workload import Workload

#: Most processes one day may use.
MAX_PROCESSES = 16

_INPUTS: dict[str, Any] = {}  # the day's inputs, set before the fork and inherited by the processes


def can_fork() -> bool:
    """Whether this process may fork worker processes (not in a daemon, such as a Celery prefork child)."""
    return ("fork" in multiprocessing.get_all_start_methods()
            and not multiprocessing.current_process().daemon)


def _run(chain: str, i: int, handover: Handover | None) -> None:
    """In a worker process: chunk ``i`` of ``chain`` from ``handover``; tells its handover, then the chunk."""
    c = _INPUTS
    plans, told = c["plans"], c["told"]
    try:
        if chain == "L":  # the lead-in: only the guess at chunk i + 1's handover
            told.put(("handover", chain, i, guess_handover(c["workload"], c["config"], c["policy"], plans, i + 1,
                                                           cold_start_s=c["cold_start_s"], routing=c["routing"])))
            return
        chunk = simulate_chunk(c["workload"], c["config"], c["policy"], plans[i], cold_start_s=c["cold_start_s"],
                               routing=c["routing"], handover=handover,
                               next_plan=plans[i + 1] if i + 1 < len(plans) else None,
                               on_handover=lambda h, _t: told.put(("handover", chain, i, h)))
    except Exception as exc:  # noqa: BLE001 - sent back and raised in the parent
        told.put(("error", chain, i, exc))
        return
    told.put(("chunk", chain, i, chunk))


class Chains:
    """The parent's bookkeeping: the first chain (``A``, true handovers), the lead-in (``L``) and the second
    chain (``B``), which chunks are final, and where the chains met."""

    def __init__(self, n: int, send: Callable[[str, int, Handover | None], None]) -> None:
        self.n, self.send = n, send
        self.final: dict[int, DayChunk] = {}
        self.true_start: dict[int, Handover | None] = {0: None}
        self.b_start: dict[int, Handover] = {}
        self.b_done: dict[int, DayChunk] = {}
        self.met: int | None = None

    def _meet(self, j: int) -> bool:
        """Whether chunk ``j`` on is the second chain's (its start equals the true one); met at the first."""
        if self.met is None and j in self.true_start and j in self.b_start and self.true_start[j] == self.b_start[j]:
            self.met = j
            self.final.update({i: c for i, c in self.b_done.items() if i >= j})
        return self.met is not None and j >= self.met

    def told(self, what: str, chain: str, i: int, value: Any) -> None:
        if what == "error":
            raise value
        if what == "handover":
            if chain == "A":
                self.true_start[i + 1] = value
                if not self._meet(i + 1):
                    self.send("A", i + 1, value)
            else:  # the lead-in's or the second chain's: the second chain goes on
                self.b_start[i + 1] = value
                self.send("B", i + 1, value)
                self._meet(i + 1)
        elif chain == "A" or (chain == "B" and self.met is not None and i >= self.met):
            self.final.setdefault(i, value)
        elif chain == "B":
            self.b_done[i] = value


def chunks_in_processes(workload: Workload, config: EngineConfig, policy: Policy, plans: list[ChunkPlan], *,
                        cold_start_s: float, routing: str = "least-loaded", processes: int = 2,
                        speculate: bool = True,
                        progress: Callable[[float], None] | None = None) -> tuple[list[DayChunk], int | None]:
    """The chunks of ``plans`` (:func:`simulator.day.chunks.chunk_plans`) in ``processes`` forked processes,
    pipelined, and with ``speculate`` a second chain from the middle (module docstring); each chunk as chunks
    one after another give it. Returns the chunks in order and the chunk where the chains met (None: they did
    not, or no second chain: fewer than 4 chunks, or not ``speculate``)."""
    if isinstance(processes, bool) or not isinstance(processes, int) or not 1 <= processes <= MAX_PROCESSES:
        raise ConfigError(f"must be a whole number from 1 to {MAX_PROCESSES}, got {processes!r}", field="processes")
    if not can_fork():
        raise ConfigError("this process cannot fork worker processes (a daemon: run the chunks one after "
                          "another)", field="processes")
    n = len(plans)
    ctx = multiprocessing.get_context("fork")
    told = ctx.Queue()
    _INPUTS.update(workload=workload, config=config, policy=policy, plans=plans, cold_start_s=float(cold_start_s),
                   routing=routing, told=told)
    try:
        with ctx.Pool(processes) as pool:
            def send(chain: str, i: int, handover: Handover | None) -> None:
                pool.apply_async(_run, (chain, i, handover))

            chains = Chains(n, send)
            send("A", 0, None)
            k = speculation_point(n)  # the first chain: chunks 0..k-1; the lead-in (chunk k-1), the second: k..n-1
            if speculate and k is not None:
                send("L", k - 1, None)
            while len(chains.final) < n:
                chains.told(*told.get())
                if progress is not None:
                    progress(len(chains.final) / n)
            pool.terminate()  # what is left runs a chain nobody needs any more
    finally:
        _INPUTS.clear()
    return [chains.final[i] for i in range(n)], chains.met


def simulate_day_in_processes(workload: Workload, config: EngineConfig, policy: Policy, *, chunk_s: float = 3600.0,
                              overlap_s: float | None = None, cold_start_s: float = 135.0,
                              routing: str = "least-loaded", processes: int = 2, speculate: bool = True,
                              progress: Callable[[float], None] | None = None) -> tuple[DayResult, int | None]:
    """:func:`simulator.day.simulate_day_in_chunks`'s day (the same result) from :func:`chunks_in_processes`;
    also the chunk where the chains met."""
    if not isinstance(workload, Workload) or workload.arrival_unit != "s":
        raise ConfigError("a day needs arrivals in seconds", field="workload")
    if overlap_s is None:
        overlap_s = default_overlap_s(policy)
    plans = chunk_plans(float(workload.arrival.max(initial=0.0)), chunk_s, overlap_s, float(policy.sync_s))
    chunks, met = chunks_in_processes(workload, config, policy, plans, cold_start_s=cold_start_s, routing=routing,
                                      processes=processes, speculate=speculate, progress=progress)
    return join_chunks(workload, chunks, policy, cold_start_s=cold_start_s, routing=routing), met


__all__ = ["MAX_PROCESSES", "Chains", "can_fork", "chunks_in_processes", "simulate_day_in_processes"]
