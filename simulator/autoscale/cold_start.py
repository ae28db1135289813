"""How long a new replica takes before it serves: container start, weights read, compile, CUDA graphs.

A replica that the autoscaler starts is billed from the moment it is asked for, and takes traffic only once
vLLM's server answers. The time in between, as vLLM's own start-up logs break it down:

===================  ===========  ==============================================================================
part                 default      source
===================  ===========  ==============================================================================
``container_s``      25 s         the time vLLM's logs do not show between a pod's start and its first answer:
                                  ~25-30 s in vllm-project/vllm#20264 (a 3.4 GiB model answering 59 s after start
                                  with 34 s logged)
``weights``          1 GiB/s      weight bytes / ``storage_gib_per_s``: 12.66 GiB in 24.8 s from a local disk
                                  (vllm#38820, 0.5 GiB/s), 13.5 GiB in 51.9 s (castorini/rank_llm#426), ~10 s
                                  for Llama-70B-FP8 from a hot page cache (vllm#19824)
``compile_s``        30 s         torch.compile: 7.5 s from vLLM's compile cache (vllm#20264), 45.8 s uncached
                                  (run-ai/runai-model-streamer#67), ~70 s for Llama-70B-FP8 at TP 8 (vllm#19824)
``graph_capture_s``  20 s         CUDA graph capture: 17 s (vllm#20264), 37 s (runai-model-streamer#67), ~60 s
                                  for Llama-70B-FP8 at TP 8 (vllm#19824)
===================  ===========  ==============================================================================

A 32B model in bf16 (about 60 GiB) at the defaults starts in 25 + 60 + 30 + 20 = 135 s, beside the ~100 s per pod
llm-d's autoscaling benchmarks report for a 32B model. Every part can be overridden (a warm compile cache, a
faster store, ``--enforce-eager`` without graphs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from simulator.base import ConfigError, unknown_field


@dataclass(frozen=True)
class ColdStart:
    """The parts of one replica's start, in seconds (weights from their size and the storage bandwidth)."""

    container_s: float = 25.0  # s
    storage_gib_per_s: float = 1.0  # GiB/s, reading the weights
    compile_s: float = 30.0  # s
    graph_capture_s: float = 20.0  # s

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            lo_open = f.name == "storage_gib_per_s"
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 \
                    or (lo_open and v == 0) or v > 1e6:
                need = "a number of GiB/s > 0" if lo_open else "a number of seconds >= 0"
                raise ConfigError(f"must be {need} (at most 1,000,000), got {v!r}", field=f"cold_start.{f.name}")

    def seconds(self, weights_gib: float) -> float:
        """Seconds from the start request to serving, for ``weights_gib`` of weights per GPU (read in parallel)."""
        return self.container_s + weights_gib / self.storage_gib_per_s + self.compile_s + self.graph_capture_s

    def breakdown(self, weights_gib: float) -> dict[str, float]:
        return {"container_s": self.container_s, "weights_s": weights_gib / self.storage_gib_per_s,
                "compile_s": self.compile_s, "graph_capture_s": self.graph_capture_s,
                "total_s": self.seconds(weights_gib)}

    def to_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Any) -> ColdStart:
        if not isinstance(data, dict):
            raise ConfigError("must be an object of seconds and GiB/s", field="cold_start")
        bad = unknown_field(cls, data)
        if bad:
            raise ConfigError(f"{bad[1]}", field=f"cold_start.{bad[0]}")
        return cls(**data)
