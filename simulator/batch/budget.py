"""Price a run before it runs: the memory and time a simulation will take, from its inputs.

A simulation's memory grows with three things the engine allocates up front
(``simulator/engine/core.py``, ``simulator/engine/pool.py``, ``simulator/engine/tiers.py``):

- one content key per block of every request's context (``ceil((prompt + output
  + 2) / block_size) + 1`` keys per request): the pool's key table (``kblock``),
  the shared-prefix map and the own-keys index, 8 bytes each, plus 16 bytes per
  key for each KV tier below the GPU;
- the GPU block pool: about 72 bytes per block (free stack, reference counts,
  birth and last-use steps, hash, FIFO position; 65 bytes allocated, measured
  with ``tracemalloc`` at a million blocks);
- a fixed 8 MiB per run (queues and step records; 2.5 MiB measured);
- per-request columns and results (about 1.5 KiB per request, measured 1.0).

Its time grows with engine steps (the cost grows with scheduling events, not
tokens, but a step is the unit every event belongs to). Steps are estimated as
the prefill steps (prompt tokens / the step's token budget) plus the decode
steps (output tokens / the requests that fit at once: ``max_num_seqs`` or the
KV cache tokens over the mean context, whichever is smaller), capped by the
engine's ``max_steps``. Measured on the project's 2-core VM (``bench/``,
``docs/operations.md``): 90-155 us per step and 30-40 us per request; the
prices below use 150 us and 40 us, so they overestimate more often than not.
A run with speculative decoding is priced by its output tokens and requests
instead, when that is more (:data:`SECONDS_PER_DRAFTED_OUTPUT_TOKEN`).

The numbers are estimates, stated as such in every refusal: a run priced under
a limit may still exceed it (workers also run under a hard memory limit, which
turns an allocation past it into a ``MemoryError``), and a run priced over it is
refused before it allocates anything.

Everything here is pure: plain numbers in, a :class:`Price` out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from simulator.base.errors import NON_FIELD, FieldError
from simulator.engine import EngineConfig
from simulator.workload import Workload

BYTES_PER_KEY = 24  # bytes: key table + shared-prefix map + own-keys index (int64 each)
BYTES_PER_KEY_PER_TIER = 16  # bytes: a tier's key position and queue mark
BYTES_PER_BLOCK = 72  # bytes per GPU block of the pool
BYTES_PER_RUN = 8 * 2**20  # bytes: fixed arrays of one run (queues, step records)
BYTES_PER_RADIX_SLOT = 16  # bytes per token slot of SGLang's RadixCache model
BYTES_PER_REQUEST = 1536  # bytes: request columns, results, latency arrays
SECONDS_PER_STEP = 150e-6  # s per estimated engine step
SECONDS_PER_REQUEST = 40e-6  # s per request per configuration
SECONDS_PER_BLOCK = 70e-9  # s per GPU block allocated (measured 66 ns at 20M blocks)
SECONDS_PER_KEY = 5e-9  # s per content key allocated
#: Speculative decoding runs on the engine's general path (no accelerator takes drafts): its time follows the
#: tokens generated and the requests, not the estimated steps. Measured on the project's 2-core VM, 9 shapes
#: (EAGLE k 1/3, n-gram k 5; 1,500-6,000 requests, 32-512 sequences, with and without preemption): 0.42-0.89
#: of ``output tokens x 1.5 us + requests x 0.5 ms``, and 0.6-4.9 times the step price alone.
SECONDS_PER_DRAFTED_OUTPUT_TOKEN = 1.5e-6  # s per output token of a speculative run
SECONDS_PER_SPECULATIVE_REQUEST = 500e-6  # s per request of a speculative run (its prefill on the general path)


class OverBudget(FieldError):
    """A run priced over a limit, or stopped at one: the one input error (:class:`FieldError`) at ``field`` (the
    input to make smaller; None or ``"non_field_errors"``: the input as a whole). The message states the limit
    and the estimate; the API and the pages map it as any input error, nobody converts it by hand."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message, field=None if field == NON_FIELD else field)


@dataclass(frozen=True)
class WorkloadSize:
    """What a run's price depends on in its workload.

    Attributes
    ----------
    n : int  # requests
    prompt_tokens, output_tokens : int  # tokens, summed over requests
    max_context : int  # tokens of the longest prompt + output
    """

    n: int
    prompt_tokens: int
    output_tokens: int
    max_context: int

    @classmethod
    def of(cls, wl: Workload) -> WorkloadSize:
        prompt = np.asarray(wl.prompt_len, np.int64)
        output = np.asarray(wl.output_len, np.int64)
        return cls(n=int(wl.n), prompt_tokens=int(prompt.sum()), output_tokens=int(output.sum()),
                   max_context=int((prompt + output).max()) if wl.n else 0)

    def scaled(self, prompt_scale: float = 1.0, output_scale: float = 1.0) -> WorkloadSize:
        """The size after ``prompt_scale`` / ``output_scale`` (an upper bound: every length >= 1 token)."""
        return WorkloadSize(n=self.n, prompt_tokens=math.ceil(self.prompt_tokens * prompt_scale) + self.n,
                            output_tokens=math.ceil(self.output_tokens * output_scale) + self.n,
                            max_context=math.ceil(self.max_context * max(prompt_scale, output_scale, 1.0)))

    def keys(self, block_size: int) -> int:
        """Upper bound of the content keys: sum of ``ceil((ctx + 2) / B) + 1`` over requests."""
        ctx = self.prompt_tokens + self.output_tokens
        return (ctx + self.n * (block_size + 1)) // block_size + self.n


@dataclass(frozen=True)
class Price:
    """Estimated peak memory (bytes) and time (s) of a run."""

    memory_bytes: int = 0
    seconds: float = 0.0

    def __add__(self, other: Price) -> Price:
        """Two runs in one batch: memory adds up (all alive at once), time adds up."""
        return Price(self.memory_bytes + other.memory_bytes, self.seconds + other.seconds)

    def describe(self) -> str:
        return f"about {format_bytes(self.memory_bytes)} and {format_seconds(self.seconds)}"


def format_bytes(n: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n / 2**10:,.0f} KiB"


def format_seconds(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:,.1f} h"
    if s >= 60:
        return f"{s / 60:,.1f} min"
    return f"{s:,.1f} s"


def estimated_steps(size: WorkloadSize, config: EngineConfig) -> float:
    """Prefill steps + decode steps (see the module docstring), at most ``config.max_steps`` when it is given."""
    if size.n == 0:
        return 0.0
    mean_ctx = max(1.0, (size.prompt_tokens + size.output_tokens) / size.n)
    kv_tokens = max(1, config.num_gpu_blocks - 1) * config.block_size
    concurrent = max(1.0, min(float(config.max_num_seqs), kv_tokens / mean_ctx))
    steps = size.prompt_tokens / max(1, config.max_num_batched_tokens) + size.output_tokens / concurrent
    steps += size.n / max(1, config.max_num_seqs)
    return steps if config.max_steps is None else min(float(config.max_steps), steps)


def _tier_count(config: EngineConfig) -> int:
    return int(config.cpu_tier is not None) + int(config.disk_tier is not None)


def price_run(size: WorkloadSize, config: EngineConfig, *, instances: int = 1) -> Price:
    """One configuration (or ``instances`` replicas of it behind a router) on a workload of ``size``."""
    keys = size.keys(config.block_size) if config.enable_prefix_caching or _tier_count(config) else 0
    blocks = config.num_gpu_blocks * instances
    memory = (BYTES_PER_RUN + keys * (BYTES_PER_KEY + BYTES_PER_KEY_PER_TIER * _tier_count(config))
              + blocks * BYTES_PER_BLOCK + size.n * BYTES_PER_REQUEST)
    if config.prefix_cache == "radix":
        memory += blocks * config.block_size * BYTES_PER_RADIX_SLOT
    step_seconds = estimated_steps(size, config) * SECONDS_PER_STEP
    if config.speculative is not None:
        step_seconds = max(step_seconds, size.output_tokens * SECONDS_PER_DRAFTED_OUTPUT_TOKEN
                           + size.n * SECONDS_PER_SPECULATIVE_REQUEST)
    seconds = step_seconds + size.n * SECONDS_PER_REQUEST + blocks * SECONDS_PER_BLOCK + keys * SECONDS_PER_KEY
    return Price(int(memory), seconds)


def price_batch(runs: Iterable[Price]) -> Price:
    """The runs of one batched simulation call: memory and time add up."""
    total = Price()
    for p in runs:
        total = total + p
    return total


def replica_counts_tried(max_instances: int) -> list[int]:
    """The most instance counts a replicas search simulates: 1, 2, 4 ... then a bisection."""
    counts = []
    n = 1
    while n < max_instances:
        counts.append(n)
        n *= 2
    counts.append(max_instances)
    counts += [max_instances] * max(0, math.ceil(math.log2(max(1, max_instances))) - 1)
    return counts


def price_replicas_search(size: WorkloadSize, config: EngineConfig, max_instances: int) -> Price:
    """A replicas search up to ``max_instances``: the trials run one after another (memory: the largest)."""
    trials = [price_run(size, config, instances=n) for n in replica_counts_tried(max_instances)]
    return Price(max(p.memory_bytes for p in trials), sum(p.seconds for p in trials))


def price_seed_check(size: WorkloadSize, config: EngineConfig, max_instances: int, seeds: int) -> Price:
    """A seed check (:func:`simulator.search.check_seeds`) of an answer of at most ``max_instances`` replicas:
    on each of ``seeds`` draws, the answer and one replica fewer, one run after another (memory: the largest)."""
    counts = [n for n in (max_instances, max_instances - 1) if n >= 1]
    trials = [price_run(size, config, instances=n) for n in counts]
    return Price(max((p.memory_bytes for p in trials), default=0), seeds * sum(p.seconds for p in trials))


def fit_simulations(n_params: int, max_evaluations: int) -> int:
    """The most simulations a calibration fit runs: ``least_squares`` (method ``trf``) stops after
    ``max_evaluations`` evaluations of the residuals, and each iteration's finite-difference Jacobian costs
    ``n_params`` more (scipy does not count those), plus the prediction before and after the fit.
    (Measured: 47 and 53 simulations for 3 parameters and 20 evaluations, against this bound's 82.)"""
    return max_evaluations * (1 + n_params) + 2


def price_fit(size: WorkloadSize, config: EngineConfig, simulations: int) -> Price:
    """A calibration fit: ``simulations`` runs of one configuration one after another (memory: one run)."""
    one = price_run(size, config)
    return Price(one.memory_bytes, one.seconds * simulations)


def check(price: Price, *, max_bytes: int | None, max_seconds: float | None, what: str,
          advice: str = "", field: str | None = None) -> None:
    """Raise :class:`OverBudget` (at ``field``; None: the input as a whole) when ``price`` is over either limit
    (``None``: no limit)."""
    problems = []
    if max_bytes is not None and price.memory_bytes > max_bytes:
        problems.append(f"about {format_bytes(price.memory_bytes)} of memory (the limit is "
                        f"{format_bytes(max_bytes)})")
    if max_seconds is not None and price.seconds > max_seconds:
        problems.append(f"about {format_seconds(price.seconds)} (the limit is {format_seconds(max_seconds)})")
    if problems:
        tail = f"; {advice}" if advice else ""
        raise OverBudget(f"{what} is estimated to need {' and '.join(problems)}{tail}.", field=field)


def price_configs(size: WorkloadSize, configs: Sequence[EngineConfig]) -> Price:
    """Plain configurations simulated in one batch."""
    return price_batch(price_run(size, c) for c in configs)
