"""Test-only reference of the CPU and disk KV tiers: one key at a time, one ordered dict per tier.

The engine's tiers (:class:`simulator.engine.tiers.TierChain`) put keys in bulk, defer demotions until the tiers
are read and answer some reads without applying them; this is the plain model they must equal, written from
``docs/simulator.md`` ("KV tiers") and nothing of the engine:

* a block evicted from the GPU is demoted into the first tier (the CPU): a key held there is refreshed (most
  recent), a new one inserted; a tier over its capacity pushes its least recent key down to the next tier (disk),
  and the last tier drops it. A tier of capacity 0 passes every key straight down;
* the evictions of one engine step are one transfer into the CPU tier (one ``write_latency_s``);
* a prefix that continues after the GPU hit is matched key by key, each key from the highest tier holding it,
  stopping at the first key no tier holds; loading it queues on each tier's read link (``read_latency_s +
  bytes / read_gbps``; the CPU and disk parts of one request load in parallel), and the loaded keys become the
  most recent in every tier holding them;
* background copies cost ``transfers x write_latency_s`` of the CPU tier plus every block written into a tier over
  that tier's ``write_gbps``.

:mod:`tests.simulator.reference_core` uses it for its ``cpu_tier`` / ``disk_tier``; ``test_tiers.py`` holds the
engine to it.
"""

from __future__ import annotations

from collections import OrderedDict

GB = 1e9


class ScalarTiers:
    """The lower tiers of one reference engine (``tiers``: ``[(name, KvTier)]`` top down), with the same
    counters and totals as the engine's tiers."""

    def __init__(self, tiers: list, bytes_per_block: int | None) -> None:
        self.names = [name for name, _ in tiers]
        self.specs = [spec for _, spec in tiers]
        self.bpb = bytes_per_block or 0
        self.capacity = [spec.blocks(bytes_per_block) for spec in self.specs]
        self.held: list[OrderedDict] = [OrderedDict() for _ in tiers]  # key -> None, least recent first
        k = len(tiers)
        self.hit_tokens = [0] * k
        self.onboarded = [0] * k
        self.offloaded = [0] * k
        self.dropped = 0
        self.bytes_onboarded = 0
        self.onboard_time_s = 0.0
        self.link_free = [0.0] * k
        self.transfers = 0
        self.load_stalls = 0
        self._last_step = object()  # no step yet

    def demote(self, key, step) -> None:
        """One block evicted from the GPU at engine step ``step``."""
        if step != self._last_step:
            self.transfers += 1
            self._last_step = step
        self._put(0, key)

    def _put(self, i: int, key) -> None:
        if i == len(self.held):
            self.dropped += 1
            return
        if self.capacity[i] <= 0:
            self._put(i + 1, key)
            return
        tier = self.held[i]
        if key in tier:
            tier.move_to_end(key)
            return
        tier[key] = None
        self.offloaded[i] += 1
        if len(tier) > self.capacity[i]:
            oldest, _ = tier.popitem(last=False)
            self._put(i + 1, oldest)

    def match(self, keys) -> list[int]:
        """Blocks of ``keys`` (the prefix after the GPU hit) found in each tier, in order, up to the first miss."""
        counts = [0] * len(self.held)
        for key in keys:
            where = next((i for i, tier in enumerate(self.held) if key in tier), None)
            if where is None:
                break
            counts[where] += 1
        return counts

    def onboard(self, keys, counts: list[int], block_size: int, now: float) -> float:
        """Load ``keys`` (``sum(counts)``) to the GPU from ``now``; returns when they are there (s)."""
        ready = now
        for i, c in enumerate(counts):
            if not c:
                continue
            spec = self.specs[i]
            b = c * self.bpb
            start = max(now, self.link_free[i])
            end = start + spec.read_latency_s + b / (spec.read_gbps * GB)
            self.link_free[i] = end
            ready = max(ready, end)
            self.onboarded[i] += c
            self.bytes_onboarded += b
            self.hit_tokens[i] += c * block_size
        for tier in self.held:
            for key in keys:
                if key in tier:
                    tier.move_to_end(key)
        self.onboard_time_s += ready - now
        return ready

    def offload_time_s(self) -> float:
        t = self.transfers * self.specs[0].write_latency_s if self.specs else 0.0
        for spec, n in zip(self.specs, self.offloaded):
            t += n * self.bpb / (spec.write_gbps * GB)
        return t

    def totals(self) -> dict:
        out: dict = {}
        for i, name in enumerate(self.names):
            out[f"{name}_tier_blocks"] = self.capacity[i]
            out[f"{name}_tier_hit_tokens"] = self.hit_tokens[i]
            out[f"{name}_tier_blocks_offloaded"] = self.offloaded[i]
            out[f"{name}_tier_blocks_onboarded"] = self.onboarded[i]
        out["tier_blocks_dropped"] = self.dropped
        out["tier_bytes_offloaded"] = sum(self.offloaded) * self.bpb
        out["tier_bytes_onboarded"] = self.bytes_onboarded
        out["tier_onboard_time_s"] = self.onboard_time_s
        out["tier_offload_time_s"] = self.offload_time_s()
        out["tier_load_stalls"] = self.load_stalls
        return out
