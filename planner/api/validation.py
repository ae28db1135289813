"""Input rules shared by the API, the sweep definitions and the pages.

``block_size``: vLLM accepts only a fixed set of KV block sizes. Its cache
configuration declares ``BlockSize = Literal[1, 8, 16, 32, 64, 128, 256]`` and
types ``CacheConfig.block_size`` with it (``vllm/config/cache.py``, vLLM 0.11;
0.8-0.10 had ``Literal[1, 8, 16, 32, 64, 128]``, and ``--block-size`` on the
command line takes the same choices). A block size vLLM would refuse at start-up
is refused here too, so that no plan or sweep describes an engine that cannot run.
"""

from __future__ import annotations

from typing import Any

#: KV block sizes (tokens) vLLM's CacheConfig accepts (vllm/config/cache.py, ``BlockSize``).
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)


def block_size_problem(value: Any) -> str | None:
    """A message when ``value`` is not a block size vLLM accepts, else None (booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int) or value not in VLLM_BLOCK_SIZES:
        sizes = ", ".join(str(b) for b in VLLM_BLOCK_SIZES)
        return f"must be one of vLLM's block sizes ({sizes} tokens; vLLM's CacheConfig refuses others), got {value!r}"
    return None
