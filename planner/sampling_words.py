"""The sampler path a plan times, where it came from, and both in words, for forms and every answer.

A request that sets no sampling parameters takes its model's own path (vLLM applies the model's
``generation_config.json``: ``ModelSpec.sampling``); a definition may choose one instead
(``deployment.sampling``, ``space.sampling``). :func:`timed_path` decides which path the roofline clock
times and why (``source``: ``chosen``, ``model`` or ``default``), and :func:`sampling_sentence` says it:
``"top-k / top-p sampling (<model name>'s generation_config.json)"``.
"""

from __future__ import annotations

from django import forms

from simulator.base import SAMPLER_FIELDS, SAMPLER_PATHS
from simulator.base import path_words as sampling_words
from simulator.base import timed_path as model_or_chosen_path

#: Each path as the noun of a sentence.
_NOUNS = {"greedy": "greedy decoding", "temperature": "temperature-only sampling",
          "top_k_top_p": "top-k / top-p sampling",
          "top_k_top_p_penalties": "top-k / top-p sampling with a repetition penalty"}
#: Where the timed path came from.
SOURCES = ("chosen", "model", "default", "calibration")
#: The select's first choice: no path chosen, each model's own.
MODEL_DEFAULTS_LABEL = "The model's defaults"


def timed_path(chosen: str | None, model_sampling: str | None, fitted=()) -> tuple[str, str]:
    """``(path, source)``: the path the roofline clock times and where it came from.

    A calibration whose fit moved a sampler term (``fitted``: the names it moved) times its fitted terms
    (``"calibration"``; the path is the one they started from); else :func:`simulator.base.sampling.timed_path`
    (``"chosen"``, ``"model"`` or ``"default"``).
    """
    path, source = model_or_chosen_path(chosen, model_sampling)
    return (path, "calibration") if set(SAMPLER_FIELDS) & set(fitted) else (path, source)


def sampling_sentence(path: str | None, source: str | None, model_name: str | None = None) -> str:
    """The timed path and why, in words: ``"temperature-only sampling (chosen)"``; ``""`` without a path.

    A ``source`` that is not known (reports stored before it was kept) gives the path alone."""
    if not path:
        return ""
    noun = _NOUNS.get(path, path)
    why = {"chosen": "chosen",
           "model": f"{model_name or 'the model'}'s generation_config.json",
           "default": "the planner's default: this model's sampling defaults are not known",
           "calibration": "its time fitted by the calibration"}.get(source or "")
    return f"{noun} ({why})" if why else noun


def sampling_answer(snapshot: dict | None) -> dict:
    """``sampling``, ``sampling_source`` and ``sampling_words`` of an answer, from its stored snapshot (a sweep's,
    a simulation's or a search's). All None / ``""`` when no roofline clock timed a sampler."""
    snapshot = snapshot or {}
    path, source = snapshot.get("sampling"), snapshot.get("sampling_source")
    model = snapshot.get("model") or {}
    name = (model.get("spec") or {}).get("name") if isinstance(model, dict) else None
    return {"sampling": path, "sampling_source": source if path else None,
            "sampling_words": sampling_sentence(path, source, name)}


#: The select's choices: the model's own first (the default), then every path in words.
SAMPLING_CHOICES = [("", MODEL_DEFAULTS_LABEL), *((k, sampling_words(k)) for k in SAMPLER_PATHS)]


def sampling_field(**kwargs) -> forms.ChoiceField:
    """The "Sampling" select of the replicas, sweep and search forms (``deployment.sampling``,
    ``space.sampling``); empty = each model's own path."""
    return forms.ChoiceField(
        label="Sampling", choices=SAMPLING_CHOICES, initial="", required=False,
        error_messages={"invalid_choice": f"%(value)s is not a sampler path: choose one of {', '.join(SAMPLER_PATHS)}."},
        help_text="How your requests sample. By default each model's own (what vLLM applies from its "
                  "generation_config.json; top-k/top-p when the planner does not know it); or choose greedy "
                  "(temperature 0), temperature only, top-k/top-p, top-k/top-p with repetition penalty.", **kwargs)
