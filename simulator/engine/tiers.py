"""CPU and disk KV tiers below the GPU prefix cache (KVBM / LMCache / BLIS style).

What is modelled (see ``docs/simulator.md``, "KV tiers"):

* a cached block evicted from the GPU is **demoted** to the CPU tier instead
  of being dropped; a block pushed out of the full CPU tier goes to the disk
  tier, and out of the disk tier it is gone. Each tier is an LRU over content
  keys (the stand-ins of vLLM's chained block hashes), so a tier holds the
  most recently demoted or used blocks;
* demotion copies run in the background (vLLM's offloading connector, KVBM
  and LMCache all store asynchronously): they cost bytes and transfer time in
  the metrics, not step time;
* a prefix that continues, after the GPU hit, in a lower tier is **onboarded**:
  the request gets GPU blocks for those keys, waits while they load
  (``latency + blocks x bytes_per_block / bandwidth`` per tier, the way vLLM
  parks a request in ``WAITING_FOR_REMOTE_KVS``), and is then admitted with
  them as prefix-cache hits instead of recomputing them;
* ``kv_offload_threshold`` (BLIS): after a step in which the GPU holds more
  than this fraction of its blocks (in use or cached), the least recently
  freed cached blocks are moved to the CPU tier until it holds no more.

The classes here are plain numpy and know nothing of the engine; the engine
(:mod:`simulator.engine.core`) calls :meth:`TierChain.demote` from the pool's
eviction path and :meth:`TierChain.match` / :meth:`TierChain.onboard_seconds`
at admission.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from simulator.base import unknown_field
from simulator.base.errors import FieldError
from simulator.engine.pool import compact_fifo

GIB = 1024 ** 3
GB = 1e9
#: Largest tier accepted, in blocks (a guard against absurd input).
MAX_TIER_BLOCKS = 200_000_000


class TierError(FieldError):
    """A tier that cannot be simulated; the message names the field."""


@dataclass(frozen=True)
class KvTier:
    """One lower tier (CPU DRAM or disk).

    Parameters
    ----------
    num_blocks : int, optional
        Capacity in KV blocks.  # blocks
    size_gib : float, optional
        Capacity in GiB, converted to blocks with the engine's
        ``kv_bytes_per_block`` (the sizing engine's per-block bytes). Give
        exactly one of ``num_blocks`` and ``size_gib``.  # GiB
    read_gbps : float
        Bandwidth onboarding blocks to the GPU.  # GB/s
    write_gbps : float
        Bandwidth of demotion copies from the tier above.  # GB/s
    read_latency_s, write_latency_s : float
        Fixed cost of one transfer in each direction.  # s

    Defaults are a PCIe 5.0 x16 host link for the CPU (about 50 GB/s usable
    per direction) with 10 us per transfer.
    """

    num_blocks: int | None = None
    size_gib: float | None = None
    read_gbps: float = 50.0
    write_gbps: float = 50.0
    read_latency_s: float = 10e-6
    write_latency_s: float = 10e-6

    def __post_init__(self) -> None:
        if (self.num_blocks is None) == (self.size_gib is None):
            raise TierError("give exactly one of num_blocks and size_gib")
        if self.num_blocks is not None:
            v = self.num_blocks
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_TIER_BLOCKS:
                raise TierError(f"must be a whole number between 0 and {MAX_TIER_BLOCKS:,}, got {v!r}", field="num_blocks")
        if self.size_gib is not None:
            v = self.size_gib
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 1e6:
                raise TierError(f"must be a number of GiB between 0 and 1,000,000, got {v!r}", field="size_gib")
        for name in ("read_gbps", "write_gbps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise TierError(f"must be a bandwidth in GB/s > 0, got {v!r}", field=name)
        for name in ("read_latency_s", "write_latency_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise TierError(f"must be a number of seconds >= 0, got {v!r}", field=name)

    @classmethod
    def from_dict(cls, data: Any, name: str = "tier") -> KvTier:
        if isinstance(data, KvTier):
            return data
        if not isinstance(data, dict):
            raise TierError("must be an object with num_blocks or size_gib, read_gbps, write_gbps ...", field=name)
        bad = unknown_field(cls, data)
        if bad:
            raise TierError(f"{bad[1]}", field=f"{name}.{bad[0]}")
        try:
            return cls(**data)
        except TierError as exc:
            raise TierError.nested(exc, name) from exc

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def blocks(self, bytes_per_block: int | None) -> int:
        """Capacity in blocks."""
        if self.num_blocks is not None:
            return self.num_blocks
        if not bytes_per_block:
            raise TierError("needs kv_bytes_per_block to convert GiB to blocks", field="size_gib")
        return min(int(self.size_gib * GIB // bytes_per_block), MAX_TIER_BLOCKS)


class LruKeys:
    """An LRU set of integer keys with a capacity (FIFO with lazy deletion).

    ``pos[key]`` is the key's live index in ``fifo`` or -1; refreshing a key
    appends it again and leaves a dead entry behind.
    """

    def __init__(self, capacity: int, num_keys: int) -> None:
        self.capacity = capacity
        self.pos = np.full(num_keys, -1, np.int64)
        self.fifo = np.empty(max(1024, min(2 * capacity, 1 << 20)), np.int64)
        self.head = 0
        self.tail = 0
        self.size = 0
        # a key-indexed array that put may fill with negative values (its owner's, see TierChain):
        # repeats are then found without sorting
        self.scratch: np.ndarray | None = None

    def contains(self, keys: np.ndarray) -> np.ndarray:
        return self.pos[keys] >= 0

    def put(self, keys: np.ndarray, count_out: bool = False,
            distinct: bool = False, new: bool = False) -> tuple[int, np.ndarray | int]:
        """Put ``keys`` one after another, in order: a key held is refreshed (most recent), one not
        held is inserted and, when the set is then over capacity, the least recent key is pushed out.

        Returns (keys inserted, keys pushed out in the order they left). The result, and the
        state left, are exactly those of putting each key alone (repeats included), computed
        in bulk over chunks in which no key pushed out is one put later in the chunk.
        ``count_out``: return how many were pushed out instead of which. ``distinct``: the
        caller knows the keys are distinct; ``new``: and that none is held.
        """
        if self.capacity <= 0 or not keys.size:
            out = keys[:0] if self.capacity > 0 else keys
            return 0, out.size if count_out else out
        if distinct and keys.size > self.capacity and (new or not self._holds_any(keys)):
            return self._put_new(keys, count_out)
        new = 0
        outs: list = []
        i, n = 0, keys.size
        top = max(1, min(self.capacity // 2, 1 << 16))  # chunk length: pops stay within the old keys
        step = top
        while i < n:
            got = self._put_chunk(keys[i:i + step], distinct)
            if got is None:  # a key put in the chunk would be pushed out first: a shorter chunk
                step = max(1, step // 2)
                continue
            i += step
            new += got[0]
            outs.append(got[1])
            step = min(top, 2 * step)
        if count_out:
            return new, sum(o.size for o in outs)
        return new, (outs[0] if len(outs) == 1 else np.concatenate(outs)) if outs else keys[:0]

    def _holds_any(self, keys: np.ndarray) -> bool:
        """Whether any of ``keys`` is held (in slices: no large temporary)."""
        pos = self.pos
        return any(bool((pos[keys[a:a + (1 << 18)]] >= 0).any()) for a in range(0, keys.size, 1 << 18))

    def _put_chunk(self, c: np.ndarray, distinct: bool) -> tuple[int, np.ndarray] | None:
        """:meth:`put` of ``c`` in bulk, or None when that would differ from one key at a time.

        In bulk the keys are written in the order of their last occurrence and the
        ``over`` least recent keys not in ``c`` are pushed out. One at a time gives the
        same when every key pushed out is older than every key of ``c`` already held (a
        pushed-out key is then never put again in ``c``, and the keys of ``c`` are never
        pushed out: ``len(c) <= capacity / 2``).
        """
        if not distinct and c.size > 1 and (c.size > 64 or len(set(c.tolist())) < c.size):
            c = self._last_occurrences(c)
        p = self.pos[c]
        held = p >= 0
        nnew = c.size - int(np.count_nonzero(held))
        over = self.size + nnew - self.capacity
        out = c[:0]
        if over > 0:
            out, end = self._oldest(over)
            if nnew < c.size and (out.size < over or end - 1 >= int(p[held].min())):
                return None
            self._drop(out, end)
        self._append(c)
        self.size += nnew
        return nnew, out

    def _last_occurrences(self, c: np.ndarray) -> np.ndarray:
        """Each key of ``c`` at its last occurrence, in order (``c`` itself when none repeats)."""
        s = self.scratch
        if s is None:
            _, first = np.unique(c[::-1], return_index=True)
            return c if first.size == c.size else c[np.sort(c.size - 1 - first)]
        tag = -1 - np.arange(c.size)  # (negative: never a TierChain generation)
        s[c] = 0
        np.minimum.at(s, c, tag)  # each key's least tag: its last occurrence (whatever the write order)
        last = s[c] == tag
        return c if last.all() else c[last]

    def _append(self, keys: np.ndarray) -> None:
        """Write ``keys`` (distinct) at the tail as the most recent (their older entries die)."""
        m = keys.size
        if self.tail + m > self.fifo.size:
            self._compact(m)
        t = self.tail
        self.fifo[t:t + m] = keys
        self.pos[keys] = np.arange(t, t + m)
        self.tail = t + m

    def _put_new(self, keys: np.ndarray, count_out: bool) -> tuple[int, np.ndarray | int]:
        """:meth:`put` of more distinct keys than the capacity, none of them held (the final
        demotions of a run): every held key leaves first, oldest first, then the first new keys."""
        n = keys.size
        old = self._pop(self.size)
        spill = keys[:n - self.capacity]
        keep = keys[n - self.capacity:]
        self._append(keep)
        self.size = keep.size
        if count_out:
            return n, old.size + spill.size
        return n, np.concatenate((old, spill))

    def _pop(self, k: int) -> np.ndarray:
        """Push out the ``k`` least recent keys; return them, oldest first."""
        keys, end = self._oldest(k)
        self._drop(keys, end)
        return keys

    def _oldest(self, k: int) -> tuple[np.ndarray, int]:
        """The ``k`` least recent keys (fewer when fewer are held), oldest first, and the FIFO index
        just past the last of them."""
        out = []
        h = self.head
        while k > 0 and h < self.tail:
            end = min(self.tail, h + max(2 * k, 64))
            seg = self.fifo[h:end]
            live = np.flatnonzero(self.pos[seg] == np.arange(h, end))
            if live.size >= k:
                live = live[:k]
                end = h + int(live[-1]) + 1
            out.append(seg[live])
            k -= live.size
            h = end
        keys = out[0] if len(out) == 1 else np.concatenate(out) if out else self.fifo[:0].copy()
        return keys, h

    def _drop(self, keys: np.ndarray, end: int) -> None:
        """Remove ``keys`` (:meth:`_oldest`'s, up to FIFO index ``end``)."""
        self.head = end
        self.pos[keys] = -1
        self.size -= keys.size

    def _compact(self, extra: int) -> None:
        self.fifo, self.tail = compact_fifo(self.fifo, self.pos, self.head, self.tail, extra)
        self.head = 0


class TierChain:
    """The CPU tier and optional disk tier of one engine, with their counters.

    Parameters
    ----------
    tiers : list of (name, KvTier)
        Top down (``cpu`` then ``disk``).
    bytes_per_block : int or None
        KV bytes of one block on one GPU; ``None`` counts transfers in blocks
        only (times then assume 0 bytes: latency only).
    num_keys : int
        Size of the engine's content-key space.
    """

    def __init__(self, tiers: list[tuple[str, KvTier]], bytes_per_block: int | None, num_keys: int) -> None:
        self.names = [n for n, _ in tiers]
        self.specs = [t for _, t in tiers]
        self.bpb = bytes_per_block or 0
        self.lru = [LruKeys(t.blocks(bytes_per_block), num_keys) for t in self.specs]
        k = len(tiers)
        self.hit_tokens = [0] * k       # prefix tokens found in each tier
        self.onboarded = [0] * k        # blocks loaded from each tier to the GPU
        self.offloaded = [0] * k        # blocks written into each tier
        self.dropped = 0                # blocks pushed out of the last tier
        self.bytes_onboarded = 0
        self.onboard_time_s = 0.0       # sum of load times (per request, queueing on the link included)
        self.link_free = [0.0] * k      # when each tier's read link is next idle (loads queue on it)
        self._pending: list[np.ndarray] = []  # puts not yet applied (applied in order, in bulk)
        self._npending = 0                        # keys in them
        self._key_dtype = np.int32 if num_keys < 2**31 else np.int64  # pending keys: half the memory
        self._gen = 1                             # flush generation
        self._mark = np.zeros(num_keys, np.int64)  # generation in which a key was last queued (_pend)
        for lru in self.lru:  # (scratch for their puts: the values they leave are negative)
            lru.scratch = self._mark
        self.transfers = 0              # transfers into the first tier (engine steps with evictions)
        self._last_step = None          # the engine step of the last transfer counted
        self.load_stalls = 0            # times loaded requests had to let their blocks go (engine)
        self.reads = 0                  # matches that looked past a first key no tier held or awaited
        self.sure_reads = 0             # matches and onboards answered without applying pending demotions
        # set by the engine while no key can be demoted twice (each put into the first tier is then new)
        self.fresh = False
        # False: the shortcuts of match and onboard are off (FastEngine's accelerate switch)
        self.accelerate = True
        self._args = (tiers, bytes_per_block, num_keys)
        # called before the tiers are read: hands over demotions recorded but not yet made (the GPU
        # pool's deferred evictions, FastPool.deliver_evictions)
        self.before_read: Callable[[], None] | None = None

    def demote(self, keys: np.ndarray, steps=None) -> None:
        """Blocks evicted from the tier above the first one (the GPU) enter it; overflow cascades down.

        Applied in order before the tiers are next read (:meth:`match`,
        :meth:`onboard`, :meth:`totals`), each block as if alone (:meth:`flush`):
        when they are applied changes nothing. The evictions of one engine step
        (``steps``: the step, one per key in step order, or ``(distinct steps,
        first, last)`` of keys in step order) are one transfer (one
        ``write_latency_s``) into the CPU tier, however the engine grouped its
        allocations; without ``steps`` a call is one.
        """
        if steps is None:
            self.transfers += 1
        elif type(steps) is tuple:  # (distinct steps, first, last), in step order
            n, first, last = steps
            if n:
                self.transfers += n - (first == self._last_step)
                self._last_step = last
        elif type(steps) is np.ndarray:
            if steps.size:  # in step order: distinct steps = 1 + changes
                distinct = 1 + int(np.count_nonzero(steps[1:] != steps[:-1]))
                self.transfers += distinct - int(steps[0] == self._last_step)
                self._last_step = int(steps[-1])
        elif steps != self._last_step:
            self.transfers += 1
            self._last_step = steps
        self._pend(keys)

    def _pend(self, keys: np.ndarray) -> None:
        """Queue a put of ``keys`` into the first tier (applied in order by :meth:`flush`)."""
        self._pending.append(keys.astype(self._key_dtype))  # a copy: the caller may reuse ``keys``
        self._npending += keys.size
        self._mark[keys] = self._gen

    def empty_copy(self) -> TierChain:
        """The same tiers, empty (and as fresh)."""
        chain = TierChain(*self._args)
        chain.fresh = self.fresh
        chain.accelerate = self.accelerate
        return chain

    def demoted_in_bulk(self, keys: np.ndarray, transfers: int) -> None:
        """What :meth:`demote` calls making ``transfers`` transfers of ``keys`` (in order) leave pending."""
        if keys.size:
            self._pend(keys)
        self.transfers += transfers

    def flush(self) -> None:
        """Apply the pending demotions (and refreshes, :meth:`onboard`), in order.

        Each tier puts its keys one after another (:meth:`LruKeys.put`), so the
        result does not depend on when the demotions are applied.
        """
        if self.before_read is not None:
            self.before_read()
        if not self._pending:
            return
        keys = self._pending[0] if len(self._pending) == 1 else np.concatenate(self._pending)
        self._pending = []
        self._npending = 0
        self._gen += 1
        fresh = self.fresh
        distinct = fresh or keys.size < 2 or not self._repeats(keys)
        last = len(self.lru) - 1
        for i, lru in enumerate(self.lru):
            if not keys.size:
                return
            if i == last:  # what it pushes out is dropped: only their number is needed
                new, out = lru.put(keys, count_out=True, distinct=distinct, new=fresh and not i)
                self.dropped += out
                keys = keys[:0]
            else:
                new, keys = lru.put(keys, distinct=distinct, new=fresh and not i)
                distinct = False  # a key pushed out, put again and pushed out again leaves twice
            self.offloaded[i] += new
        self.dropped += keys.size

    def _repeats(self, keys: np.ndarray) -> bool:
        """Whether a key occurs twice in ``keys`` (without a sorted copy: each occurrence writes its
        position into ``_mark``, and a later one overwrites an earlier one's)."""
        if keys.size <= 64:
            return len(set(keys.tolist())) < keys.size
        mark = self._mark
        step = 1 << 20
        for a in range(0, keys.size, step):
            mark[keys[a:a + step]] = -1 - np.arange(a, min(a + step, keys.size))
        for a in range(0, keys.size, step):
            if (mark[keys[a:a + step]] != -1 - np.arange(a, min(a + step, keys.size))).any():
                return True
        return False  # (the marks left are negative: no generation)

    def _run_after_pending(self, keys: np.ndarray) -> int | None:
        """One tier only: how many of ``keys``, from the first, it holds once the pending puts are
        applied, when that is sure without applying them, else None.

        A key queued is held then (fewer keys are queued than the tier holds). A key held now,
        not queued, with at least as many keys older than it as are queued, is too: each put
        makes at most one key older than it leave or become newer. A key neither held nor
        queued is not. Keys older than it are counted from below: the keys held, less the FIFO
        entries after it.
        """
        if not self.accelerate:
            return None
        if not keys.size:
            return 0
        lru = self.lru[0]
        npend = self._npending
        if not npend:
            pos = lru.pos[keys]
            j = int((pos >= 0).argmin())
            return j if pos[j] < 0 else keys.size
        if 2 * npend >= lru.capacity:
            return None
        pos = lru.pos[keys]
        queued = self._mark[keys] == self._gen
        sure = queued | (pos >= lru.tail - lru.size + npend)  # (that bound is >= 0: held)
        j = int(sure.argmin())
        if sure[j]:
            return keys.size
        return j if pos[j] < 0 else None  # the first key not sure: neither queued nor held, or unsure

    def match(self, keys: np.ndarray) -> list[int]:
        """Blocks of ``keys`` (a prefix continuing after the GPU hit) found in each tier, in order.

        The run stops at the first key no tier holds; each key is taken from
        the highest tier holding it. Returns one count per tier. The pending
        demotions are applied first, unless the answer is sure without (one tier).
        """
        counts = [0] * len(self.lru)
        if not keys.size:
            return counts
        k0 = keys[0]
        if self.before_read is not None:
            self.before_read()  # pending evictions are handed over first
        lrus = self.lru
        if self._mark[k0] != self._gen and (lrus[0].pos[k0] < 0 if len(lrus) == 1 else
                                            not any(lru.pos[k0] >= 0 for lru in lrus)):
            return counts  # the usual case: the first key is in no tier and not on its way to one
        self.reads += 1
        if len(self.lru) == 1:
            run = self._run_after_pending(keys)
            if run is not None:
                self.sure_reads += 1
                counts[0] = run
                return counts
        self.flush()
        if not any(lru.pos[k0] >= 0 for lru in self.lru):
            return counts
        where = np.full(keys.size, -1, np.int64)
        for i in range(len(self.lru) - 1, -1, -1):
            where[self.lru[i].contains(keys)] = i
        miss = np.flatnonzero(where < 0)
        run = where[: miss[0]] if miss.size else where
        for i in range(len(self.lru)):
            counts[i] = int((run == i).sum())
        return counts

    def onboard(self, keys: np.ndarray, counts: list[int], block_size: int, now: float) -> float:
        """Load ``keys`` (``sum(counts)`` of them) to the GPU starting at ``now``; return when they are there.  # s

        Each tier's read link carries one load at a time (loads queue behind
        each other; the CPU and disk parts of one request load in parallel).
        The loaded keys are refreshed in the tiers holding them (LRU use), after
        the pending demotions: queued behind them when sure to be held then (one
        tier), else at once.
        """
        if len(self.lru) == 1:
            if self.before_read is not None:
                self.before_read()
            refreshed = self._run_after_pending(keys) == keys.size
            if refreshed:
                self.sure_reads += 1
                self._pend(keys)
            else:
                self.flush()
        else:
            self.flush()
            refreshed = False
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
        for lru in self.lru if not refreshed else ():
            have = keys[lru.contains(keys)]
            if have.size:
                lru.put(have)
        self.onboard_time_s += ready - now
        return ready

    def offload_time_s(self) -> float:
        """Background copy time: one ``write_latency_s`` of the first tier per transfer into it,
        and every block written into a tier over that tier's ``write_gbps`` (a block pushed down
        the chain streams behind the transfer that pushed it: no latency of its own)."""
        t = self.transfers * self.specs[0].write_latency_s if self.specs else 0.0
        for spec, n in zip(self.specs, self.offloaded):
            t += n * self.bpb / (spec.write_gbps * GB)
        return t

    def totals(self) -> dict[str, Any]:
        self.flush()
        out: dict[str, Any] = {}
        for i, name in enumerate(self.names):
            out[f"{name}_tier_blocks"] = self.lru[i].capacity
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
