"""One table of the sizing knobs: name, kind, bounds, what a blank means, label and help.

The sizing form (:mod:`planner.sizing.forms`) and ``POST /api/plan/``'s input serializer
(:mod:`planner.api.sizing`) both build their fields from it (:func:`planner.sizing.forms.knob_field`,
:func:`planner.api.sizing.knob_serializer_field`), so a bound or a default is written once; a deployment field's
top is its simulator spec's (:data:`simulator.base.specs.DEPLOYMENT_LIMITS`, through ``LIMITS``). Each door adds only
what is its own: the form a widget and "Blank = …", the API "Default: …" and its strict number types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from simulator.speculative import MAX_SPECULATIVE_TOKENS

from .services import LIMITS


@dataclass(frozen=True)
class Knob:
    """One deployment knob."""

    name: str
    kind: str  #: "int", "float" or "bool"
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

    @property
    def optional(self) -> bool:
        return bool(self.blank)

    def form_help(self) -> str:
        return f"{self.help} Blank = {self.blank}." if self.blank else self.help

    def api_help(self) -> str:
        return f"{self.help} Default: {self.blank}." if self.blank else self.help

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
    Knob("max_loras", "int", "LoRA slots (max_loras)", "vLLM --max-loras; 0 = no LoRA.", low=0, high=4096,
         blank="no LoRA"),
    Knob("max_lora_rank", "int", "Max LoRA rank", "vLLM --max-lora-rank.", low=1, high=4096, blank="16"),
    Knob("num_speculative_tokens", "int", "Draft tokens per step (k)", "num_speculative_tokens; 0 = off.",
         low=0, high=MAX_SPECULATIVE_TOKENS, blank="off"),
)

#: The knobs by name.
KNOBS: dict[str, Knob] = {k.name: k for k in _KNOBS}

