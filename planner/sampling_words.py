"""The roofline clock's sampler paths (``simulator.cost_model.SAMPLER_PATHS``) in words, for forms and answers."""

from __future__ import annotations

from simulator.cost_model import DEFAULT_SAMPLER_PATH, SAMPLER_PATHS

_WORDS = {"greedy": "greedy (temperature 0)", "temperature": "temperature only", "top_k_top_p": "top-k / top-p",
          "top_k_top_p_penalties": "top-k / top-p + repetition penalty"}


def sampling_words(path: str | None) -> str:
    """``"top_k_top_p"`` -> ``"top-k / top-p"``; an unknown or empty path unchanged."""
    return _WORDS.get(path, path or "")


#: The select's choices: every path in words, the default marked.
SAMPLING_CHOICES = [(k, sampling_words(k) + (" (default)" if k == DEFAULT_SAMPLER_PATH else ""))
                    for k in SAMPLER_PATHS]
