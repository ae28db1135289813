"""The roofline clock's sampler paths (``simulator.cost_model.SAMPLER_PATHS``) in words, for forms and answers."""

from __future__ import annotations

from django import forms

from simulator.cost_model import DEFAULT_SAMPLER_PATH, SAMPLER_PATHS

_WORDS = {"greedy": "greedy (temperature 0)", "temperature": "temperature only", "top_k_top_p": "top-k / top-p",
          "top_k_top_p_penalties": "top-k / top-p + repetition penalty"}


def sampling_words(path: str | None) -> str:
    """``"top_k_top_p"`` -> ``"top-k / top-p"``; an unknown or empty path unchanged."""
    return _WORDS.get(path, path or "")


#: The select's choices: every path in words, the default marked.
SAMPLING_CHOICES = [(k, sampling_words(k) + (" (default)" if k == DEFAULT_SAMPLER_PATH else ""))
                    for k in SAMPLER_PATHS]


def sampling_field(**kwargs) -> forms.ChoiceField:
    """The "Sampling" select of the replicas and sweep forms (``deployment.sampling``)."""
    return forms.ChoiceField(
        label="Sampling", choices=SAMPLING_CHOICES, initial=DEFAULT_SAMPLER_PATH,
        error_messages={"invalid_choice": f"%(value)s is not a sampler path: choose one of {', '.join(SAMPLER_PATHS)}."},
        help_text="How your requests sample: greedy (temperature 0), temperature only, top-k/top-p (vLLM's default "
                  "for models whose generation_config sets them), top-k/top-p with repetition penalty.", **kwargs)
