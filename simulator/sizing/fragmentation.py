"""Fragmentation (paged blocks vs naive pre-allocation at ``max_model_len``) and offload-tier capacity.

Pure: numpy only. Re-exported by :mod:`simulator.sizing.closed_form`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from simulator.base import GIB, SpecError


@dataclass(frozen=True)
class FragmentationResult:
    """Requests that fit in ``num_blocks`` blocks, paged vs pre-allocated at ``max_model_len``.

    Attributes
    ----------
    naive_requests : int
        ``floor(num_blocks x B / max_model_len)``: each request reserves max_model_len slots.  # requests
    paged_requests : int
        How many requests of the distribution fit when each holds ``ceil(len / B)`` blocks
        (taken in the given order).  # requests
    naive_utilization, paged_utilization : float
        Used token slots / reserved slots.
    paged_gain : float
        ``paged_requests / naive_requests``.
    mean_last_block_waste : float
        Mean unused slots in a request's last block.  # tokens
    """

    naive_requests: int
    paged_requests: int
    naive_utilization: float
    paged_utilization: float
    paged_gain: float
    mean_last_block_waste: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def paged_vs_naive(lengths: Iterable[int], num_blocks: int, block_size: int, max_model_len: int) -> FragmentationResult:
    """Compare paged allocation with naive pre-allocation (seed 001's fragmentation example).

    Parameters
    ----------
    lengths : iterable of int
        Token lengths of the requests (prompt + output), shape (n,).  # tokens
    num_blocks : int
        KV cache size.  # blocks
    block_size : int
        # tokens
    max_model_len : int
        What naive pre-allocation reserves per request.  # tokens
    """
    lens = np.minimum(np.asarray(list(lengths), dtype=np.int64), max_model_len)
    if lens.size == 0 or np.any(lens < 1):
        raise SpecError("need at least one length, each >= 1 token", field="lengths")
    blocks = -(-lens // block_size)
    capacity_tokens = num_blocks * block_size
    naive = capacity_tokens // max_model_len
    # paged: requests of the distribution repeated cyclically until the pool is full
    per_cycle = int(blocks.sum())
    full_cycles = num_blocks // per_cycle
    rem = num_blocks - full_cycles * per_cycle
    partial = int(np.searchsorted(np.cumsum(blocks), rem, side="right"))
    paged = full_cycles * lens.size + partial
    naive_util = float(lens.mean() / max_model_len)
    paged_util = float(lens.sum() / (blocks.sum() * block_size))
    waste = np.where(lens % block_size == 0, 0, block_size - lens % block_size)
    return FragmentationResult(
        naive_requests=int(naive),
        paged_requests=int(paged),
        naive_utilization=naive_util,
        paged_utilization=paged_util,
        paged_gain=float(paged / naive) if naive else float("inf"),
        mean_last_block_waste=float(waste.mean()),
    )


def tier_blocks(tier_gib: float, bytes_per_block: float) -> int:
    """Blocks a CPU or disk tier of ``tier_gib`` GiB holds.  # blocks"""
    if bytes_per_block <= 0:
        raise SpecError("must be > 0", field="bytes_per_block")
    return int(tier_gib * GIB // bytes_per_block)


__all__ = ["FragmentationResult", "paged_vs_naive", "tier_blocks"]
