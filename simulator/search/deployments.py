"""Deployment search: the cheapest deployment that meets a latency SLO.

>>> from simulator.search.deployments import search_deployments
>>> res = search_deployments(workload, model, space, slo)   # doctest: +SKIP
>>> res.best.summary()                                        # doctest: +SKIP
'3x (1x H100 SXM5 80GB (TP 1), fp8 weights, ...) at $11.34/h ...'

The space (:class:`simulator.search.space.SearchSpace`) crosses GPU types,
TP/PP degrees, weight precisions, KV dtypes and ``max_num_seqs`` caps into
replica shapes (candidates); the search picks a shape and a replica count
behind the router. It is a branch and bound over cost, not brute force:

1. **Sizing prunes.** Each shape is sized as vLLM starts it; one that does not
   fit (or has no price or roofline) is rejected with the reason in words
   before anything is simulated.
   Latency floors that no replica count can beat (the prefill compute of a
   prompt, one decode step per token) reject a shape whose GPU is too slow
   for the targets, also before simulating.
2. **Cheapest estimate first.** Each fitting shape gets an estimate of its
   replicas from the roofline's throughput
   (:func:`simulator.search.evaluate.replicas_lower_bound`); shapes are visited in
   order of the estimate's cost, so a cheap answer comes early. Once an answer
   costs C, a shape whose single replica costs C or more is skipped as
   dominated, and a shape is only simulated at replica counts that would cost
   less than C.
3. **Bisection on replicas.** Latency is taken as monotone in the replica
   count (more replicas never hurt). With an answer known, the most replicas
   that would still be cheaper are tried first (one simulation rejects most
   shapes). Then the search tries the estimate; if it meets the SLO, bisection
   below it finds the fewest, else counts double until one meets and
   bisection follows. The answer N is simulated and so is N - 1
   (unless N is 1).
4. **Screening.** Large traffic is first simulated on its leading requests
   (an eighth, then a quarter); a deployment whose leading requests, and the
   later ones queued behind them, already break a percentile is rejected
   without the full run (:func:`simulator.search.evaluate.screen_miss`).
5. **Independent replicas.** Behind a round-robin router each replica is the
   plain engine over its share of the requests (:class:`_Replicas`), cut once
   per replica count; other routers run the cluster simulation with one
   :class:`simulator.engine.core.WorkloadPrep` of the workload.

Every shape ends as a :class:`Outcome` with a status and a reason
(``does not fit: needs 41.2 GiB for weights ...``, ``misses TTFT p90 by 212
ms``); the result also holds the Pareto frontiers, one per SLO target, of cost
against that target's figure over the simulated deployments that meet every
other target (:func:`frontier`). The answer is the cheapest deployment that
meets the SLO; at equal cost the better latency, then the fewer GPUs
(:func:`answer_key`). ``exhaustive=True`` simulates
every replica count of every fitting shape (brute force, for tests).
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simulator.base import ModelSpec, figure, ms_against
from simulator.batch import simulate
from simulator.cluster import SUMMED_TOTALS, LoadBalance, simulate_cluster
from simulator.engine import SimResult, TokenGaps, WorkloadPrep
from simulator.search.evaluate import (
    SCREEN_MIN_REQUESTS,
    SCREEN_SHARES,
    Prepared,
    Trial,
    default_max_model_len,
    judge,
    leading_requests,
    prepare_candidate,
    screen_miss,
    screened_trial,
)
from simulator.search.space import Candidate, SearchError, SearchSpace, Slo, check_space_for_model, format_seconds
from simulator.workload import Workload

#: Outcome statuses, best first.
STATUSES = ("answer", "meets", "misses", "dominated", "rejected")


class SearchCancelled(Exception):
    """Raised when the ``should_stop`` callback asks the search to stop."""


@dataclass(frozen=True)
class Outcome:
    """What became of one candidate.

    ``status``: ``answer`` (the cheapest deployment meeting the SLO), ``meets``
    (meets it at ``replicas`` but costs more), ``misses`` (simulated, never met
    within the replica counts worth trying), ``dominated`` (skipped: its bound
    already costs more than the answer) or ``rejected`` (not simulated: does not
    fit, no price, no roofline).
    """

    index: int
    candidate: dict[str, Any]
    status: str
    reason: str
    replicas: int | None
    cost_per_hour: float | None  # USD/h
    cost_per_million_tokens: float | None  # USD
    min_replicas: int | None
    sizing: dict[str, Any]
    trials: tuple[Trial, ...]

    def summary(self) -> str:
        """The deployment in words, with its cost."""
        c = self.candidate
        if self.replicas is None:
            return f"{c['label']}: {self.reason}"
        per_m = "" if self.cost_per_million_tokens is None else f", ${self.cost_per_million_tokens:,.2f} per million output tokens"
        gpus = self.replicas * c["gpus_per_replica"]
        return (f"{self.replicas} replica{'s' if self.replicas > 1 else ''} of {c['label']} "
                f"({gpus} GPU{'s' if gpus > 1 else ''}) at ${self.cost_per_hour:,.2f}/h{per_m}")

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "trials"}
        d["trials"] = [t.to_dict() for t in self.trials]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        kw = {k: d[k] for k in cls.__dataclass_fields__ if k != "trials"}
        return cls(**kw, trials=tuple(Trial.from_dict(t) for t in d["trials"]))


@dataclass(frozen=True)
class SearchResult:
    """The answer: ``best`` (None when nothing meets the SLO), ``closest`` (the
    simulated deployment nearest to meeting it, when nothing does), the
    Pareto ``frontier`` (cost vs the SLO's first metric, cheapest first) and
    every candidate's :class:`Outcome`."""

    slo: dict[str, Any]
    best: Outcome | None
    closest: dict[str, Any] | None
    frontier: tuple[dict[str, Any], ...]
    outcomes: tuple[Outcome, ...]
    message: str
    num_simulations: int
    elapsed_s: float  # s

    def to_dict(self) -> dict[str, Any]:
        return {"slo": self.slo, "best": None if self.best is None else self.best.to_dict(),
                "closest": self.closest, "frontier": list(self.frontier),
                "outcomes": [o.to_dict() for o in self.outcomes], "message": self.message,
                "num_simulations": self.num_simulations, "elapsed_s": self.elapsed_s,
                "counts": {s: sum(o.status == s for o in self.outcomes) for s in STATUSES}}


def _key(cost: float, gpus: int, index: int) -> tuple[float, int, int]:
    """Order in which shapes are visited: the cost of their estimate, then GPUs, then their place in the space."""
    return (round(cost, 9), gpus, index)


def _cost(cost: float) -> float:
    """Costs compare to the nano-dollar per hour (sums of prices need not be bit-equal)."""
    return round(cost, 9)


def answer_key(cost: float, trial: Trial, gpus: int, index: int) -> tuple:
    """The answer's rule among deployments that meet the SLO: the cheapest; at equal cost the better
    latency (the lower worst ratio of a target's figure to its bound, :attr:`Trial.severity`), then
    the fewer GPUs, then the place in the space."""
    sev = trial.severity if math.isfinite(trial.severity) else math.inf
    return (_cost(cost), round(sev, 12), gpus, index)


class _Replicas:
    """Replicas the router makes independent, each a plain engine run over its share of the requests,
    seen as one cluster result (what :func:`simulator.search.evaluate.judge` and
    :func:`simulator.search.evaluate.screen_miss` read).

    One replica is the plain engine, request for request the one-instance cluster (``docs/cluster.md``).
    A round-robin router sends the k-th request (arrival order) to replica ``k mod N`` whatever the
    replicas' state, so each replica is the plain engine over the requests it is sent, request for
    request the instance of :func:`simulator.cluster.replicas.simulate_cluster`, without the router loop
    (about 1.7x less CPU for 4 replicas of 12,000 requests). Requests and totals are gathered as
    the cluster gathers its instances'.
    """

    def __init__(self, workload: Workload, shares: list[np.ndarray], results: list) -> None:
        self.num_instances = n = len(results)
        if n == 1:
            self.totals, self.requests = results[0].totals, results[0].requests
            self.latency = results[0].latency()
            self.load = LoadBalance.of(np.zeros(workload.n, np.int64), workload.prompt_len + workload.output_len, 1)
            return
        assign = np.empty(workload.n, np.int64)
        req = {k: np.empty(workload.n, np.asarray(results[0].requests[k]).dtype) for k in _COLUMNS}
        for i, (idx, res) in enumerate(zip(shares, results)):
            assign[idx] = i
            for k in _COLUMNS:
                req[k][idx] = res.requests[k]
        req["instance"] = assign
        self.requests = req
        self.totals = {k: int(sum(r.totals.get(k, 0) for r in results)) for k in SUMMED_TOTALS}
        self.latency = SimResult(totals=self.totals, requests=req, steps=None, arrival_unit=workload.arrival_unit,
                                 token_gaps=TokenGaps.concat(r.token_gaps for r in results)).latency()
        self.load = LoadBalance.of(assign, workload.prompt_len + workload.output_len, n)


#: The per-request columns a search reads of a simulation (latency, goodput, serving time).
_COLUMNS = ("arrival", "prompt_len", "num_output_tokens", "first_token_time_s", "finish_time_s", "itl_gaps_known")


def _independent(workload: Workload, routing: str) -> bool:
    """Whether replicas behind ``routing`` serve ``workload`` independently (see :class:`_Replicas`):
    round-robin, and no conversation whose turns another replica's cache could hold."""
    return routing == "round-robin" and not bool((workload.parent >= 0).any())


class _Run:
    """The state of one search: the workload's precomputation, counters, the stop check.

    A large workload (:data:`simulator.search.evaluate.SCREEN_MIN_REQUESTS` requests or more) is first
    simulated on its leading requests (an eighth, then a quarter:
    :data:`simulator.search.evaluate.SCREEN_SHARES`); a deployment whose leading requests, and the
    later ones queued behind them, already break a percentile over the whole run is rejected
    without the full simulation (:func:`simulator.search.evaluate.screen_miss`).
    """

    def __init__(self, workload: Workload, slo: Slo, space: SearchSpace, should_stop: Callable[[], bool] | None,
                 screen_min_requests: int | None = SCREEN_MIN_REQUESTS):
        self.workload, self.slo, self.space = workload, slo, space
        self.prep = WorkloadPrep(workload)
        self.should_stop = should_stop
        self.simulations = 0
        self.screened = 0
        self.independent = _independent(workload, space.routing)
        self._share_cache: dict[tuple[int, int], list] = {}
        self.leads = []  # (workload, prep) of each screening run, smallest first
        if screen_min_requests is not None and workload.n >= screen_min_requests:
            for share in SCREEN_SHARES:
                lead = leading_requests(workload, math.ceil(workload.n * share))
                if lead is not None:
                    self.leads.append((lead, WorkloadPrep(lead)))

    def _simulate(self, wl: Workload, prep, p: Prepared, n: int):
        """``n`` replicas of shape ``p`` serving ``wl``: the one place a deployment is simulated.

        Whatever it returns is read as a cluster result (``latency``, ``totals``, ``requests``,
        ``num_instances``, ``load``). A new kind of shape (say disaggregated prefill/decode pools)
        brings its sizing in :func:`simulator.search.evaluate.prepare_candidate` and its simulation here.
        """
        if self.should_stop is not None and self.should_stop():
            raise SearchCancelled("search cancelled")
        self.simulations += 1
        if p.group is not None:  # n DP groups behind a round-robin router (simulate_dp's replicas)
            return p.group.simulate(wl, p.config, prep=prep, replicas=n).cluster
        if n > 1 and not self.independent:
            return simulate_cluster(wl, p.config, n, routing=self.space.routing, prep=prep)
        parts = self._shares(wl, prep, n)
        return _Replicas(wl, [idx for idx, _ in parts], [simulate(part, [p.config])[0] for _, part in parts])

    def _shares(self, wl: Workload, prep, n: int) -> list[tuple[np.ndarray, Workload]]:
        """Each replica's requests (indices into ``wl``) and workload, round-robin in arrival order."""
        key = (id(wl), n)
        if key not in self._share_cache:
            order = prep.order
            self._share_cache[key] = [(idx, wl if n == 1 else wl.select(idx))
                                      for idx in (order[i::n] for i in range(n))]
        return self._share_cache[key]

    def trial(self, p: Prepared, n: int) -> Trial:
        cost = n * p.candidate.price_per_replica
        for lead, prep in self.leads:
            why = screen_miss(self._simulate(lead, prep, p, n), self.workload, self.slo, p.config.cost_model)
            if why:
                self.screened += 1
                return screened_trial(n, cost, self.slo, why)
        trial = judge(self._simulate(self.workload, self.prep, p, n), self.workload, self.slo, cost)
        # a DP group's cluster counts its ranks as instances; the trial counts replicas (DP groups), as the
        # search's outcome does (its answer is the trial at its replicas)
        return trial if p.group is None else replace(trial, num_instances=n)


def _largest_cheaper(p: Prepared, best_cost: float | None, max_n: int) -> int:
    """Most replicas of ``p`` that cost no more than ``best_cost`` (0 when none): an equal cost is still tried,
    since a tie goes to the better latency (:func:`answer_key`)."""
    if best_cost is None:
        return max_n
    price = p.candidate.price_per_replica
    n = 0
    while n < max_n and _cost((n + 1) * price) <= best_cost:
        n += 1
    return n


def _fewest_meeting(run: _Run, p: Prepared, start: int, hi_n: int, bounded: bool) -> tuple[int | None, dict]:
    """Fewest replicas in [1, hi_n] meeting the SLO (taken as monotone), starting the search at ``start``.

    With an answer already known (``bounded``) the dearest useful count ``hi_n`` is tried first: most
    candidates then cannot beat the answer, and one simulation says so.
    """
    tried: dict[int, Trial] = {}

    def meets(n: int) -> bool:
        if n not in tried:
            tried[n] = run.trial(p, n)
        return tried[n].meets

    fail, ok = 0, None  # largest count known to miss, smallest known to meet
    if bounded and start < hi_n:
        if not meets(hi_n):
            return None, tried
        ok = hi_n
    if meets(start):
        ok = start
    else:
        fail = n = start
        while ok is None and n < hi_n:
            n = min(2 * n, hi_n)
            if meets(n):
                ok = n
            else:
                fail = n
    if ok is None:
        return None, tried
    while ok - fail > 1:
        mid = (fail + ok) // 2
        if meets(mid):
            ok = mid
        else:
            fail = mid
    return ok, tried


def _exhaustive(run: _Run, p: Prepared) -> tuple[int | None, dict]:
    tried = {n: run.trial(p, n) for n in range(1, run.space.replicas_cap(p.candidate) + 1)}
    return next((n for n, t in tried.items() if t.meets), None), tried


def _outcome(p: Prepared, status: str, reason: str, replicas: int | None = None,
             trials: dict | None = None) -> Outcome:
    trials = trials or {}
    t = trials.get(replicas) if replicas is not None else None
    return Outcome(p.index, p.candidate.to_dict(), status, reason, replicas,
                   None if t is None else t.cost_per_hour, None if t is None else t.cost_per_million_tokens,
                   p.min_replicas if p.config is not None else None, p.sizing,
                   tuple(trials[k] for k in sorted(trials)))


def _visit(run: _Run, p: Prepared, best_cost: float | None, exhaustive: bool) -> Outcome:
    """Search one fitting candidate against the cost of the best answer so far."""
    price = p.candidate.price_per_replica
    cap = max_n = run.space.replicas_cap(p.candidate)
    if exhaustive:
        found, trials = _exhaustive(run, p)
    else:
        hi_n = _largest_cheaper(p, best_cost, max_n)
        if hi_n < 1:
            return _outcome(p, "dominated", f"skipped: one replica costs ${price:,.2f}/h, more than the "
                                            "best found")
        found, trials = _fewest_meeting(run, p, min(p.min_replicas, hi_n), hi_n, best_cost is not None)
        max_n = hi_n
    if found is None:
        last = trials[max(trials)]
        why = "; ".join(last.misses)
        limit = (("the most replicas allowed" if cap == run.space.max_replicas else
                  f"the most within space.max_gpus {run.space.max_gpus:,}") if max_n == cap
                 else "the most that would cost no more than the best found")
        return _outcome(p, "misses", f"{max(trials)} replicas ({limit}) {why}", None, trials)
    return _outcome(p, "meets", _meets_reason(found), found, trials)


def _meets_reason(found: int) -> str:
    return f"meets the SLO with {found} replica{'s' if found > 1 else ''}"


def search_deployments(
    workload: Workload,
    model: ModelSpec,
    space: SearchSpace,
    slo: Slo,
    *,
    exhaustive: bool = False,
    screen_min_requests: int | None = SCREEN_MIN_REQUESTS,
    candidates: list[int] | None = None,
    progress: Callable[[float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    processes: int = 1,
    cost_bound: float | None = None,
) -> SearchResult:
    """Find the cheapest deployment in ``space`` meeting ``slo`` for ``workload``.

    Parameters
    ----------
    workload : Workload
        Arrivals in seconds (the traffic's rate is the workload's).
    model : ModelSpec
        The model as its checkpoint is (precision comes from the space).
    space : SearchSpace
    slo : Slo
    exhaustive : bool
        Simulate every replica count 1..max_replicas of every fitting shape.
    screen_min_requests : int or None
        Screen workloads of at least this many requests on their leading requests first (see
        :class:`_Run`); None: never.
    candidates : list of int, optional
        Search only these indices of ``space.candidates()`` (a chunk of a
        larger search; :func:`merge_results` gathers the chunks).
    progress : callable, optional
        Called with the fraction of candidates settled, in [0, 1].
    should_stop : callable, optional
        Checked before every simulation; True raises :class:`SearchCancelled`.
    processes : int
        Split the GPU types over this many forked processes, each with its own branch and bound,
        and gather them with :func:`merge_results` (the Celery chunks do the same across workers).
        ``progress`` and ``should_stop`` are then not called.
    cost_bound : float, optional
        USD per hour of an answer already found elsewhere (another chunk): deployments dearer than
        it are not simulated (equal cost still is, so ties break as in one search).

    Raises
    ------
    SearchError
        Bad input (the message names the field).
    """
    started = time.perf_counter()
    _check_inputs(workload, model, space, slo)
    if processes > 1 and candidates is None:
        return _in_processes(workload, model, space, slo, processes, exhaustive, screen_min_requests, started)
    mml = space.max_model_len or default_max_model_len(workload, model)
    longest = int((workload.prompt_len + workload.output_len).max())
    if longest > mml:
        raise SearchError(f"its longest request ({longest:,} tokens) is longer than max_model_len "
                          f"({mml:,} tokens{', the model context' if space.max_model_len is None else ''})", field="workload")
    all_cands = space.candidates()
    idx = list(range(len(all_cands))) if candidates is None else list(candidates)
    prepared = [prepare_candidate(i, all_cands[i], model, space, mml, workload, slo) for i in idx]
    run = _Run(workload, slo, space, should_stop, None if exhaustive else screen_min_requests)
    outcomes = [_outcome(p, "rejected", p.reason) for p in prepared if p.config is None]
    fitting = sorted((p for p in prepared if p.config is not None),
                     key=lambda p: _key(p.min_replicas * p.candidate.price_per_replica,
                                        p.min_replicas * p.candidate.gpus_per_replica, p.index))
    best_cost = None if cost_bound is None else _cost(cost_bound)
    for k, p in enumerate(fitting):
        out = _visit(run, p, None if exhaustive else best_cost, exhaustive)
        outcomes.append(out)
        if out.replicas is not None:
            cost = _cost(out.replicas * p.candidate.price_per_replica)
            if best_cost is None or cost < best_cost:
                best_cost = cost
        if progress is not None:
            progress((k + 1) / len(fitting))
    if progress is not None and not fitting:
        progress(1.0)
    return assemble(outcomes, slo, run.simulations, time.perf_counter() - started)


def gpu_groups(space: SearchSpace, groups: int) -> list[list[int]]:
    """Candidate indices split into ``groups`` lists, whole GPU types each, balanced by count."""
    cands = space.candidates()
    by_gpu = [[i for i, c in enumerate(cands) if c.gpu.name == g.name] for g in space.gpus]
    out: list[list[int]] = [[] for _ in range(max(1, min(groups, len(by_gpu))))]
    for part in sorted(by_gpu, key=len, reverse=True):
        min(out, key=len).extend(part)
    return [sorted(o) for o in out if o]


def _search_part(args: tuple) -> dict[str, Any]:
    workload, model, space, slo, idx, exhaustive, screen = args
    return search_deployments(workload, model, space, slo, exhaustive=exhaustive, screen_min_requests=screen,
                              candidates=idx).to_dict()


def _in_processes(workload, model, space, slo, processes, exhaustive, screen, started) -> SearchResult:
    groups = gpu_groups(space, processes)
    jobs = [(workload, model, space, slo, g, exhaustive, screen) for g in groups]
    with ProcessPoolExecutor(max_workers=len(groups), mp_context=multiprocessing.get_context("fork")) as pool:
        parts = list(pool.map(_search_part, jobs))
    res = merge_results(parts, slo)
    return SearchResult(res.slo, res.best, res.closest, res.frontier, res.outcomes, res.message,
                        res.num_simulations, time.perf_counter() - started)


def _check_inputs(workload: Workload, model: ModelSpec, space: SearchSpace, slo: Slo) -> None:
    if not isinstance(workload, Workload):
        raise SearchError("must be a simulator.workload.requests.Workload", field="workload")
    if workload.arrival_unit != "s":
        raise SearchError("give arrivals in seconds (latency targets are in seconds)", field="workload")
    if not isinstance(model, ModelSpec):
        raise SearchError("must be a ModelSpec", field="model")
    if not isinstance(space, SearchSpace):
        raise SearchError("must be a SearchSpace", field="space")
    if not isinstance(slo, Slo):
        raise SearchError("must be a Slo", field="slo")
    check_space_for_model(space, model)


def assemble(outcomes: list[Outcome], slo: Slo, simulations: int, elapsed_s: float) -> SearchResult:
    """Name the answer (:func:`answer_key`), the closest miss and the frontiers from every candidate's outcome."""
    outs = sorted(outcomes, key=lambda o: o.index)
    meeting = [o for o in outs if o.replicas is not None and _trial_at(o, o.replicas) is not None]
    best = min(meeting, key=lambda o: answer_key(o.cost_per_hour, _trial_at(o, o.replicas),
                                                 o.replicas * o.candidate["gpus_per_replica"], o.index),
               default=None)
    final = []
    for o in outs:
        if best is not None and o.index == best.index:
            o = Outcome(**{**o.__dict__, "status": "answer",
                           "reason": f"the cheapest that meets {slo.describe()}{margin_words(o, slo)}"})
        final.append(o)
    best = next((o for o in final if o.status == "answer"), None)
    closest = None if best is not None else _closest(final)
    return SearchResult(slo.to_dict(), best, closest, tuple(frontier(final, slo)), tuple(final),
                        _message(best, closest, slo, final), simulations, elapsed_s)


#: A margin below this share of its target makes the answer marginal (said in its reason).
MARGINAL_SHARE = 0.05


def margin_words(o: Outcome, slo: Slo) -> str:
    """``; tightest: ITL p90 by 1.2 ms (38.8 ms against 40 ms), within 5 % of it: marginal; 4 replicas
    would miss ITL p90 by 3.9 ms (...)``: how close the answer is to its targets and what one replica fewer gives
    (when it was simulated)."""
    t = _trial_at(o, o.replicas)
    if t is None:
        return ""
    gaps = [(tg.max_s - t.values[tg.label], tg) for tg in slo.targets if t.values.get(tg.label) is not None]
    out = ""
    if gaps:
        gap, tg = min(gaps, key=lambda g: g[0] / g[1].max_s)
        value, target = ms_against(t.values[tg.label], tg.max_s)
        out = f"; tightest: {tg.label} by {figure(gap * 1000)} ms ({value} ms against {target} ms)"
        if gap < MARGINAL_SHARE * tg.max_s:
            out += f", within {MARGINAL_SHARE:.0%} of it: marginal, consider one replica more"
    fewer = _trial_at(o, o.replicas - 1) if o.replicas > 1 else None
    if fewer is not None and fewer.misses:
        why = fewer.misses[0]
        verb = next((v for v in ("misses", "leaves", "drops") if why.startswith(v + " ")), None)
        why = f"would {verb[:-1] if verb != 'misses' else 'miss'}{why[len(verb):]}" if verb else f"fall short: {why}"
        out += f"; {fewer.num_instances} replica{'s' if fewer.num_instances > 1 else ''} {why}"
    return out


def _trial_at(o: Outcome, n: int) -> Trial | None:
    return next((t for t in o.trials if t.num_instances == n), None)


def _points(outcomes: list[Outcome]):
    for o in outcomes:
        for t in o.trials:
            yield o, t


def _closest(outcomes: list[Outcome]) -> dict[str, Any] | None:
    pts = list(_points(outcomes))
    if not pts:
        return None
    o, t = min(pts, key=lambda ot: (ot[1].severity, ot[1].cost_per_hour, ot[0].index))
    return {"index": o.index, "candidate": o.candidate, "replicas": t.num_instances, "trial": t.to_dict()}


def _meets_target(t: Trial, tg) -> bool:
    v = t.values.get(tg.label)
    if v is None:
        return tg.metric in ("itl", "tpot") and t.finished > 0  # one-token answers: no gap to judge
    return v <= tg.max_s


def frontier(outcomes: list[Outcome], slo: Slo) -> list[dict[str, Any]]:
    """One Pareto frontier per SLO target: cost against that target's figure, among the simulated
    deployments that meet every other target (and the goodput share), cheapest first.

    A point is on target ``i``'s frontier when no other point costs less and is no slower on ``i``,
    and none of equal cost is better. At equal cost, deployments that meet every target are ordered by
    the answer's rule (:func:`answer_key`: better latency, then fewer GPUs), so the answer is on every
    frontier; others by their figure (equal figures at equal cost are all kept). Each point says which
    target it is on (``metric``, ``label``), its figure ``value_s`` and whether it ``meets`` the SLO.
    """
    out: list[dict[str, Any]] = []
    for i, tg in enumerate(slo.targets):
        others = [o for j, o in enumerate(slo.targets) if j != i]
        pts = [(o, t) for o, t in _points(outcomes)
               if t.values.get(tg.label) is not None and not t.dropped and not t.unfinished and t.finished
               and all(_meets_target(t, o2) for o2 in others)
               and not (slo.min_goodput > 0 and t.goodput < slo.min_goodput)]
        groups: dict[float, list] = {}
        for o, t in pts:
            groups.setdefault(_cost(t.cost_per_hour), []).append((o, t))
        best_v = math.inf
        for cost in sorted(groups):
            group = groups[cost]
            cands = [(o, t) for o, t in group if t.values[tg.label] < best_v]
            meeting = [(o, t) for o, t in cands if t.meets]
            if meeting:
                keep = [min(meeting, key=lambda ot: answer_key(cost, ot[1], ot[1].num_instances
                                                               * ot[0].candidate["gpus_per_replica"], ot[0].index))]
            elif cands:
                low = min(t.values[tg.label] for _, t in cands)
                keep = sorted((ot for ot in cands if ot[1].values[tg.label] == low), key=lambda ot: ot[0].index)
            else:
                keep = []
            for o, t in keep:
                out.append({"metric": tg.metric, "label": tg.label, "index": o.index,
                            "shape": o.candidate["label"], "replicas": t.num_instances, "cost_per_hour": t.cost_per_hour,
                            "gpus": t.num_instances * o.candidate["gpus_per_replica"],
                            "value_s": t.values[tg.label], "meets": t.meets})
            best_v = min(best_v, min(t.values[tg.label] for _, t in group))
    return out


def _message(best: Outcome | None, closest: dict | None, slo: Slo, outcomes: list[Outcome]) -> str:
    if best is not None:
        return f"Cheapest deployment meeting {slo.describe()}: {best.summary()}."
    floor = [o for o in outcomes if o.reason.startswith("cannot meet the SLO")]
    if closest is None and floor:
        near = min(floor, key=lambda o: (o.sizing.get("floor_severity", math.inf), o.index))
        return (f"No deployment in this space meets {slo.describe()}; none could at any replica count "
                f"(the closest, {near.candidate['label']}: {near.reason.split(': ', 1)[1]}).")
    if closest is None:
        return (f"No deployment in this space can run this model and traffic ({len(outcomes)} shapes, none fits): "
                "widen the space (more GPUs per replica, more GPU types, quantized weights).")
    t = closest["trial"]
    return (f"No deployment in this space meets {slo.describe()}; the closest is {t['num_instances']} replica(s) of "
            f"{closest['candidate']['label']} at ${t['cost_per_hour']:,.2f}/h, which {'; '.join(t['misses'])}.")


def merge_results(parts: list[dict[str, Any]], slo: Slo) -> SearchResult:
    """Gather the JSON results of chunks of one search (each over its own candidates) into one answer."""
    outcomes = [Outcome.from_dict(o) for part in parts for o in part["outcomes"]]
    # a chunk's answer is one deployment that meets; assemble names the answer of them all
    outcomes = [o if o.status != "answer" else Outcome(**{**o.__dict__, "status": "meets",
                                                          "reason": _meets_reason(o.replicas)}) for o in outcomes]
    return assemble(outcomes, slo, sum(p["num_simulations"] for p in parts), max(
        (p["elapsed_s"] for p in parts), default=0.0))


__all__ = ["Candidate", "Outcome", "SearchCancelled", "SearchError", "SearchResult", "SearchSpace", "Slo",
           "answer_key", "assemble", "format_seconds", "frontier", "merge_results", "search_deployments"]
