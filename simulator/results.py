"""Result objects of :func:`simulator.engine.simulate`, named as the oracle names them.

A :class:`SimResult` holds one configuration's outcome:

* ``totals``: the oracle's totals (``finished``, ``preemptions``,
  ``prefix_cache_hits`` ...) plus ``dropped_unservable``, ``unfinished``,
  ``recomputed_tokens``, ``prefix_cache_evictions``, block residency
  (``mean_block_lifetime_steps``, ``mean_block_idle_steps``: vLLM's KV cache
  residency metrics, measured in engine steps when a block is reused),
  ``mean_kv_usage`` and, for arrivals in seconds, ``duration_s``;
* ``requests``: per-request columns (one entry per request, submission
  order) with the oracle's names; ``-1`` (or NaN for times) where an event
  did not happen;
* ``steps``: per schedule call that scheduled tokens or preempted, columns
  ``step, time_s, num_running, num_waiting, num_scheduled_tokens,
  kv_blocks_used, kv_usage, num_preempted``; or None when not recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: Per-request columns, in output order.
REQUEST_FIELDS = (
    "id", "prompt_len", "max_tokens", "arrival", "first_scheduled_step",
    "first_token_step", "finish_step", "num_preemptions", "prefix_hit_tokens",
    "num_output_tokens", "first_token_time_s", "finish_time_s",
)


@dataclass(frozen=True, eq=False)
class SimResult:
    """One configuration's simulated outcome.

    Parameters
    ----------
    totals : dict of str to number
    requests : dict of str to ndarray, each shape (n,)
        ``id`` is a tuple of str; arrival is ``arrival_step`` (steps) or
        ``arrival_time`` (seconds) after the workload's unit.
    steps : dict of str to ndarray, each shape (num_points,), or None
    arrival_unit : {"step", "s"}
    """

    totals: dict[str, Any]
    requests: dict[str, Any]
    steps: dict[str, np.ndarray] | None
    arrival_unit: str = "step"

    def request_records(self) -> list[dict[str, Any]]:
        """Per-request dicts in the oracle's names (``None`` where no event)."""
        req = self.requests
        time_mode = self.arrival_unit == "s"
        arr_name = "arrival_time" if time_mode else "arrival_step"
        cols = {k: v.tolist() if isinstance(v, np.ndarray) else list(v) for k, v in req.items()}
        out = []
        for i in range(len(cols["id"])):
            rec: dict[str, Any] = {"id": cols["id"][i], "prompt_len": cols["prompt_len"][i],
                                   "max_tokens": cols["max_tokens"][i]}
            a = cols["arrival"][i]
            rec[arr_name] = a if time_mode else int(a)
            for k in ("first_scheduled_step", "first_token_step", "finish_step"):
                v = cols[k][i]
                rec[k] = None if v < 0 else v
            rec["num_preemptions"] = cols["num_preemptions"][i]
            v = cols["prefix_hit_tokens"][i]
            rec["prefix_hit_tokens"] = None if v < 0 else v
            rec["num_output_tokens"] = cols["num_output_tokens"][i]
            rec["status"] = cols["status"][i]
            if time_mode:
                for k in ("first_token_time_s", "finish_time_s"):
                    v = cols[k][i]
                    rec[k] = None if v != v else v
            out.append(rec)
        return out

    def latency(self, slo_ttft_s: float | None = None, slo_itl_s: float | None = None):
        """TTFT / TPOT / ITL / E2E percentiles, throughput and goodput (:func:`simulator.metrics.summarize_latency`).

        Only for workloads with arrivals in seconds (``None`` otherwise: a
        step-unit workload has no arrival times to measure from). ITL
        percentiles weight each request's mean gap by its gaps (the engine
        does not keep every gap); the mean is exact.
        """
        if self.arrival_unit != "s":
            return None
        from simulator.metrics import summarize_latency

        req = self.requests
        return summarize_latency(
            arrival_time=req["arrival"], first_token_time=req["first_token_time_s"],
            finish_time=req["finish_time_s"], num_output_tokens=req["num_output_tokens"],
            num_prompt_tokens=req["prompt_len"], slo_ttft_s=slo_ttft_s, slo_itl_s=slo_itl_s)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready ``{"totals", "requests"[, "steps"][, "latency"]}`` (latency for arrivals in seconds)."""
        d: dict[str, Any] = {"totals": dict(self.totals), "requests": self.request_records()}
        lat = self.latency()
        if lat is not None:
            d["latency"] = lat.to_dict()
        if self.steps is not None:
            d["steps"] = {k: v.tolist() for k, v in self.steps.items()}
        return d
