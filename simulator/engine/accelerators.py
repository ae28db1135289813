"""Accelerators: shortcuts that fast-forward the engine's state with the results unchanged.

Each :class:`Accelerator` says which runs it supports (:meth:`Accelerator.supports`, from the
:class:`RunFacts` of a run: its configuration, its workload's sharing, the engine's hooks); a run
takes those that support it, none with ``accelerate=False`` (:func:`simulator.batch.runner.simulate`:
same results, slower; the tests compare the two on random runs). The engine reads the names taken
(:func:`choose`) once, when it starts.

A feature the shortcuts do not model is one more condition in the ``supports`` of each accelerator it
breaks, or, where it breaks them all, in :func:`choose`: speculative decoding with ``k > 0`` draft
tokens per step (a decoder no longer gains exactly one token a step) takes none of them.

The accelerators (name: what it skips; where it lives):

* ``own_keys``: reference counts and hash entries of blocks in use, evictions demoted to the tiers in
  bulk, admission's early "the whole prompt cannot fit" check (:mod:`simulator.engine.pool`,
  :mod:`simulator.engine.scheduler`);
* ``release_runs``: prefix lookups whose hits a request's own release run already tells (``hit_run``),
  checks of loads kept from that run (:mod:`simulator.engine.scheduler`, :mod:`simulator.engine.tier_loads`);
* ``lazy_decoders``: per-step work for running requests that only decode, their state kept implicit
  (:mod:`simulator.engine.lazy_decoders`);
* ``decode_jumps``: decode-only stretches in one go (:mod:`simulator.engine.decode_jumps`);
* ``lazy_windows``: several lazy decode steps in one call (:mod:`simulator.engine.lazy_decoders`);
* ``sure_checks``: pool and tier checks whose answer is known (a whole release run, a tier read sure
  to hit, a kept load) (:mod:`simulator.engine.pool`, :mod:`simulator.engine.tiers`, :mod:`simulator.engine.tier_loads`);
* ``shared_schedules``: configurations of a batch derived from one run of another (other block
  counts, running caps) (:mod:`simulator.batch.sharing`, :mod:`simulator.batch.runner`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simulator.engine.config import EngineConfig


@dataclass(frozen=True)
class RunFacts:
    """What the accelerators' conditions read of one run.

    Attributes
    ----------
    config : EngineConfig
    own_keys : bool
        Every content key belongs to one request (no shared prefix, no multi-turn parent): a block
        is then held by one request at most, and its keys published only by it, in order.
    outputs_shared : bool
        Some request starts with full blocks that its parent fills while decoding (a multi-turn
        follow-up re-reading its parent's output; :attr:`simulator.engine.keyspace.KeySpace.outputs_shared`).
        A trace's shared leading blocks lie inside the parent's prompt: False.
    max_model_len_binds : bool
        Some context comes near ``max_model_len``, which may then stop a request.
    has_tiers : bool
        KV tiers are attached to the pool (they need prefix caching).
    batched_cost_hook : bool
        A batched ``step_cost`` hook times the steps (a sweep's shared cost model).
    holds_finished_blocks : bool
        The engine's hooks may keep a finished request's blocks (:mod:`simulator.engine.hooks`; a
        disaggregated prefill instance until the decode side has read them).
    """

    config: EngineConfig
    own_keys: bool
    outputs_shared: bool
    max_model_len_binds: bool
    has_tiers: bool
    batched_cost_hook: bool
    holds_finished_blocks: bool = False

    @property
    def deferred_publication(self) -> bool:
        """A decoder's newly full blocks may wait to be published: unless a follow-up re-reads its parent's
        output, nobody looks them up while it runs (they are its own keys, no other request's prompt holds
        them, and it is not waiting)."""
        return self.config.enable_prefix_caching and not self.outputs_shared

    @property
    def offloads_every_step(self) -> bool:
        """``kv_offload_threshold`` moves cached blocks to the CPU tier after every step."""
        return self.has_tiers and self.config.kv_offload_threshold is not None


@dataclass(frozen=True)
class Accelerator:
    """One shortcut: its name and the runs it supports (``supports(run) -> bool``)."""

    name: str
    supports: Callable[[RunFacts], bool]


def _own_keys(run: RunFacts) -> bool:
    return run.own_keys


def _release_runs(run: RunFacts) -> bool:
    # a tiered request's GPU hits are the first keys of its release run still cached: exact with the
    # whole-prompt admission rule, chunked prefill, max_model_len out of reach and no early offloads
    # (they evict without allocating)
    cfg = run.config
    return (_own_keys(run) and run.has_tiers and cfg.scheduler_reserve_full_isl and cfg.enable_chunked_prefill
            and not run.max_model_len_binds and not run.offloads_every_step)


def _lazy_decoders(run: RunFacts) -> bool:
    # asynchronous scheduling only with deferred (or no) publication; they finish requests outside the
    # step's output, where no hook sees them; their preemptions take running[-1] (FCFS)
    cfg = run.config
    return not run.max_model_len_binds and not run.holds_finished_blocks and cfg.policy == "fcfs" and (
        not cfg.async_scheduling or run.deferred_publication or not cfg.enable_prefix_caching)


def _decode_jumps(run: RunFacts) -> bool:
    # synchronous scheduling, one clock per configuration, no offload after every step
    return not run.config.async_scheduling and not run.batched_cost_hook and not run.offloads_every_step


def _lazy_windows(run: RunFacts) -> bool:
    return _decode_jumps(run) and not run.holds_finished_blocks and (run.deferred_publication or not run.config.enable_prefix_caching)


def _always(run: RunFacts) -> bool:
    return True


def speculating(config: EngineConfig) -> bool:
    """Draft tokens each step (speculative decoding, ``k > 0``): a decoder may gain several tokens a step."""
    return config.speculative is not None and config.speculative.enabled


def may_share_schedules(config: EngineConfig) -> bool:
    """Whether ``config`` may share a schedule with others of a batch (:mod:`simulator.batch.sharing`) when the
    workload's keys are each one request's own: vLLM's prefix cache, no watermark, no offload after every
    step, no draft tokens (the pool's margins are not recorded for lookahead slots), FCFS scheduling (a
    priority preemption's victim depends on more than the margins)."""
    return (not config.watermark and config.prefix_cache == "vllm" and config.kv_offload_threshold is None
            and not speculating(config) and config.policy == "fcfs")


def _shared_schedules(run: RunFacts) -> bool:
    return run.own_keys and may_share_schedules(run.config)


#: Every accelerator, in the order of the module's list.
ACCELERATORS = (
    Accelerator("own_keys", _own_keys),
    Accelerator("release_runs", _release_runs),
    Accelerator("lazy_decoders", _lazy_decoders),
    Accelerator("decode_jumps", _decode_jumps),
    Accelerator("lazy_windows", _lazy_windows),
    Accelerator("sure_checks", _always),
    Accelerator("shared_schedules", _shared_schedules),
)


def choose(run: RunFacts, accelerate: bool = True) -> frozenset[str]:
    """Names of the accelerators ``run`` takes: every one that supports it; none when not ``accelerate``."""
    if not accelerate or speculating(run.config):
        # every accelerator assumes one token per decode step: a run with draft tokens takes none
        return frozenset()
    return frozenset(a.name for a in ACCELERATORS if a.supports(run))


__all__ = ["ACCELERATORS", "Accelerator", "RunFacts", "choose", "may_share_schedules", "speculating"]
