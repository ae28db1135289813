"""Disaggregated prefill and decode: a prefill pool, a decode pool and the KV link between them.

>>> dep = DisaggregatedDeployment(Pool(prefill_cfg, 1), Pool(decode_cfg, 3), KvLink(50.0, 1e-4))  # doctest: +SKIP
>>> res = dep.run(workload)                                                                       # doctest: +SKIP
>>> res.latency.ttft.p90, res.transfer["p90_s"], res.pools["decode"]["utilisation"]              # doctest: +SKIP

The flow is the one vLLM's KV connectors follow under llm-d and Dynamo (prefill first, then decode,
the decode instance pulling the KV over NIXL; ``docs/disaggregated_serving.md``):

1. A request arrives at the prefill pool; its router picks an instance. Each prefill instance is a
   full engine (:class:`simulator.engine.core.FastEngine`, vLLM's scheduler, its own KV cache and clock)
   that runs the request with ``max_tokens = 1``: its prefill and the first token. The moment that
   token is out (the prefill result's ``first_token_time_s``) is the request's ``handoff``.
2. At the handoff the decode pool's router picks a decode instance; the request joins its waiting
   queue (FCFS, vLLM's rules).
3. Admission on the decode instance allocates blocks for the whole prompt, less its local prefix
   hits (:class:`DecodeEngine`); if they do not fit, the request and those behind it wait (head of
   line), so the decode pool's KV capacity limits admission. Then the KV moves:
   ``transfer_s = latency_s + blocks x block_size x kv_bytes_per_token / bandwidth``; transfers into
   one decode instance take its link one after another (each occupies it ``bytes / bandwidth``).
4. When the blocks are there the request is admitted with them as computed; the decode instance
   computes the tail of the prompt that fills no whole block (1 to ``block_size`` tokens; vLLM
   recomputes 1), which gives the first token the client sees, then decodes the rest.

TTFT is the client's: arrival to the first token streamed by the decode instance (prefill queue and
compute, handoff, decode queue, transfer, the decode step). The prefill instance's own first token
is reported too (``prefill_ttft``). A prefill instance keeps a finished request's blocks for the wire
time of its transfer after the handoff (:class:`PrefillEngine`; a lower bound of vLLM's hold, which
lasts until the decode side has read them). Not modelled: decoding locally when a
prefill is short (Dynamo's conditional disaggregation), multi-turn conversations (``parent``), KV
tiers on the decode pool.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from simulator.base import unknown_message
from simulator.cluster.fleet import Fleet
from simulator.cluster.replicas import ClusterResult, _assemble, _check_int, _check_seconds
from simulator.cluster.routing import MAX_INSTANCES, ClusterError, Router, parse_routing
from simulator.engine import FastEngine, LatencySummary, WorkloadPrep, cdiv
from simulator.engine.config import ConfigError, EngineConfig, unknown_field
from simulator.engine.hooks import ADMIT, STOP, WAIT, EngineHooks
from simulator.workload import Workload

GB = 1e9  # bytes per GB (link bandwidths are decimal, as NIC and NVLink data sheets give them)


class DisaggError(ClusterError):
    """Bad disaggregated-deployment input; the message names the field (``prefill.num_instances: ...``)."""


def _number(name: str, v: Any, *, positive: bool, allow_inf: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or math.isnan(v):
        raise DisaggError(f"must be a number, got {v!r}", field=name)
    if math.isinf(v) and not (allow_inf and v > 0):
        raise DisaggError(f"must be finite, got {v!r}", field=name)
    if v < 0 or (positive and v == 0):
        raise DisaggError(f"must be {'> 0' if positive else '>= 0'}, got {v!r}", field=name)
    return float(v)


@dataclass(frozen=True)
class KvLink:
    """The link a decode instance pulls KV over (NIXL over RDMA or NVLink).

    Parameters
    ----------
    bandwidth_gbps : float
        Bytes per second the decode instance can receive, in GB/s (its NICs
        together: 8 x 400 Gb/s InfiniBand is 400 GB/s; one 400 Gb/s NIC 50 GB/s).
        ``math.inf`` makes the bytes free (tests).  # GB/s
    latency_s : float
        Fixed cost of one transfer (handshake, first byte).  # s
    """

    bandwidth_gbps: float = 50.0
    latency_s: float = 1e-4

    def __post_init__(self) -> None:
        object.__setattr__(self, "bandwidth_gbps",
                           _number("link.bandwidth_gbps", self.bandwidth_gbps, positive=True, allow_inf=True))
        object.__setattr__(self, "latency_s", _number("link.latency_s", self.latency_s, positive=False))

    def wire_seconds(self, nbytes: float) -> float:
        """Seconds ``nbytes`` occupy the link: ``bytes / bandwidth``.  # s"""
        return nbytes / (self.bandwidth_gbps * GB)

    def seconds(self, nbytes: float) -> float:
        """One transfer of ``nbytes`` on an idle link: ``latency_s + bytes / bandwidth``.  # s"""
        return self.latency_s + self.wire_seconds(nbytes)

    def to_dict(self) -> dict[str, Any]:
        return {"bandwidth_gbps": self.bandwidth_gbps, "latency_s": self.latency_s}


@dataclass(frozen=True)
class Pool:
    """``num_instances`` identical engine instances of one role behind that pool's router.

    Parameters
    ----------
    config : EngineConfig
        One instance (its KV blocks, scheduler limits and clock: GPU type and TP
        live in its ``num_gpu_blocks``, ``kv_bytes_per_block`` and cost model).
    num_instances : int
        1 to 256.
    routing : str
        As :mod:`simulator.cluster.routing` (``round-robin``, ``least-loaded`` ...).
    gpus_per_instance : int
        GPUs one instance uses (its TP x PP), for GPU counts and costs.
    cost_per_hour : float, optional
        Price of one instance per hour.  # USD/h
    label : str
        A name for reports (e.g. ``H100 TP1``).
    group : simulator.cluster.data_parallel.DPRun, optional
        An instance is a DP group of ``group.data_parallel_size`` ranks, each an engine over ``config`` (one
        rank's pool), balanced as vLLM's DP client does and, for an MoE model, stepping in lockstep on the DP /
        EP clock (:func:`simulator.cluster.data_parallel.simulate_dp`); the pool's router sends request ``k`` to
        group ``k mod num_instances`` (round-robin only). ``gpus_per_instance`` and ``cost_per_hour`` are the
        group's. None: one engine an instance.
    """

    config: EngineConfig
    num_instances: int = 1
    routing: str = "round-robin"
    gpus_per_instance: int = 1
    cost_per_hour: float | None = None
    label: str = ""
    group: Any = None

    def checked(self, role: str) -> Pool:
        """This pool validated, with its routing in canonical form (errors name ``role.field``)."""
        if not isinstance(self.config, EngineConfig):
            raise DisaggError("must be an EngineConfig", field=f"{role}.config")
        try:
            routing = str(parse_routing(self.routing))
            n = _check_int("num_instances", self.num_instances, 1, MAX_INSTANCES)
            g = _check_int("gpus_per_instance", self.gpus_per_instance, 1, 1024)
        except ClusterError as exc:
            raise DisaggError.nested(exc, role) from None
        cost = (None if self.cost_per_hour is None
                else _number(f"{role}.cost_per_hour", self.cost_per_hour, positive=False))
        if self.group is not None:
            from simulator.cluster.data_parallel import DPRun

            if not isinstance(self.group, DPRun):
                raise DisaggError("must be a simulator.cluster.data_parallel.DPRun (a DP group) or null",
                                  field=f"{role}.group")
        if self.group is not None and routing != "round-robin":
            raise DisaggError(f"DP groups are routed round-robin (each balances its own ranks), not {routing}",
                              field=f"{role}.routing")
        return replace(self, num_instances=n, routing=routing, gpus_per_instance=g, cost_per_hour=cost,
                       label=str(self.label))

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "num_instances": self.num_instances, "routing": self.routing,
                "gpus_per_instance": self.gpus_per_instance, "cost_per_hour": self.cost_per_hour,
                "label": self.label,
                **({} if self.group is None else {"group": {
                    "data_parallel_size": self.group.data_parallel_size,
                    "enable_expert_parallel": self.group.enable_expert_parallel,
                    "routing": self.group.routing, "lockstep": self.group.lockstep}})}


_POOL_FIELDS = ("config", "num_instances", "routing", "gpus_per_instance", "cost_per_hour", "label", "group")


def pool_from_dict(data: Any, role: str) -> Pool:
    """A :class:`Pool` from its JSON object (``config`` an engine configuration object)."""
    if isinstance(data, Pool):
        return data.checked(role)
    if not isinstance(data, dict):
        raise DisaggError("must be an object with config, num_instances, routing ...", field=role)
    bad = sorted(set(data) - set(_POOL_FIELDS))
    if bad:
        raise DisaggError(f"{unknown_message(bad[0], _POOL_FIELDS)}", field=f"{role}.{bad[0]}")
    if "config" not in data:
        raise DisaggError("required (one instance's engine configuration)", field=f"{role}.config")
    cfg = data["config"]
    if not isinstance(cfg, EngineConfig):
        if not isinstance(cfg, dict):
            raise DisaggError("must be an object (an engine configuration)", field=f"{role}.config")
        try:
            cfg = EngineConfig.from_dict(cfg)
        except (ConfigError, TypeError, ValueError) as exc:
            raise DisaggError.nested(exc, f"{role}.config") from None
    kw = {k: v for k, v in data.items() if k != "config"}
    return Pool(cfg, **kw).checked(role)


@dataclass(frozen=True)
class DisaggregatedDeployment:
    """A prefill pool, a decode pool and the KV link: an xPyD deployment.

    Parameters
    ----------
    prefill, decode : Pool
    link : KvLink
    kv_bytes_per_token : int, optional
        KV bytes of one token of the whole model (every layer and head; what
        moves). Default: the decode configuration's ``kv_bytes_per_block`` x
        ``gpus_per_instance`` / ``block_size`` (exact when TP does not
        replicate KV heads; a DP group's: of one rank, ``gpus_per_instance`` / DP GPUs).  # bytes
    seed : int
        Seed of ``random`` routing in either pool.
    slo_ttft_s, slo_itl_s : float, optional
        Goodput thresholds of the latency summaries.  # s
    prefill_holds_kv : bool
        A prefill instance keeps a finished request's blocks until the decode side has read them
        (vLLM's NIXL connector frees them on the reader's notification): for the wire time of its
        prompt's blocks after the handoff (:class:`PrefillEngine`). False frees them at the handoff.
    """

    prefill: Pool
    decode: Pool
    link: KvLink = field(default_factory=KvLink)
    kv_bytes_per_token: int | None = None
    seed: int = 0
    slo_ttft_s: float | None = None
    slo_itl_s: float | None = None
    prefill_holds_kv: bool = True

    def __post_init__(self) -> None:
        for role in ("prefill", "decode"):
            object.__setattr__(self, role, pool_from_dict(getattr(self, role), role))
        if not isinstance(self.link, KvLink):
            object.__setattr__(self, "link", link_from_dict(self.link))
        cfg = self.decode.config
        if not cfg.enable_prefix_caching or cfg.prefix_cache != "vllm":
            raise DisaggError("the decode pool needs vLLM's prefix cache on "
                              "(the transferred KV enters it as computed blocks)", field="decode.config.enable_prefix_caching")
        if cfg.cpu_tier is not None or cfg.disk_tier is not None:
            raise DisaggError("KV tiers on the decode pool are not modelled", field="decode.config.cpu_tier")
        object.__setattr__(self, "kv_bytes_per_token", self._bytes_per_token())
        if not isinstance(self.prefill_holds_kv, bool):
            raise DisaggError(f"must be true or false, got {self.prefill_holds_kv!r}", field="prefill_holds_kv")
        try:
            object.__setattr__(self, "seed", _check_int("seed", self.seed, 0, 2**63 - 1))
            for name in ("slo_ttft_s", "slo_itl_s"):
                object.__setattr__(self, name, _check_seconds(name, getattr(self, name), allow_none=True,
                                                              positive=True))
        except ClusterError as exc:
            raise DisaggError(exc.message, field=exc.field) from None

    def _bytes_per_token(self) -> int:
        v = self.kv_bytes_per_token
        if v is None:
            cfg = self.decode.config
            if not cfg.kv_bytes_per_block:
                raise DisaggError("required to time the transfer (or give the decode "
                                  "config's kv_bytes_per_block)", field="kv_bytes_per_token")
            ranks = 1 if self.decode.group is None else self.decode.group.data_parallel_size
            gpus = max(1, self.decode.gpus_per_instance // ranks)  # a request's KV lives on one rank's GPUs
            return max(1, round(cfg.kv_bytes_per_block * gpus / cfg.block_size))
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v <= 2**40:
            raise DisaggError(f"must be a whole number of bytes from 1 to 2**40, got {v!r}", field="kv_bytes_per_token")
        return int(v)

    @property
    def num_gpus(self) -> int:
        return sum(p.num_instances * p.gpus_per_instance for p in (self.prefill, self.decode))

    @property
    def cost_per_hour(self) -> float | None:  # USD/h
        if self.prefill.cost_per_hour is None or self.decode.cost_per_hour is None:
            return None
        return sum(p.num_instances * p.cost_per_hour for p in (self.prefill, self.decode))

    @property
    def name(self) -> str:
        """``xPyD``: prefill and decode instance counts."""
        return f"{self.prefill.num_instances}P{self.decode.num_instances}D"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "prefill": self.prefill.to_dict(), "decode": self.decode.to_dict(),
                "link": self.link.to_dict(), "kv_bytes_per_token": self.kv_bytes_per_token, "seed": self.seed,
                "slo_ttft_s": self.slo_ttft_s, "slo_itl_s": self.slo_itl_s, "prefill_holds_kv": self.prefill_holds_kv}

    def run(self, workload: Workload, *, record_steps: bool = False, max_step_points: int | None = None,
            progress: Callable[[float], None] | None = None, accelerate: bool = True) -> DisaggregatedResult:
        """Simulate ``workload`` on this deployment (:func:`simulate_disaggregated`)."""
        return simulate_disaggregated(workload, self, record_steps=record_steps, max_step_points=max_step_points,
                                      progress=progress, accelerate=accelerate)


_DEPLOYMENT_FIELDS = ("prefill", "decode", "link", "kv_bytes_per_token", "seed", "slo_ttft_s", "slo_itl_s",
                      "prefill_holds_kv")


def link_from_dict(data: Any) -> KvLink:
    if isinstance(data, KvLink):
        return data
    if not isinstance(data, dict):
        raise DisaggError("must be an object with bandwidth_gbps and latency_s", field="link")
    bad = unknown_field(KvLink, data)
    if bad:
        raise DisaggError(f"{bad[1]}", field=f"link.{bad[0]}")
    return KvLink(**data)


def deployment_from_dict(data: Any) -> DisaggregatedDeployment:
    """A :class:`DisaggregatedDeployment` from its JSON object (``docs/disaggregated_serving.md``)."""
    if not isinstance(data, dict):
        raise DisaggError("must be an object with prefill, decode and link", field="disaggregated")
    bad = sorted(set(data) - set(_DEPLOYMENT_FIELDS))
    if bad:
        raise DisaggError(f"{unknown_message(bad[0], _DEPLOYMENT_FIELDS)}", field=bad[0])
    for role in ("prefill", "decode"):
        if role not in data:
            raise DisaggError("required (a pool: config, num_instances, routing)", field=role)
    return DisaggregatedDeployment(**data)


# --------------------------------------------------------------------------- engines


class Meter(EngineHooks):
    """Hooks that count an engine's idle seconds and each request's first admission time.

    Idle time is what the clock moves without a step (waiting for a request,
    for ``until``, for a transfer or a load); busy time is the rest. Same
    decisions and results as the plain engine.
    """

    def __init__(self, n: int) -> None:
        self.idle_s = 0.0  # s
        self.admit_t = np.full(n, np.nan)  # s, first admission (blocks allocated)

    def idle(self, seconds: float) -> None:
        self.idle_s += seconds

    def admitted(self, q: int) -> None:
        if math.isnan(self.admit_t[q]):
            self.admit_t[q] = self.engine.clock


class PrefillHold(Meter):
    """A prefill instance's hooks: its finished requests keep their blocks until the decode side has read them.

    vLLM's NIXL connector (``request_finished`` with ``do_remote_decode``) delays freeing a finished
    prefill's blocks until the decode instance reports it has pulled them (or a timeout). Here a
    request's blocks stay held ``hold_s[q]`` after its first token (the handoff): the wire time of its
    prompt's blocks over the decode link, ``latency + blocks x block_bytes / bandwidth``. The decode
    side's queueing and link waits are not known while the prefill pool runs (it is simulated first),
    so the hold is a lower bound. Held blocks count in the pool (KV usage, admission); when nothing
    runs and the waiting queue is blocked, the clock moves to the next release.
    """

    holds_finished_blocks = holds_blocks = True

    def __init__(self, n: int, hold_s: np.ndarray) -> None:
        super().__init__(n)
        self.hold_s = hold_s
        self._held: list[tuple[float, int]] = []  # heap of (release time, request)

    def finished(self, q: int, t_end: float) -> bool:
        if self.hold_s[q] > 0:  # held until the decode side read it
            heapq.heappush(self._held, (t_end + float(self.hold_s[q]), q))
            return True
        return False

    def next_event_s(self) -> float | None:
        """When the next held request's blocks go back (None: none held): what a waiting queue blocked on the
        pool waits for (a DP group's lockstep asks, :mod:`simulator.cluster.data_parallel`).  # s"""
        return self._held[0][0] if self._held else None

    def before_schedule(self) -> None:
        held, e = self._held, self.engine
        while held and held[0][0] <= e.clock:
            e.release(heapq.heappop(held)[1])

    def scheduled(self, ids: np.ndarray, until) -> None:
        e = self.engine
        if self._held and not e.num_running and e.requests.waiting and not ids.size:
            e.idle_until(self._held[0][0] if until is None else min(self._held[0][0], float(until)))


class DecodeTransfers(Meter):
    """A decode instance's hooks: a request submitted to it has its prompt's KV on a prefill instance.

    At admission (vLLM's ``get_num_new_matched_tokens`` of a remote prefill)
    the request takes blocks for its whole prompt less its local prefix hits;
    the full ones are published at once as its KV (what lands in them), and it
    waits in the queue (vLLM's ``WAITING_FOR_REMOTE_KVS``) until the transfer
    is done, then is admitted with them as computed. Without room for those
    blocks admission stops there (head of line). The tail of the prompt that
    fills no whole block is computed here (1 to ``block_size`` tokens).

    Parameters
    ----------
    n : int
        Requests of the workload.
    link : KvLink
    block_bytes : float
        Bytes one block of this instance carries over the link (``block_size x
        kv_bytes_per_token``).  # bytes
    """

    holds_blocks = True  # (a waiting request holds its transferred blocks)

    def __init__(self, n: int, link: KvLink, block_bytes: float) -> None:
        super().__init__(n)
        self.link = link
        self.block_bytes = float(block_bytes)
        self.remote = np.ones(n, bool)                  # its KV is still on a prefill instance
        self.xfer_start = np.full(n, np.nan)            # s, blocks allocated and the transfer queued
        self.xfer_end = np.full(n, np.nan)              # s, the KV is on this instance
        self.xfer_wire = np.full(n, np.nan)             # s, latency + bytes / bandwidth
        self.xfer_blocks = np.zeros(n, np.int64)        # blocks moved
        self.link_free = 0.0                            # s, when the link is next idle
        self.transfer_stalls = 0
        self._due_call = -2  # schedule call that last found a transfer done without admitting it

    def admission(self, q: int, num_tokens: int, kept: int, nh: int, hit) -> int:
        if kept or not self.remote[q]:
            return ADMIT
        # its transfer starts (it waits for it), or no room for its blocks: admission stops here
        return WAIT if self._start_transfer(q, num_tokens, nh, hit) else STOP

    def _start_transfer(self, q: int, num_tokens: int, nh: int, hit) -> bool:
        """Blocks for request ``q``'s prompt (less ``nh`` local hits) and its transfer (True), or no room."""
        e = self.engine
        pool, B = e.pool, e.B
        need = cdiv(num_tokens, B) - nh  # blocks, what vLLM allocates (and NIXL moves) for the remote KV
        evictable = pool.num_free_of(hit) if nh else 0
        wm = e.watermark_blocks if e.num_running else 0
        if need + evictable + wm > pool.num_free():
            return False
        now = e.clock
        nbytes = need * self.block_bytes
        start = max(now, self.link_free)
        self.link_free = start + self.link.wire_seconds(nbytes)
        ready = self.link_free + self.link.latency_s
        # the full blocks a prefix hit may cover land in blocks published at once
        e.start_load(q, nh, hit, (num_tokens - 1) // B - nh, ready)
        self.remote[q] = False
        self.admit_t[q] = now
        self.xfer_start[q], self.xfer_end[q] = now, ready
        self.xfer_wire[q] = self.link.seconds(nbytes)
        self.xfer_blocks[q] = need
        return True

    def next_event_s(self) -> float | None:
        """When the first KV transfer in flight lands (None: none in flight): what a decode instance with
        only transferring requests waits for (a DP group's lockstep asks).  # s"""
        loading = self.engine.loads.loading
        return min(loading.values()) if loading else None

    def stalled(self, until) -> bool:
        e = self.engine
        if min(e.loads.loading.values()) > e.clock:
            return False  # the engine waits for the first transfer to end
        if self._due_call != e.schedule_calls - 1:
            # a transfer ended during this (empty) schedule call: the next call admits it
            self._due_call = e.schedule_calls
            return True
        # two calls in a row with a transfer done and nothing admitted: the head of the queue (a
        # preempted request) needs the blocks the transferred requests behind it hold. They let
        # them go (still cached, hit again at their admission) so the queue moves.
        e.let_loads_go()
        self.transfer_stalls += 1
        return True


class MeteredEngine(FastEngine):
    """A :class:`FastEngine` with :class:`Meter` hooks (``engine.hooks.idle_s``, ``engine.hooks.admit_t``)."""

    def __init__(self, workload: Workload, config: EngineConfig, **kw: Any) -> None:
        super().__init__(workload, config, hooks=Meter(workload.n), **kw)


class PrefillEngine(FastEngine):
    """A prefill instance: a :class:`FastEngine` with :class:`PrefillHold` hooks (``hold_s``: seconds each
    finished request keeps its blocks)."""

    def __init__(self, workload: Workload, config: EngineConfig, *, hold_s: np.ndarray, **kw: Any) -> None:
        super().__init__(workload, config, hooks=PrefillHold(workload.n, hold_s), **kw)


class DecodeEngine(FastEngine):
    """A decode instance: a :class:`FastEngine` with :class:`DecodeTransfers` hooks over ``link``."""

    def __init__(self, workload: Workload, config: EngineConfig, *, link: KvLink, block_bytes: float,
                 **kw: Any) -> None:
        super().__init__(workload, config, hooks=DecodeTransfers(workload.n, link, block_bytes), **kw)


# --------------------------------------------------------------------------- simulation


def _route(fleet: Fleet, routing: str, prompt_len: np.ndarray, order: np.ndarray, times: np.ndarray, seed: int,
           progress: Callable[[int], None] | None) -> np.ndarray:
    """Requests ``order`` reach ``fleet`` at ``times`` (ascending); its router places each one.

    As :func:`simulator.cluster.replicas.simulate_cluster` with no router delay: the
    instances a stateful policy reads are advanced to the arrival first.
    Returns the instance of every request, shape (n,) (-1: never routed).
    """
    policy = parse_routing(routing)
    router = Router(policy, fleet, prompt_len=prompt_len, seed=seed)
    many = len(fleet) > 1
    stateful = policy.stateful and many
    affinity = "prefix-affinity" in policy.uses and many
    assign = np.full(prompt_len.shape[0], -1, np.int64)
    for p, (q, t) in enumerate(zip(order.tolist(), times.tolist())):
        if stateful:
            fleet.advance(t)
            if affinity:
                router.observe(q)
        i = router.choose(q)
        fleet.submit(i, q, t)
        assign[q] = i
        if progress is not None:
            progress(p)
    fleet.finish()
    return assign


def _hold_seconds(workload: Workload, d: DisaggregatedDeployment, block_bytes: float) -> np.ndarray:
    """Seconds each prefill instance holds a finished request's blocks: the wire time of its prompt's
    decode-side blocks (:class:`PrefillEngine`).  # s"""
    blocks = -(-workload.prompt_len // d.decode.config.block_size)
    if math.isinf(d.link.bandwidth_gbps):
        return np.full(workload.n, d.link.latency_s)
    return d.link.latency_s + blocks * block_bytes / (d.link.bandwidth_gbps * GB)


def _check_workload(workload: Workload) -> None:
    if not isinstance(workload, Workload):
        raise DisaggError("must be a simulator.workload.requests.Workload", field="workload")
    if workload.arrival_unit != "s":
        raise DisaggError("a disaggregated deployment needs arrivals in seconds (the KV transfer "
                          "takes seconds)", field="workload")
    if bool((workload.parent >= 0).any()):
        raise DisaggError("multi-turn conversations (parent) are not supported by the disaggregated "
                          "simulation yet", field="workload")


def _progress_of(progress: Callable[[float], None] | None, n: int, offset: float) -> Callable[[int], None] | None:
    """A per-request callback reporting half of the run (each stage is half) in about 50 steps."""
    if progress is None or not n:
        return None
    every = max(1, n // 50)

    def report(p: int) -> None:
        if p % every == 0 or p == n - 1:
            progress(offset + 0.5 * (p + 1) / n)
    return report


def simulate_disaggregated(workload: Workload, deployment: DisaggregatedDeployment, *,
                           record_steps: bool = False, max_step_points: int | None = None,
                           progress: Callable[[float], None] | None = None,
                           accelerate: bool = True) -> DisaggregatedResult:
    """Simulate ``workload`` on a prefill pool, a decode pool and the KV link between them.

    Parameters
    ----------
    workload : Workload
        Arrivals in seconds; no multi-turn parents.
    deployment : DisaggregatedDeployment
    record_steps, max_step_points
        Each instance's step series, as :func:`simulator.cluster.replicas.simulate_cluster`.
    progress : callable, optional
        Fraction done in [0, 1] (the prefill stage is the first half).
    accelerate : bool
        The engine's accelerators (:class:`FastEngine`); False gives the same result, slower.

    Returns
    -------
    DisaggregatedResult

    Raises
    ------
    DisaggError
        A bad argument (the message names it).
    """
    _check_workload(workload)
    if not isinstance(deployment, DisaggregatedDeployment):
        raise DisaggError("must be a DisaggregatedDeployment", field="deployment")
    if max_step_points is not None and (not isinstance(max_step_points, int) or max_step_points < 2):
        raise DisaggError("must be at least 2", field="max_step_points")
    d = deployment
    n = workload.n
    steps = (record_steps, max_step_points)
    # stage 1: every request's prefill (max_tokens = 1) on the prefill pool, in arrival order
    pre_wl = replace(workload, output_len=np.ones(n, np.int64))
    pprep = WorkloadPrep(pre_wl)
    block_bytes = d.kv_bytes_per_token * d.decode.config.block_size
    pengine = (functools.partial(PrefillEngine, hold_s=_hold_seconds(workload, d, block_bytes), accelerate=accelerate)
               if d.prefill_holds_kv else functools.partial(MeteredEngine, accelerate=accelerate))
    if d.prefill.group is not None:
        pengines, pre = _group_pool(pre_wl, d.prefill, pprep, pprep.order, pprep.arrival_sorted, pengine, d,
                                    record_steps)
    else:
        pfleet = Fleet(pre_wl, d.prefill.config, d.prefill.num_instances, prep=pprep, record_steps=record_steps,
                       engine_factory=pengine)
        pfleet.start()
        passign = _route(pfleet, d.prefill.routing, pre_wl.prompt_len, pprep.order, pprep.arrival_sorted, d.seed,
                         _progress_of(progress, n, 0.0))
        pre = _assemble(pre_wl, pfleet.engines, passign, parse_routing(d.prefill.routing), 0.0, d.slo_ttft_s,
                        d.slo_itl_s, *steps)
        pengines = pfleet.engines
    # stage 2: each prefilled request reaches the decode pool at its handoff, in handoff order
    handoff = np.asarray(pre.requests["first_token_time_s"], np.float64)
    done = np.flatnonzero(np.isfinite(handoff))
    order = done[np.argsort(handoff[done], kind="stable")]
    engine = functools.partial(DecodeEngine, link=d.link, accelerate=accelerate, block_bytes=block_bytes)
    if d.decode.group is not None:
        dengines, dec = _group_pool(workload, d.decode, WorkloadPrep(workload), order, handoff[order], engine, d,
                                    record_steps)
    else:
        dfleet = Fleet(workload, d.decode.config, d.decode.num_instances, prep=WorkloadPrep(workload),
                       record_steps=record_steps, engine_factory=engine)
        dfleet.start()
        dassign = _route(dfleet, d.decode.routing, workload.prompt_len, order, handoff[order], d.seed,
                         _progress_of(progress, order.size, 0.5))
        dec = _assemble(workload, dfleet.engines, dassign, parse_routing(d.decode.routing), 0.0, d.slo_ttft_s,
                        d.slo_itl_s, *steps)
        dengines = dfleet.engines
    return _result(workload, d, pre, dec, pengines, dengines, handoff)


def _group_pool(wl: Workload, pool: Pool, prep: WorkloadPrep, order: np.ndarray, times: np.ndarray, factory,
                d: DisaggregatedDeployment, record_steps: bool) -> tuple[list, ClusterResult]:
    """A pool of DP groups (``pool.group``): its ranks' engines and its cluster result (instances: the ranks,
    group by group), the requests reaching it at ``times`` in ``order``. The ranks run without the engine's
    accelerators (lockstep needs one schedule call at a time)."""
    from simulator.cluster.data_parallel import simulate_dp

    g = pool.group
    make = factory.func if isinstance(factory, functools.partial) else factory
    kw = {k: v for k, v in (factory.keywords if isinstance(factory, functools.partial) else {}).items()
          if k != "accelerate"}
    res = simulate_dp(wl, pool.config, g.data_parallel_size, clock=g.clock, lockstep=g.lockstep, routing=g.routing,
                      record_steps=record_steps, prep=prep, slo_ttft_s=d.slo_ttft_s, slo_itl_s=d.slo_itl_s,
                      replicas=pool.num_instances, engine_factory=functools.partial(make, **kw),
                      stream=(order.tolist(), times.tolist()))
    return list(res.engines), res.cluster


# --------------------------------------------------------------------------- results


def _stats(x: np.ndarray, prefix: str = "") -> dict[str, float | None]:
    """Mean and percentiles of the finite values of ``x`` (None when there are none).  # s"""
    x = x[np.isfinite(x)]
    keys = ("mean", "p50", "p90", "p99", "max")
    if not x.size:
        return {f"{prefix}{k}_s": None for k in keys}
    vals = (float(x.mean()), *(float(v) for v in np.percentile(x, [50, 90, 99])), float(x.max()))
    return {f"{prefix}{k}_s": v for k, v in zip(keys, vals)}


def _gather(engines: list, assign: np.ndarray, name: str, fill: float | int) -> np.ndarray:
    """Each request's ``name`` column (of the engines' hooks) from the instance it was routed to, shape (n,)
    (``fill`` elsewhere)."""
    first = getattr(engines[0].hooks, name)
    out = np.full(assign.shape[0], fill, first.dtype)
    for i, e in enumerate(engines):
        idx = assign == i
        out[idx] = getattr(e.hooks, name)[idx]
    return out


def pool_metrics(cluster: ClusterResult, engines: list, pool: Pool, reach_s: np.ndarray,
                 duration_s: float) -> dict[str, Any]:
    """One pool's figures: requests, utilisation, queueing, preemptions, KV usage (sums over its instances).

    ``utilisation`` is the pool's busy GPU time (clock time spent in steps)
    over ``num_instances x duration_s``; ``queueing`` is admission (blocks
    allocated) minus the time the request reached the pool (``reach_s``).
    """
    t = cluster.totals
    busy = np.array([e.clock - e.hooks.idle_s for e in engines])  # s
    util = busy / duration_s if duration_s > 0 else np.zeros(len(engines))
    admit = _gather(engines, cluster.assignment, "admit_t", np.nan)
    q = _stats(admit - reach_s, "queueing_")
    return {
        "label": pool.label, "num_instances": pool.num_instances, "gpus": pool.num_instances * pool.gpus_per_instance,
        "routing": pool.routing, "requests": int(cluster.load.requests.sum()),
        "finished": int(t["finished"]), "dropped_unservable": int(t["dropped_unservable"]),
        "unfinished": int(t["unfinished"]), "preemptions": int(t["preemptions"]),
        "peak_kv_usage": float(t["peak_kv_usage"]), "mean_kv_usage": float(t["mean_kv_usage"]),
        "peak_waiting": max(int(i.totals["peak_waiting"]) for i in cluster.instances),
        "busy_s": float(busy.sum()), "utilisation": float(util.mean()),
        "queueing_mean_s": q["queueing_mean_s"], "queueing_p90_s": q["queueing_p90_s"],
        "instances": [{"requests": int(r), "busy_s": float(b), "utilisation": float(u),
                       "preemptions": int(i.totals["preemptions"]), "peak_kv_usage": float(i.totals["peak_kv_usage"]),
                       "mean_kv_usage": float(i.totals["mean_kv_usage"])}
                      for r, b, u, i in zip(cluster.load.requests, busy, util, cluster.instances)],
    }


@dataclass(frozen=True, eq=False)
class DisaggregatedResult:
    """A disaggregated simulation's outcome.

    Attributes
    ----------
    deployment : DisaggregatedDeployment
    prefill : ClusterResult
        The prefill pool (its requests ran with ``max_tokens = 1``; its
        latency's TTFT is the prefill instance's first token).
    decode : ClusterResult
        The decode pool; its latency summary is the client's.
    requests : dict of str to ndarray, shape (n,)
        ``prefill_instance``, ``decode_instance`` (-1: never there),
        ``handoff_s``, ``transfer_start_s``, ``transfer_end_s``,
        ``transfer_s`` (end - start: link wait + latency + bytes / bandwidth),
        ``transfer_wire_s`` (latency + bytes / bandwidth), ``transfer_blocks``,
        ``transfer_bytes``, ``first_token_time_s``, ``finish_time_s``, ``status``.
    latency : LatencySummary
        Client-visible: TTFT to the decode instance's first token.
    prefill_ttft : dict
        Arrival to the prefill instance's first token (mean, p50, p90, p99, max).  # s
    transfer : dict
        Requests moved, blocks and bytes, ``transfer_s`` statistics (``mean_s``,
        ``p90_s`` ...), ``wire_mean_s``, ``link_wait_mean_s``, ``stalls``.
    pools : dict
        ``{"prefill": ..., "decode": ...}`` from :func:`pool_metrics`.
    totals : dict
        Whole deployment: requests, finished, dropped, unfinished, preemptions,
        GPUs, cost per hour, duration.
    """

    deployment: DisaggregatedDeployment
    prefill: ClusterResult
    decode: ClusterResult
    requests: dict[str, Any]
    latency: LatencySummary | None
    prefill_ttft: dict[str, Any]
    transfer: dict[str, Any]
    pools: dict[str, dict[str, Any]]
    totals: dict[str, Any]

    def to_dict(self, *, requests: bool = False) -> dict[str, Any]:
        """JSON-ready: the deployment's shape, totals, latency, prefill TTFT, transfer, pools."""
        d = self.deployment
        out: dict[str, Any] = {
            "name": d.name, "link": d.link.to_dict(), "kv_bytes_per_token": d.kv_bytes_per_token,
            "totals": dict(self.totals), "latency": None if self.latency is None else self.latency.to_dict(),
            "prefill_ttft": dict(self.prefill_ttft), "transfer": dict(self.transfer),
            "pools": {k: dict(v) for k, v in self.pools.items()},
        }
        if requests:
            out["requests"] = {k: (list(v) if isinstance(v, tuple) else v.tolist()) for k, v in self.requests.items()}
        return out


def _transfer_summary(req: dict[str, Any], engines: list) -> dict[str, Any]:
    moved = req["transfer_blocks"] > 0
    xs = req["transfer_s"][moved]
    wire = req["transfer_wire_s"][moved]
    out: dict[str, Any] = {"requests": int(moved.sum()), "blocks": int(req["transfer_blocks"].sum()),
                           "bytes": float(req["transfer_bytes"].sum())}
    out.update(_stats(xs))
    out["wire_mean_s"] = float(wire.mean()) if wire.size else None
    out["link_wait_mean_s"] = float((xs - wire).mean()) if xs.size else None
    out["stalls"] = int(sum(e.hooks.transfer_stalls for e in engines))
    return out


def _result(workload: Workload, d: DisaggregatedDeployment, pre: ClusterResult, dec: ClusterResult,
            pengines: list, dengines: list, handoff: np.ndarray) -> DisaggregatedResult:
    dassign = dec.assignment
    start = _gather(dengines, dassign, "xfer_start", np.nan)
    end = _gather(dengines, dassign, "xfer_end", np.nan)
    blocks = _gather(dengines, dassign, "xfer_blocks", 0)
    status = tuple(ds if da >= 0 else ps for ds, da, ps in
                   zip(dec.requests["status"], dassign.tolist(), pre.requests["status"]))
    req = {
        "prefill_instance": pre.assignment.copy(), "decode_instance": dassign.copy(), "handoff_s": handoff,
        "transfer_start_s": start, "transfer_end_s": end, "transfer_s": end - start,
        "transfer_wire_s": _gather(dengines, dassign, "xfer_wire", np.nan), "transfer_blocks": blocks,
        "transfer_bytes": blocks * float(d.kv_bytes_per_token * d.decode.config.block_size),
        "first_token_time_s": np.asarray(dec.requests["first_token_time_s"], np.float64),
        "finish_time_s": np.asarray(dec.requests["finish_time_s"], np.float64), "status": status,
    }
    duration = max(e.clock for e in (*pengines, *dengines))
    pools = {"prefill": pool_metrics(pre, pengines, d.prefill, workload.arrival, duration),
             "decode": pool_metrics(dec, dengines, d.decode, handoff, duration)}
    finished = int(dec.totals["finished"])
    dropped = int(pre.totals["dropped_unservable"] + dec.totals["dropped_unservable"])
    totals = {"num_requests": workload.n, "finished": finished, "dropped_unservable": dropped,
              "unfinished": workload.n - finished - dropped,
              "preemptions": int(pre.totals["preemptions"] + dec.totals["preemptions"]),
              "num_gpus": d.num_gpus, "cost_per_hour": d.cost_per_hour, "duration_s": float(duration)}
    return DisaggregatedResult(d, pre, dec, req, dec.latency, _stats(handoff - workload.arrival),
                               _transfer_summary(req, dengines), pools, totals)


__all__ = ["DecodeEngine", "DecodeTransfers", "DisaggError", "DisaggregatedDeployment", "DisaggregatedResult",
           "KvLink", "Meter", "MeteredEngine", "Pool", "PrefillEngine", "PrefillHold", "deployment_from_dict",
           "link_from_dict", "pool_from_dict", "pool_metrics", "simulate_disaggregated"]
