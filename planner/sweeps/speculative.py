"""Speculative decoding in sweeps: the ``num_speculative_tokens`` and ``acceptance_rate`` axes.

A point's ``engine.speculative`` is the base definition's with the axis values put in (an
``acceptance_rate`` value replaces whatever acceptance model the base gives). With a model and a
GPU, a point that speculates with a head (EAGLE, EAGLE-3, MTP) is sized with the head's weights and
KV taken out of the budget (:func:`simulator.speculative.memory.plan_with_draft`) and its drafter
passes timed by the head's roofline, unless the definition gives ``num_gpu_blocks`` or
``speculative.draft_cost_model`` itself. A ``draft_model`` drafter in a sweep needs both given
(the sweep has no second model to size).
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.base import DeploymentSpec, GpuSpec, ModelSpec, SpecError
from simulator.speculative import MAX_SPECULATIVE_TOKENS, DraftSpec, draft_step_terms, plan_with_draft

#: ``() -> (model, gpu, deployment)`` specs of a point that has all three, else None.
Specs = Callable[[], tuple[ModelSpec, GpuSpec, DeploymentSpec]] | None

SPEC_AXES = ("num_speculative_tokens", "acceptance_rate")
_ACCEPTANCE_KEYS = ("acceptance_rate", "position_acceptance_rates", "acceptance_length_probs")


def axis_problem(param: str, values: list) -> str | None:
    """What is wrong with a speculative axis' values (None: nothing, or not a speculative axis)."""
    if param == "num_speculative_tokens" and not all(0 <= v <= MAX_SPECULATIVE_TOKENS for v in values):
        return f"num_speculative_tokens values must be whole numbers from 0 to {MAX_SPECULATIVE_TOKENS}"
    if param == "acceptance_rate" and not all(0 <= v <= 1 for v in values):
        return "acceptance_rate values must be fractions in [0, 1]"
    return None


def axis_needs(param: str, engine_raw: dict) -> str | None:
    """What a speculative axis needs from the base engine (None: it has it)."""
    base = engine_raw.get("speculative")
    if param == "acceptance_rate" and not (isinstance(base, dict) and base.get("num_speculative_tokens")):
        return ("an acceptance_rate axis needs engine.speculative with num_speculative_tokens > 0 "
                '(e.g. {"method": "eagle", "num_speculative_tokens": 3})')
    if param == "num_speculative_tokens" and not (isinstance(base, dict) and any(k in base for k in _ACCEPTANCE_KEYS)):
        return ("a num_speculative_tokens axis needs engine.speculative with an acceptance model "
                '(e.g. {"method": "eagle", "acceptance_rate": 0.7})')
    return None


def point_speculative(snapshot: dict, params: dict, engine: dict, specs: Specs) -> str | None:
    """Put the point's speculative settings into ``engine`` (in place); a problem's message, or None."""
    base = snapshot["engine"].get("speculative")
    if base is None and not any(p in params for p in SPEC_AXES):
        return None
    sp = dict(base or {})
    if "acceptance_rate" in params:
        for key in _ACCEPTANCE_KEYS:
            sp.pop(key, None)
        sp["acceptance_rate"] = params["acceptance_rate"]
    if "num_speculative_tokens" in params:
        sp["num_speculative_tokens"] = params["num_speculative_tokens"]
    engine["speculative"] = sp
    method, k = sp.get("method", "eagle"), sp.get("num_speculative_tokens", 0)
    if not (specs is not None and k and method != "ngram"):
        return None
    explicit = set(snapshot.get("engine_explicit", []))
    if method == "draft_model":
        if "num_gpu_blocks" not in explicit and "num_gpu_blocks" not in params:
            return "a draft_model drafter in a sweep needs engine.num_gpu_blocks (the sweep cannot size it)"
        return None
    return _with_head(specs, DraftSpec(method, k), engine, sp,
                      sized="num_gpu_blocks" not in explicit and "num_gpu_blocks" not in params,
                      timed=engine.get("cost_model") is not None and "cost_model" not in explicit)


def _with_head(specs: Specs, draft: DraftSpec, engine: dict, sp: dict, *, sized: bool, timed: bool) -> str | None:
    """The head's memory (``sized``) and its roofline passes (``timed``, unless given) into ``engine``."""
    try:
        model, gpu, dep = specs()
        if sized:
            res = plan_with_draft(model, gpu, dep, draft)
            if not res.fits or res.num_gpu_blocks < 2:
                return f"with the {draft.method} head this deployment does not start: {res.reason}"
            engine["num_gpu_blocks"] = res.num_gpu_blocks
            engine["kv_bytes_per_block"] = int(res.bytes_per_block_per_gpu)
        if timed and sp.get("draft_cost_model") is None:
            terms = draft_step_terms(model, draft, gpu, dep.tensor_parallel_size)
            sp["draft_cost_model"] = {"kind": "terms", **terms.to_dict()}
    except (SpecError, ValueError, TypeError) as exc:
        return f"speculative: {exc}"
    return None


def spec_metrics(totals: dict) -> dict:
    """Speculative decoding figures of a point (empty without)."""
    if "spec_acceptance_rate" not in totals:
        return {}
    return {k: totals[k] for k in ("spec_num_speculative_tokens", "spec_acceptance_rate",
                                   "spec_mean_acceptance_length", "output_tokens_per_step")}
