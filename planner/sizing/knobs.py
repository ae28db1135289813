"""One table of the sizing knobs: name, kind, bounds or values, what a blank means, label and help.

The sizing form (:mod:`planner.sizing.forms`) and ``POST /api/plan/``'s input serializer
(:mod:`planner.api.sizing`) both build every deployment field from it (:func:`planner.sizing.forms.knob_field`,
:func:`planner.api.sizing.knob_serializer_field`), so a bound, a list of values, a default or a rule's words are
written once; a deployment field's top is its simulator spec's (:data:`simulator.base.specs.DEPLOYMENT_LIMITS`,
through ``LIMITS``), and the value lists and rules are the simulator's (:data:`simulator.base.specs.WEIGHT_DTYPES`,
``KV_CACHE_DTYPES``, :func:`~simulator.base.specs.block_size_problem`,
:func:`simulator.sizing.quantization.method_problem`). Each door adds only what is its own: the form a widget and
"Blank = …", the API "Default: …" and its strict number types.

Where the two doors used to differ, the stricter and clearer behaviour is now both doors' (issue 29, item 5):

* ``dtype``: every weight dtype the simulator sizes (:data:`simulator.base.specs.WEIGHT_DTYPES`) at both doors, in
  one message for the others; the API took them already (``int8``, ``nvfp4`` give answers people rely on), the form
  offered six and answered "Select a valid choice".
* ``block_size``: vLLM's own sizes (1 to 256) at both doors, in the API's words; the form offered 8 to 128 only and
  answered "Select a valid choice".
* ``quantization``: any spelling the simulator knows (``awq_marlin``, ``AWQ``) at both doors, refused in the
  service's words at the field; the form answered "Select a valid choice" to anything off its list.
* ``vllm_version``: a version such as 0.10.1 (``v`` and ``.postN`` allowed) at both doors; the API let any words
  through to the spec, which took anything starting with a digit ("1x").
* ``kv_cache_dtype``: the same values at both doors already; now the same words for one off the list.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from simulator.base.specs import KV_CACHE_DTYPES, VLLM_BLOCK_SIZES, WEIGHT_DTYPES, block_size_problem
from simulator.sizing.quantization import method_problem
from simulator.speculative import MAX_SPECULATIVE_TOKENS

from .services import LIMITS


@dataclass(frozen=True)
class Knob:
    """One deployment knob."""

    name: str
    kind: str  #: "int", "float", "bool", "choice" (one of ``choices``) or "text"
    label: str
    help: str
    low: float | None = None
    high: float | None = None
    #: What an absent field stands for: a value, or None when the service decides (``blank`` says what).
    default: Any = None
    #: Words for what a blank (form) or absent (API) field means; "" when it must be given on the form.
    blank: str = ""
    #: Form widget step for floats ("any" or "0.01").
    step: str = "any"
    #: A rule beyond the bounds: returns why a value is refused, or None.
    rule: Callable[[Any], str | None] | None = None
    #: (value, form label) pairs: the values of a "choice" knob, the form's menu of a "text" or "int" one (whose rule
    #: may take more spellings than the menu shows).
    choices: tuple[tuple[Any, str], ...] = ()
    #: Longest text a "text" knob takes.
    max_length: int | None = None

    @property
    def optional(self) -> bool:
        return bool(self.blank)

    def form_help(self) -> str:
        return f"{self.help} Blank = {self.blank}." if self.blank else self.help

    def api_help(self) -> str:
        return f"{self.help} Default: {self.blank}." if self.blank else self.help

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is refused by the knob's rule (None when it passes or there is no rule)."""
        return self.rule(value) if self.rule is not None else None

    def validators(self) -> list[Callable[[Any], None]]:
        """The rule as a Django validator (the form and DRF both run it)."""
        if self.rule is None:
            return []
        rule = self.rule

        def check(value: Any) -> None:
            problem = rule(value)
            if problem:
                raise ValidationError(problem)

        return [check]


def fraction_problem(value: float) -> str | None:
    """Why ``gpu_memory_utilization`` is refused (None when it is in (0, 1])."""
    if 0 < value <= 1:
        return None
    return (f"Must be more than 0 and at most 1 (a fraction of each GPU's memory, e.g. 0.9 for 90%); "
            f"got {value:g}.")


def sentence(problem: str | None) -> str | None:
    """A rule's words as a sentence: capital first letter, final full stop."""
    if not problem:
        return None
    return problem[:1].upper() + problem[1:] + ("" if problem.endswith(".") else ".")


def one_of(what: str, values: tuple, note: str = "") -> Callable[[Any], str | None]:
    """The rule of a knob with fixed ``values``: "Must be one of {what}: …{note}; got X."."""
    def rule(value: Any) -> str | None:
        if isinstance(value, str) and value in values:
            return None
        return f"Must be one of {what}: {', '.join(map(str, values))}{note}; got {value!r}."

    return rule


def block_size_rule(value: Any) -> str | None:
    """:func:`simulator.base.specs.block_size_problem` as a sentence."""
    return sentence(block_size_problem(value))


def quantization_rule(value: Any) -> str | None:
    """:func:`simulator.sizing.quantization.method_problem` as a sentence."""
    return sentence(method_problem(value))


_VERSION = re.compile(r"\d+(\.\d+){0,3}(\.post\d+)?")


def version_problem(value: Any) -> str | None:
    """Why a vLLM version is refused: one such as 0.10.1 or 0.28.0 (a leading ``v`` and ``.postN`` allowed)."""
    v = str(value).strip().lstrip("v")
    if _VERSION.fullmatch(v):
        return None
    return f"Give a version such as 0.10.1 or 0.28.0; got {v!r}."


_KV_LABELS = {"auto": "auto — the activation dtype", "fp32": "fp32 (4 bytes)", "bf16": "bf16 (2 bytes)",
              "fp16": "fp16 (2 bytes)", "fp8": "fp8 (1 byte)", "int8": "int8 (1 byte)",
              "int4": "int4 (0.5 byte + scales)", "fp4": "fp4 (0.5 byte + scales)", "nvfp4": "nvfp4 (0.5 byte + scales)"}
_WEIGHT_LABELS = {"auto": "auto — the checkpoint's dtype", "bf16": "bf16 (2 bytes)", "fp16": "fp16 (2 bytes)",
                  "fp32": "fp32 (4 bytes)", "fp8": "fp8 (1 byte, on-the-fly quantization)",
                  "int4": "int4 (0.5 byte + group scales)", "int8": "int8 (1 byte, on-the-fly quantization)"}
_QUANT_MENU = ("awq", "gptq", "compressed-tensors", "fp8", "int8", "int4", "mxfp4", "nvfp4", "bitsandbytes")

_KNOBS = (
    Knob("num_gpus", "int", "Number of GPUs",
         "GPUs in the deployment; a multiple of TP × PP × DP runs that many replicas.",
         low=1, high=LIMITS["num_gpus"], blank="TP × PP × DP (one deployment)"),
    Knob("tensor_parallel_size", "int", "Tensor parallel size (TP)",
         "GPUs one layer is split across; must divide the attention heads.",
         low=1, high=LIMITS["tensor_parallel_size"], default=1),
    Knob("pipeline_parallel_size", "int", "Pipeline parallel size (PP)",
         "Stages the layers are split into; the fullest stage decides the KV cache.",
         low=1, high=LIMITS["pipeline_parallel_size"], default=1),
    Knob("data_parallel_size", "int", "Data parallel size (DP)",
         "vLLM --data-parallel-size: engines with their own attention and KV cache; an MoE model's experts are "
         "sharded over TP × DP GPUs. GPUs = TP × PP × DP.",
         low=1, high=LIMITS["data_parallel_size"], default=1, blank="1"),
    Knob("enable_expert_parallel", "bool", "Expert parallelism (EP)",
         "vLLM --enable-expert-parallel, MoE models only: each GPU holds whole experts, EP = TP × DP of them spread "
         "over the GPUs, instead of a slice of every expert.", default=False),
    Knob("dtype", "choice", "Weight dtype", "vLLM --dtype; quantized checkpoints keep their own format.",
         default="auto", choices=tuple((d, _WEIGHT_LABELS.get(d, d)) for d in WEIGHT_DTYPES),
         rule=one_of("the weight dtypes", WEIGHT_DTYPES, " (a quantized checkpoint keeps its own format: set "
                                                          "quantization)")),
    Knob("kv_cache_dtype", "choice", "KV cache dtype", "Bytes per cached K/V element.", default="auto",
         choices=tuple((d, _KV_LABELS.get(d, d)) for d in KV_CACHE_DTYPES),
         rule=one_of("the KV cache dtypes", KV_CACHE_DTYPES)),
    Knob("block_size", "int", "Block size",
         f"Tokens per KV block: one of vLLM's {', '.join(map(str, VLLM_BLOCK_SIZES))} (vLLM default 16).",
         default=16, choices=tuple((b, f"{b} token{'s' if b > 1 else ''}") for b in VLLM_BLOCK_SIZES),
         rule=block_size_rule),
    Knob("gpu_memory_utilization", "float", "GPU memory utilization",
         "Fraction of each GPU's memory vLLM may use, in (0, 1]; vLLM default 0.9.", default=0.9, step="0.01",
         rule=fraction_problem),
    Knob("max_model_len", "int", "Max model length", "Tokens per request (prompt + output).",
         low=1, high=LIMITS["max_model_len"], blank="the model's maximum"),
    Knob("max_num_batched_tokens", "int", "Max batched tokens",
         "Tokens per engine step; sizes the activation peak.", low=1, high=LIMITS["max_num_batched_tokens"],
         blank="vLLM's default for the GPU (8,192 on 80 GB-class GPUs, else 2,048)"),
    Knob("cpu_tier_gib", "float", "CPU offload tier (GiB)",
         "Host memory for offloaded KV blocks, per deployment, GiB.", low=0, high=LIMITS["cpu_tier_gib"],
         blank="none"),
    Knob("weights_gib", "float", "Weights per GPU (GiB)",
         "Calibration: vLLM's 'Model loading took X GiB' (per GPU).", low=0, high=LIMITS["weights_gib"],
         blank="modelled from the parameters"),
    Knob("available_kv_gib", "float", "Available KV cache per GPU (GiB)",
         "Calibration: vLLM's 'Available KV cache memory: Y GiB' (per GPU); negative when vLLM failed to start "
         "(the answer is then fits: false with the shortfall).",
         low=-LIMITS["available_kv_gib"], high=LIMITS["available_kv_gib"], blank="modelled"),
    Knob("quantization", "text", "Weights quantization",
         "Checkpoint quantization method, overriding the model's quantization_config: awq, gptq, "
         "compressed-tensors, fp8, int8, int4, mxfp4, nvfp4, bitsandbytes, or none; the KV cache keeps its own "
         "dtype.", blank="the model's own", max_length=40,
         choices=(("", "the model's own"), ("none", "none (16-bit)"), *((q, q) for q in _QUANT_MENU)),
         rule=quantization_rule),
    Knob("vllm_version", "text", "vLLM version", "The version whose rules to follow, e.g. 0.10.1.",
         blank="the newest", max_length=20, rule=version_problem),
    Knob("max_loras", "int", "LoRA slots (max_loras)", "vLLM --max-loras; 0 = no LoRA.", low=0, high=4096,
         blank="no LoRA"),
    Knob("max_lora_rank", "int", "Max LoRA rank", "vLLM --max-lora-rank.", low=1, high=4096, blank="16"),
    Knob("num_speculative_tokens", "int", "Draft tokens per step (k)", "num_speculative_tokens; 0 = off.",
         low=0, high=MAX_SPECULATIVE_TOKENS, blank="off"),
)

#: The knobs by name.
KNOBS: dict[str, Knob] = {k.name: k for k in _KNOBS}

