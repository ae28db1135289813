"""Time a served request pays outside the engine steps, added to its TTFT and E2E.

A request reaching vLLM's OpenAI server is parsed and tokenized before the
engine sees it, and each token the engine makes is detokenized and streamed
back. The step clock does not see that time; the coefficients of
:class:`simulator.clock.terms.StepCostTerms` carry it and :func:`apply_serving`
adds it to the per-request times of a result::

    lag         = serve_async_lag_steps x (the request's own mean inter-token time)   (async scheduling only)
    first_token += serve_request_s + serve_prompt_token_s x prompt_tokens + lag
    finish      += the same + serve_output_token_s x (output_tokens - 1)

The lag is where the simulator's step boundary and vLLM's asynchronous engine
loop part: the simulator schedules step ``k+1`` when step ``k`` ends, taking
every request that arrived during step ``k``; vLLM 0.15's engine core
(``step_with_batch_queue``) schedules step ``k+1`` as soon as step ``k`` is
launched, so a request arriving while step ``k`` runs waits for step ``k+1``
to finish and joins step ``k+2``. Its first token and its last move by one
step of the batch it runs in; the request's own mean inter-token time is that
step's length (``(finish - first_token) / (output_tokens - 1)``; a request of
one output token has none and gets no lag).

(``docs/cost-model.md``, "Time outside the engine step"). A pure shift per
request: the engine's schedule does not change.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np


def serving_offsets(terms: Any, prompt_len: np.ndarray, output_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seconds added to each request's first-token and finish times by the serving coefficients, shapes ``(n,)``
    (the async-scheduling lag apart: :func:`async_lag`).  # s"""
    pre = (getattr(terms, "serve_request_s", 0.0)
           + getattr(terms, "serve_prompt_token_s", 0.0) * np.asarray(prompt_len, np.float64))
    post = getattr(terms, "serve_output_token_s", 0.0) * np.maximum(np.asarray(output_tokens, np.float64) - 1, 0)
    return pre, pre + post


def async_lag(steps: float, first_token: np.ndarray, finish: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
    """Seconds each request joins later under async scheduling: ``steps`` x its own mean inter-token time,
    shape ``(n,)`` (0 for a request of one output token; NaN stays NaN for an unfinished one).  # s"""
    out = np.asarray(output_tokens, np.float64)
    gaps = np.maximum(out - 1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        itl = np.where(gaps > 0, (np.asarray(finish, np.float64) - np.asarray(first_token, np.float64))
                       / np.where(gaps > 0, gaps, 1.0), 0.0)
    return steps * itl


def has_serving(terms: Any, async_scheduling: bool = False) -> bool:
    """Whether ``terms`` adds any time outside the steps (the lag counts only under async scheduling)."""
    return bool(terms is not None and (getattr(terms, "serve_request_s", 0.0)
                                       or getattr(terms, "serve_prompt_token_s", 0.0)
                                       or getattr(terms, "serve_output_token_s", 0.0)
                                       or (async_scheduling and getattr(terms, "serve_async_lag_steps", 0.0))))


def apply_serving(result, terms: Any, async_scheduling: bool = False):
    """``result`` (a :class:`simulator.engine.results.SimResult`) with the serving time of ``terms`` added.

    ``async_scheduling``: the run used vLLM's asynchronous scheduling (then
    ``serve_async_lag_steps`` applies). Returns ``result`` itself when ``terms``
    has none (or the workload's arrivals are steps, which have no seconds to add to).
    """
    if not has_serving(terms, async_scheduling) or result.arrival_unit != "s":
        return result
    req = dict(result.requests)
    first = np.asarray(req["first_token_time_s"], np.float64)
    finish = np.asarray(req["finish_time_s"], np.float64)
    first_add, finish_add = serving_offsets(terms, req["prompt_len"], req["num_output_tokens"])
    lag_steps = getattr(terms, "serve_async_lag_steps", 0.0) if async_scheduling else 0.0
    if lag_steps:
        lag = async_lag(lag_steps, first, finish, req["num_output_tokens"])
        first_add, finish_add = first_add + lag, finish_add + lag
    req["first_token_time_s"] = first + first_add
    req["finish_time_s"] = finish + finish_add
    return replace(result, requests=req)
