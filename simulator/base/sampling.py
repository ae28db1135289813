"""The sampler: its paths, their measured GPU time, and the path a model's requests take by default.

vLLM samples each request's next token after the forward pass, on the GPU, by one of a few paths whose
cost differs by an order of magnitude (a full sort of every request's logits for top-k / top-p, an
argmax for greedy). Which path a request takes follows its sampling parameters, and a request that sets
none gets the model's own: vLLM's ``--generation-config auto`` (the default) applies the ``temperature``,
``top_k``, ``top_p``, ``min_p`` and ``repetition_penalty`` of the model's ``generation_config.json``.

* :data:`SAMPLER_PATHS` - each path's GPU time, fitted to times measured on one H100.
* :func:`sampler_path` - the path a set of sampling parameters takes; :func:`generation_config_path` - the path a
  model's ``generation_config.json`` gives its requests.
* :func:`generation_defaults` - the sampling fields of a known model's ``generation_config.json``
  (shipped in ``simulator/data/generation_configs.json``, each with its source), by Hugging Face id or by
  the catalog name of the same checkpoint.

Nothing here imports Django.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from simulator.base.errors import FieldError

#: The sampler's GPU time per path, ``(sampling_step_s, sampling_vocab_s, sampling_request_vocab_s)``:
#: least squares over 8-64 requests and 32K-202K vocabularies of the times measured on one H100
#: (``tests/data/latency/h100_sampler_offload_times.json``; ``docs/cost-model.md``).
SAMPLER_PATHS = {
    "greedy": (0.0178e-3, 0.0, 1.6e-12),  # temperature 0: an argmax
    "temperature": (0.0377e-3, 0.246e-9, 1.51e-11),  # softmax and an exponential race, no top-k / top-p
    "top_k_top_p": (0.1145e-3, 2.068e-9, 1.378e-10),  # + a full sort of each request's logits
    "top_k_top_p_penalties": (0.1344e-3, 1.980e-9, 1.697e-10),  # + repetition penalty over prompt and output
}

#: The :class:`~simulator.clock.cost_model.RooflineCoefficients` fields a path sets, in the order of its tuple above.
SAMPLER_FIELDS = ("sampling_step_s", "sampling_vocab_s", "sampling_request_vocab_s")

#: Each path in a few words, for forms, pages and answers.
PATH_WORDS = {"greedy": "greedy (temperature 0)", "temperature": "temperature only", "top_k_top_p": "top-k / top-p",
              "top_k_top_p_penalties": "top-k / top-p + repetition penalty"}

#: The path of a model whose sampling defaults are not known: top-k / top-p, what most instruct models'
#: ``generation_config.json`` asks for (and the dearer of the two common paths, so a plan errs slow).
DEFAULT_SAMPLER_PATH = "top_k_top_p"

#: The ``generation_config.json`` keys vLLM 0.15 applies to requests that set no sampling parameters.
SAMPLING_KEYS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty")

#: transformers' ``GenerationConfig()`` defaults of those keys: vLLM reads a generation_config.json through
#: ``GenerationConfig.to_diff_dict()``, which drops a value equal to its default (a file's ``"top_k": 50`` asks for
#: nothing).
_TRANSFORMERS_DEFAULTS = {"temperature": 1.0, "top_k": 50, "top_p": 1.0, "repetition_penalty": 1.0}

#: vLLM's ``_SAMPLING_EPS``: a temperature below it is greedy.
_EPS = 1e-5

GENERATION_CONFIGS = Path(__file__).resolve().parent.parent / "data" / "generation_configs.json"


def sampler_path(fields: dict) -> str:
    """The :data:`SAMPLER_PATHS` key a request with these sampling parameters takes in vLLM 0.15.

    ``fields`` holds any of :data:`SAMPLING_KEYS` (absent = vLLM's default: temperature 1, no top-k,
    top-p 1, no min-p, no penalty). Temperature 0 is an argmax whatever else is set; a top-k or a top-p
    below 1 sorts each request's logits; a repetition penalty with them adds the penalty pass. A penalty
    or a min-p without top-k / top-p is timed as plain ``temperature`` sampling (no sort: the costly part).
    """
    values = {key: _number(fields, key) for key in SAMPLING_KEYS}
    temperature = 1.0 if values["temperature"] is None else values["temperature"]
    if temperature < _EPS:
        return "greedy"
    top_k, top_p, penalty = values["top_k"], values["top_p"], values["repetition_penalty"]
    sorts = (top_k is not None and top_k > 0) or (top_p is not None and top_p < 1.0)
    if not sorts:
        return "temperature"
    return "top_k_top_p_penalties" if penalty is not None and abs(penalty - 1.0) > _EPS else "top_k_top_p"


def generation_config_path(generation_config: dict) -> str:
    """The path vLLM 0.15 gives requests that set no sampling parameters, from the model's generation_config.json:
    :func:`sampler_path` of the fields it applies (those of :data:`SAMPLING_KEYS` that differ from transformers'
    defaults)."""
    applied = {key: value for key, value in generation_config.items()
               if key in SAMPLING_KEYS and not (key in _TRANSFORMERS_DEFAULTS and value == _TRANSFORMERS_DEFAULTS[key]
                                                and not isinstance(value, bool))}
    return sampler_path(applied)


def timed_path(chosen: str | None, model_sampling: str | None) -> tuple[str, str]:
    """``(path, source)``: the path a clock times and why. A chosen path wins (``"chosen"``); without one the
    model's own (``"model"``: its ``generation_config.json``); when that is not known, :data:`DEFAULT_SAMPLER_PATH`
    (``"default"``)."""
    if chosen:
        return chosen, "chosen"
    if model_sampling:
        return model_sampling, "model"
    return DEFAULT_SAMPLER_PATH, "default"


def path_words(path: str | None) -> str:
    """``"top_k_top_p"`` -> ``"top-k / top-p"``; an unknown or empty path unchanged."""
    return PATH_WORDS.get(path, path or "")


def _number(fields: dict, key: str) -> float | None:
    """``fields[key]`` as a float (None when absent or null); a ValueError naming the key otherwise."""
    value = fields.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise FieldError(f"must be a number, got {value!r}", field=key)
    if value < 0 and key != "top_k":  # top_k -1 (like 0) means no top-k
        raise FieldError(f"must be 0 or more, got {value!r}", field=key)
    return float(value)


@cache
def _known() -> dict[str, dict]:
    """Hugging Face id and catalog name -> the entry of ``generation_configs.json`` (with its ``hf_id``)."""
    data = json.loads(GENERATION_CONFIGS.read_text())
    out: dict[str, dict] = {}
    for hf_id, entry in data["models"].items():
        entry = {**entry, "hf_id": hf_id}
        for key in (hf_id, *entry.get("names", ())):
            out[key.casefold()] = entry
    return out


def generation_defaults(name: str | None) -> dict | None:
    """The entry of a known model (Hugging Face id or catalog name, any case): ``fields`` (the sampling
    keys its ``generation_config.json`` sets; ``{}`` when it sets none), ``source`` and ``hf_id``. None
    when the model is not known."""
    if not name:
        return None
    return _known().get(str(name).strip().casefold())


def model_sampler_path(name: str | None) -> str | None:
    """The sampler path a known model's requests take when they set no sampling parameters; None if unknown."""
    entry = generation_defaults(name)
    return None if entry is None else generation_config_path(entry["fields"])


__all__ = ["SAMPLER_PATHS", "SAMPLER_FIELDS", "PATH_WORDS", "path_words", "timed_path", "DEFAULT_SAMPLER_PATH", "SAMPLING_KEYS", "sampler_path",
           "generation_config_path", "generation_defaults",
           "model_sampler_path"]
