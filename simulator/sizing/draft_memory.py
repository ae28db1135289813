"""The drafter's share of one GPU's memory at start-up, as :func:`simulator.sizing.closed_form.plan` takes it.

Speculative decoding (:mod:`simulator.speculative.memory`) works out the drafter's weights and KV per token;
this object applies them to a pipeline stage's KV groups: its weights leave less for the KV cache and every
block also pages the drafter's layers' KV.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simulator.base import GIB
from simulator.sizing.kv_layout import KVGroups


@dataclass(frozen=True)
class DraftMemory:
    """The drafter's share of one GPU.

    ``weights_bytes`` per GPU; ``kv_bytes_per_token`` on one GPU (its layers' KV in every block).
    """

    method: str
    num_speculative_tokens: int
    num_lookahead_tokens: int
    draft_name: str
    weights_bytes: float  # bytes
    kv_bytes_per_token: float  # bytes

    def to_dict(self, blocks_without: int, blocks_with: int) -> dict:
        return {
            "method": self.method, "num_speculative_tokens": self.num_speculative_tokens,
            "num_lookahead_tokens": self.num_lookahead_tokens, "draft": self.draft_name,
            "draft_weights_gib": self.weights_bytes / GIB,
            "draft_kv_bytes_per_token_per_gpu": self.kv_bytes_per_token,
            "num_gpu_blocks_without_draft": blocks_without, "num_gpu_blocks": blocks_with,
        }

    def apply(self, groups: KVGroups, block_size: int, w_b: float, avail_b: float,
              given_kv: bool) -> tuple[KVGroups, float, float, int]:
        """The stage's KV groups, weights, available KV memory and blocks once the drafter is loaded:
        its weights leave less for the KV cache (unless the available KV memory was given, measured
        with it), and every block also pages its layers' KV.  # bytes, blocks"""
        groups = replace(groups, bytes_per_block=groups.bytes_per_block + self.kv_bytes_per_token * block_size)
        w_b += self.weights_bytes
        if not given_kv:
            avail_b -= self.weights_bytes
        blocks = max(0, int(avail_b // groups.bytes_per_block)) if groups.bytes_per_block > 0 else 0
        return groups, w_b, avail_b, blocks
