"""Routing policies of a cluster of engine instances: parsing, scorers and the router.

A policy is written as a string (``docs/cluster.md``):

* ``round-robin``: the k-th request (arrival order) goes to instance ``k mod N``;
* ``least-loaded``: fewest requests on the instance (waiting + running), then
  lowest KV usage;
* ``prefix-affinity``: the instance the router believes holds the longest
  leading run of the request's full prompt blocks;
* ``random``: uniform, seeded (``numpy.random.default_rng(seed)``);
* ``weighted:NAME:W,NAME:W,...`` (or just ``NAME:W,...``): the highest weighted
  sum of scorers, each scoring every instance in [0, 1] (higher is better).

Scorers: ``queue-depth`` (waiting requests), ``running`` (running requests)
and ``kv-usage`` (used / usable GPU blocks) are min-max normalised so that
the least loaded instance scores 1 and the most loaded 0 (all 1 when equal);
``prefix-affinity`` is the fraction of the request's hit-eligible full
prompt blocks (``(prompt_len - 1) // block_size``; vLLM never hits the last
prompt token) that the router's view says the instance holds as a leading run;
``round-robin`` is 1 for instance ``k mod N`` and 0 elsewhere.

Ties (equal best score, within 1e-9 of the weight sum) go to the first
candidate in round-robin order from ``k mod N``, so a policy whose scores are
all equal degenerates to round-robin and never piles onto instance 0.

Load signals (queue depth, running, KV usage) are read live at the request's
arrival. The prefix view is what the router knew ``router_delay_s`` earlier
(see :class:`Router`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator.base.errors import FieldError

#: Most instances one cluster may hold.
MAX_INSTANCES = 256
#: Named policies (besides ``weighted:...``).
POLICIES = ("round-robin", "least-loaded", "prefix-affinity", "random")
#: Scorers a weighted policy may combine.
SCORERS = ("queue-depth", "running", "kv-usage", "prefix-affinity", "round-robin")
#: Scorers that read instance state (the others need no instance advanced before routing).
_STATEFUL = frozenset({"queue-depth", "running", "kv-usage", "prefix-affinity"})


class ClusterError(FieldError):
    """Bad cluster or routing input; the message names the field."""


@dataclass(frozen=True)
class RoutingPolicy:
    """A parsed routing policy.

    Parameters
    ----------
    kind : {"round-robin", "least-loaded", "prefix-affinity", "random", "weighted"}
    scorers : tuple of (str, float)
        ``(scorer, weight)`` pairs for ``weighted`` (weights >= 0, at least one
        > 0); ``(("prefix-affinity", 1.0),)`` for ``prefix-affinity``; empty
        otherwise.
    """

    kind: str
    scorers: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in POLICIES + ("weighted",):
            raise ClusterError(f"unknown policy {self.kind!r} (known: {', '.join(POLICIES)}, weighted:...)", field="routing")
        for name, w in self.scorers:
            if name not in SCORERS:
                raise ClusterError(f"unknown scorer {name!r} (known: {', '.join(SCORERS)})", field="routing")
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
                raise ClusterError(f"weight of {name!r} must be a number >= 0, got {w!r}", field="routing")
        if self.kind == "prefix-affinity" and not self.scorers:
            object.__setattr__(self, "scorers", (("prefix-affinity", 1.0),))
        elif self.kind in ("round-robin", "least-loaded", "random") and self.scorers:
            raise ClusterError(f"{self.kind} takes no scorers (use weighted:...)", field="routing")
        elif self.kind == "weighted" and not any(w > 0 for _, w in self.scorers):
            raise ClusterError("a weighted policy needs at least one weight > 0", field="routing")

    @property
    def uses(self) -> frozenset[str]:
        """Scorer names this policy reads."""
        if self.kind == "least-loaded":
            return frozenset({"queue-depth", "running", "kv-usage"})
        return frozenset(n for n, w in self.scorers if w > 0)

    @property
    def stateful(self) -> bool:
        """Decisions depend on instance state (every instance must be current at each arrival)."""
        return bool(self.uses & _STATEFUL)

    def __str__(self) -> str:
        if self.kind != "weighted":
            return self.kind
        return "weighted:" + ",".join(f"{n}:{w:g}" for n, w in self.scorers)


def parse_routing(text: str | RoutingPolicy) -> RoutingPolicy:
    """A :class:`RoutingPolicy` from its string form (see the module docstring).

    Raises
    ------
    ClusterError
        Unknown policy or scorer, bad or negative weight, duplicate scorer, or
        all weights zero; the message quotes the bad part.
    """
    if isinstance(text, RoutingPolicy):
        return text
    if not isinstance(text, str) or not text.strip():
        raise ClusterError(f"must be a non-empty string such as 'round-robin', got {text!r}", field="routing")
    s = text.strip()
    if s in POLICIES:
        return RoutingPolicy(s)
    if s == "weighted":
        raise ClusterError("'weighted' needs scorers, e.g. weighted:prefix-affinity:3,queue-depth:1", field="routing")
    weighted = s.startswith("weighted:")
    body = s[len("weighted:"):] if weighted else s
    if not weighted and ":" not in body:
        raise ClusterError(f"unknown policy {s!r} (known: {', '.join(POLICIES)}, "
                           "or weighted:SCORER:WEIGHT,... with scorers " + ", ".join(SCORERS) + ")", field="routing")
    pairs: list[tuple[str, float]] = []
    for part in body.split(","):
        name, colon, w = part.strip().partition(":")
        name = name.strip()
        if not colon or not name or not w.strip():
            raise ClusterError(f"{part.strip()!r} in {s!r} is not SCORER:WEIGHT (e.g. queue-depth:1)", field="routing")
        if name not in SCORERS:
            raise ClusterError(f"unknown scorer {name!r} in {s!r} (known: {', '.join(SCORERS)})", field="routing")
        try:
            weight = float(w)
        except ValueError:
            raise ClusterError(f"weight {w.strip()!r} of {name!r} is not a number", field="routing") from None
        if not math.isfinite(weight) or weight < 0:
            raise ClusterError(f"weight of {name!r} must be a finite number >= 0, got {w.strip()!r}", field="routing")
        if any(n == name for n, _ in pairs):
            raise ClusterError(f"scorer {name!r} given twice in {s!r}", field="routing")
        pairs.append((name, weight))
    if not any(w > 0 for _, w in pairs):
        raise ClusterError(f"at least one weight must be > 0 in {s!r}", field="routing")
    return RoutingPolicy("weighted", tuple(pairs))


def _minmax_low_best(x: np.ndarray) -> np.ndarray:
    """1 for the smallest value, 0 for the largest, linear between; all 1 when equal.  # shape (N,)"""
    lo, hi = float(x.min()), float(x.max())
    if hi <= lo:
        return np.ones(x.shape[0])
    return (hi - x) / (hi - lo)


class Router:
    """Chooses an instance for each arriving request from the fleet's state arrays.

    Parameters
    ----------
    policy : RoutingPolicy
    fleet : simulator.cluster.fleet.Fleet
        The instances; every signal is read from its arrays over the
        instance axis (``waiting``, ``running``, ``kv_usage()``,
        ``held_prefix()``), current at the arrival.
    prompt_len : ndarray of int64, shape (n,)  # tokens
    seed : int
        For the ``random`` policy.

    The prefix view: :meth:`observe` records, for one request, how many of its
    leading hit-eligible full prompt blocks each instance holds on its GPU at
    that moment (``Fleet.held_prefix``; blocks of the fleet's key space: token
    slots for the radix cache). The cluster calls it ``router_delay_s`` before
    the request arrives (or at the arrival when the delay is 0), so the
    prefix-affinity score uses the cache as it was then. A request never
    observed (its observation time falls before the first arrival) scores 0
    everywhere: every cache was still empty.
    """

    def __init__(self, policy: RoutingPolicy, fleet, *, prompt_len: np.ndarray, seed: int = 0) -> None:
        self.policy = policy
        self.fleet = fleet
        self.N = len(fleet)
        self.koff = fleet.koff
        self.keyarr = fleet.keyarr
        self.nfull = (np.asarray(prompt_len, np.int64) - 1) // fleet.block_size  # blocks, hit-eligible
        self.k = 0  # requests routed so far
        self.rng = np.random.default_rng(seed)
        self._seen: dict[int, np.ndarray] = {}  # request -> leading cached blocks per instance, shape (N,)
        self.weights = [(n, w) for n, w in policy.scorers if w > 0]
        self.wsum = sum(w for _, w in self.weights)

    # ---------------------------------------------------------------- prefix view
    def _keys(self, q: int) -> np.ndarray:
        o = int(self.koff[q])
        m = int(self.nfull[q])
        if self.keyarr is None:
            return np.arange(o, o + m, dtype=np.int64)
        return self.keyarr[o:o + m]

    def observe(self, q: int) -> None:
        """Record what each instance holds of request ``q``'s prompt now (the router's view for ``q``)."""
        self._seen[q] = self.fleet.held_prefix(self._keys(q))

    def affinity(self, q: int) -> np.ndarray:
        """Prefix-affinity score per instance, shape (N,), in [0, 1] (0 when never observed)."""
        seen = self._seen.pop(q, None)
        m = int(self.nfull[q])
        if seen is None or m <= 0:
            return np.zeros(self.N)
        return seen / m

    # ---------------------------------------------------------------- decision
    def _first(self, cand: np.ndarray) -> int:
        """The first candidate in round-robin order from ``k mod N``."""
        s = self.k % self.N
        rot = np.concatenate((cand[s:], cand[:s]))
        return (int(np.argmax(rot)) + s) % self.N

    def choose(self, q: int) -> int:
        """The instance for request ``q`` (the fleet current at its arrival); advances the round-robin count."""
        N = self.N
        kind = self.policy.kind
        fleet = self.fleet
        if N == 1:
            i = 0
            self._seen.pop(q, None)
        elif kind == "round-robin":
            i = self.k % N
        elif kind == "random":
            i = int(self.rng.integers(N))
        elif kind == "least-loaded":
            load = fleet.waiting + fleet.running
            use = fleet.kv_usage()
            cand = load == load.min()
            use = np.where(cand, use, np.inf)
            i = self._first(cand & (use <= use.min() + 1e-12))
        else:
            total = np.zeros(N)
            for name, w in self.weights:
                total += w * self._score(name, q)
            i = self._first(total >= total.max() - 1e-9 * max(1.0, self.wsum))
        self.k += 1
        return i

    def _score(self, name: str, q: int) -> np.ndarray:
        fleet = self.fleet
        if name == "queue-depth":
            return _minmax_low_best(fleet.waiting.astype(np.float64))
        if name == "running":
            return _minmax_low_best(fleet.running.astype(np.float64))
        if name == "kv-usage":
            return _minmax_low_best(fleet.kv_usage())
        if name == "prefix-affinity":
            return self.affinity(q)
        # round-robin
        s = np.zeros(self.N)
        s[self.k % self.N] = 1.0
        return s


__all__ = ["MAX_INSTANCES", "POLICIES", "SCORERS", "ClusterError", "RoutingPolicy", "Router", "parse_routing"]
