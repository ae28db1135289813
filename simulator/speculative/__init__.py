"""Speculative decoding: vLLM v1's draft tokens, their verification and acceptance, and the drafter's
memory and step time.

:class:`SpeculativeConfig` and :class:`SpecDecoding` (the engine's part, :mod:`~simulator.speculative.drafting`);
:class:`DraftSpec`, :func:`plan_with_draft` and :func:`draft_step_terms` (what the drafter costs at start-up
and per step, :mod:`~simulator.speculative.memory`).

May import: simulator.base, simulator.sizing, simulator.clock.
"""

from simulator.speculative.drafting import (
    MAX_SPECULATIVE_TOKENS,
    METHODS,
    SpecDecoding,
    SpeculativeConfig,
    SpeculativeError,
    spec_totals,
)
from simulator.speculative.memory import DraftSpec, draft_step_terms, plan_with_draft

__all__ = ["DraftSpec", "MAX_SPECULATIVE_TOKENS", "METHODS", "SpecDecoding", "SpeculativeConfig", "SpeculativeError", "draft_step_terms", "plan_with_draft", "spec_totals"]
