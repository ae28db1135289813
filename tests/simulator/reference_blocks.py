"""Paged KV block pool with vLLM v1's prefix cache and free-queue order.

Models ``vllm/v1/core/block_pool.py`` and the full-attention manager of
vLLM 0.33.0 (see ``docs/simulator.md``):

* block 0 is the permanent null block, so ``usable = num_gpu_blocks - 1``;
* the free queue starts in block-id order; allocation pops from its head and
  a popped block that still carries a hash is evicted from the cache then;
* freeing walks a request's blocks in reverse: blocks reaching ref count 0
  with a hash are appended to the tail (LRU), unhashed ones go to the head;
* a hit on a free cached block (``touch``) takes it out of the free queue;
* several blocks may carry the same hash; lookups use the oldest entry.

Block content is identified by an integer *key* (see
:meth:`tests.simulator.reference_core.EngineSim.key`) standing for vLLM's chained block hash.
"""

from __future__ import annotations

from collections import OrderedDict


class BlockPool:
    """Blocks, ref counts, the free queue and the hash table of one engine.

    Parameters
    ----------
    num_gpu_blocks : int
        vLLM's ``num_gpu_blocks`` (including the null block).
    caching : bool
        Prefix caching on; when off no block ever carries a hash.
    """

    __slots__ = (
        "usable", "caching", "free", "ref", "hash_of", "table",
        "born", "last_access", "now", "evictions", "lifetime_sum",
        "idle_sum", "reuses", "on_evict",
    )

    def __init__(self, num_gpu_blocks: int, caching: bool) -> None:
        self.usable = num_gpu_blocks - 1  # blocks
        self.caching = caching
        # Free queue: insertion-ordered dict block_id -> None (head first).
        self.free: OrderedDict[int, None] = OrderedDict.fromkeys(range(1, num_gpu_blocks))
        self.ref: dict[int, int] = {}
        self.hash_of: dict[int, int] = {}          # block id -> key
        self.table: dict[int, dict[int, None]] = {}  # key -> {block id: None}
        # Residency metrics (vLLM's KVCacheMetricsCollector, unsampled, in steps).
        self.born: dict[int, int] = {}
        self.last_access: dict[int, int] = {}
        self.now = 0
        self.evictions = 0       # cached hashes dropped on reallocation
        self.lifetime_sum = 0    # steps, over reallocated blocks
        self.idle_sum = 0        # steps
        self.reuses = 0          # reallocated blocks measured
        self.on_evict = None     # called with (key, step) of each evicted block (a KV tier)

    # ------------------------------------------------------------------ queries
    def num_free(self) -> int:
        """Blocks with ref count 0 (cached-but-free blocks count as free)."""
        return len(self.free)

    def lookup(self, key: int) -> int | None:
        """Oldest block carrying ``key``, or None (a cache miss)."""
        blocks = self.table.get(key)
        if not blocks:
            return None
        return next(iter(blocks))

    def prefix_hits(self, keys) -> list[int]:
        """The blocks of ``keys``' leading run of hits: a prefix lookup stops at its first miss."""
        hits = []
        for k in keys:
            b = self.lookup(int(k))
            if b is None:
                break
            hits.append(b)
        return hits

    # ------------------------------------------------------------------ updates
    def touch(self, blocks: list[int]) -> None:
        """A prefix hit adopts ``blocks``: ref + 1, leaving the free queue."""
        for b in blocks:
            if self.ref.get(b, 0) == 0:
                del self.free[b]
                self.ref[b] = 1
            else:
                self.ref[b] += 1
            self.last_access[b] = self.now

    def allocate(self, n: int) -> list[int]:
        """Pop ``n`` blocks from the head of the free queue (evicting hashes)."""
        out = []
        free = self.free
        for _ in range(n):
            b, _ = free.popitem(last=False)
            if b in self.born:
                self.reuses += 1
                self.lifetime_sum += self.now - self.born[b]
                self.idle_sum += self.now - self.last_access[b]
            if b in self.hash_of:
                self._evict(b, self.now)
            self.ref[b] = 1
            self.born[b] = self.now
            self.last_access[b] = self.now
            out.append(b)
        return out

    def _evict(self, b: int, step) -> None:
        """Drop block ``b``'s hash from the cache (to ``on_evict``, a KV tier, at ``step``)."""
        key = self.hash_of.pop(b)
        entry = self.table[key]
        del entry[b]
        if not entry:
            del self.table[key]
        self.evictions += 1
        if self.on_evict is not None:
            self.on_evict(key, step)

    def cache(self, block: int, key: int) -> None:
        """Publish a full block under ``key`` (at allocation, as vLLM does)."""
        old = self.hash_of.get(block)
        if old is not None:  # pragma: no cover - cannot happen for full attention
            entry = self.table[old]
            del entry[block]
            if not entry:
                del self.table[old]
        self.hash_of[block] = key
        self.table.setdefault(key, {})[block] = None

    def offload(self, blocks: list[int], step) -> None:
        """Demote free cached ``blocks`` now (``kv_offload_threshold``): their hashes are evicted (to
        ``on_evict``) and they become plain free blocks at the head of the free queue, in the order given."""
        for b in blocks:
            self._evict(b, step)
        for b in reversed(blocks):
            self.free.move_to_end(b, last=False)

    def release(self, blocks: list[int]) -> None:
        """Free a request's blocks (given in allocation order)."""
        head = []
        ref = self.ref
        free = self.free
        for b in reversed(blocks):
            r = ref[b] - 1
            ref[b] = r
            if r == 0:
                if b in self.hash_of:
                    free[b] = None  # tail, in reverse order of the request's blocks
                else:
                    head.append(b)
        # prepend_n(head): the first of ``head`` ends up at the very front.
        for b in reversed(head):
            free[b] = None
            free.move_to_end(b, last=False)
