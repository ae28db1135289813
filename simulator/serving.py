"""Time a served request pays outside the engine steps, added to its TTFT and E2E.

A request reaching vLLM's OpenAI server is parsed and tokenized before the
engine sees it, and each token the engine makes is detokenized and streamed
back. The step clock does not see that time; the coefficients of
:class:`simulator.clock_terms.StepCostTerms` carry it and :func:`apply_serving`
adds it to the per-request times of a result::

    first_token += serve_request_s + serve_prompt_token_s x prompt_tokens
    finish      += the same + serve_output_token_s x (output_tokens - 1)

(``docs/cost-model.md``, "Time outside the engine step"). A pure shift per
request: the engine's schedule does not change.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np


def serving_offsets(terms: Any, prompt_len: np.ndarray, output_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seconds added to each request's first-token and finish times, shapes ``(n,)``.  # s"""
    pre = (getattr(terms, "serve_request_s", 0.0)
           + getattr(terms, "serve_prompt_token_s", 0.0) * np.asarray(prompt_len, np.float64))
    post = getattr(terms, "serve_output_token_s", 0.0) * np.maximum(np.asarray(output_tokens, np.float64) - 1, 0)
    return pre, pre + post


def has_serving(terms: Any) -> bool:
    return bool(terms is not None and (getattr(terms, "serve_request_s", 0.0)
                                       or getattr(terms, "serve_prompt_token_s", 0.0)
                                       or getattr(terms, "serve_output_token_s", 0.0)))


def apply_serving(result, terms: Any):
    """``result`` (a :class:`simulator.results.SimResult`) with the serving time of ``terms`` added.

    Returns ``result`` itself when ``terms`` has none (or the workload's
    arrivals are steps, which have no seconds to add to).
    """
    if not has_serving(terms) or result.arrival_unit != "s":
        return result
    req = dict(result.requests)
    first_add, finish_add = serving_offsets(terms, req["prompt_len"], req["num_output_tokens"])
    req["first_token_time_s"] = np.asarray(req["first_token_time_s"], np.float64) + first_add
    req["finish_time_s"] = np.asarray(req["finish_time_s"], np.float64) + finish_add
    return replace(result, requests=req)
