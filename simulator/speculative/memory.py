"""The drafter's memory: what speculative decoding takes out of the GPU's budget at start-up.

vLLM loads the drafter beside the target (its weights count in "Model loading took X GiB") and
registers the drafter's attention layers in the same KV cache: every block holds their KV too,
so the page of one block grows and fewer blocks fit (``docs/speculative_decoding.md``).

* **EAGLE** (Li et al. 2024): one decoder layer of the target's shape plus ``fc`` (``2h -> h``);
  it shares the target's embedding and LM head. **EAGLE-3** (Li et al. 2025): one layer, ``fc``
  (``3h -> h``) and its own LM head over a smaller draft vocabulary (32,000 for the Llama 3 heads).
* **MTP** (DeepSeek-V3): ``num_nextn_predict_layers`` (1) layer(s) of the target's own kind
  (experts included) plus ``eh_proj`` (``2h -> h``); shares the embedding and head.
* **draft model**: a whole smaller model of the same vocabulary, at the target's TP.
* **n-gram lookup**: no weights, no KV.

Each head layer's KV per token is the target layer's (``2 x kv_heads x head_dim x bytes`` per rank).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simulator.base import DTYPE_BYTES, DeploymentSpec, GpuSpec, ModelSpec, SpecError
from simulator.clock import StepCostTerms, build_step_time_model, sampling_coefficients
from simulator.sizing import (
    DraftMemory,
    SizingResult,
    estimate_num_parameters,
    kv_bytes_per_token,
    plan,
    resolve_kv_dtype,
    weights_bytes_per_gpu,
)
from simulator.speculative.drafting import Drafting, method_and_k_problem

#: Draft vocabulary of the published EAGLE-3 heads for Llama 3 (``draft_vocab_size``).
EAGLE3_DRAFT_VOCAB = 32_000


@dataclass(frozen=True)
class DraftSpec(Drafting):
    """The drafter of a deployment (sizing side of :class:`simulator.speculative.drafting.SpeculativeConfig`).

    Parameters
    ----------
    method : {"eagle", "eagle3", "mtp", "draft_model", "ngram"}
    num_speculative_tokens : int
    draft_model : ModelSpec, optional
        Required for ``draft_model``; for EAGLE/MTP the head is derived from the target.
    draft_vocab_size : int, optional
        EAGLE-3's draft vocabulary (default 32,000).  # tokens
    """

    method: str = "eagle"
    num_speculative_tokens: int = 0
    draft_model: ModelSpec | None = None
    draft_vocab_size: int | None = None

    def __post_init__(self) -> None:
        p = "speculative."
        problem = method_and_k_problem(self.method, self.num_speculative_tokens)
        if problem:
            raise SpecError(problem)
        if self.method == "draft_model" and self.draft_model is None:
            raise SpecError("the draft_model method needs the draft model", field=f"{p}draft_model")
        if self.method != "draft_model" and self.draft_model is not None:
            raise SpecError(f"only the draft_model method takes a draft model "
                            f"({self.method} derives its head from the target)", field=f"{p}draft_model")
        v = self.draft_vocab_size
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 10_000_000):
            raise SpecError(f"must be a whole number from 1 to 10,000,000, got {v!r}", field=f"{p}draft_vocab_size")


def check_draft_model(target: ModelSpec, draft: ModelSpec) -> None:
    """A draft model must share the target's vocabulary and be smaller (else it is no draft)."""
    if draft.vocab_size and target.vocab_size and draft.vocab_size != target.vocab_size:
        raise SpecError(f"its vocabulary ({draft.vocab_size:,} tokens) is not the "
                        f"target's ({target.vocab_size:,}); the target cannot verify its tokens", field="speculative.draft_model")
    dp = draft.num_parameters or estimate_num_parameters(draft)[0]
    tp_ = target.num_parameters or estimate_num_parameters(target)[0]
    if dp >= tp_:
        raise SpecError(f"{draft.name} ({dp / 1e9:.2f}B parameters) is not smaller than "
                        f"the target {target.name} ({tp_ / 1e9:.2f}B); a draft must be cheaper than the target", field="speculative.draft_model")


def head_spec(target: ModelSpec, spec: DraftSpec) -> tuple[ModelSpec | None, int]:
    """The drafter as a :class:`ModelSpec` (None for n-gram) and its parameters outside that spec
    (``fc`` / ``eh_proj``, EAGLE-3's head), counted in the activation dtype.  # parameters"""
    h = target.hidden_size
    if spec.method == "ngram":
        return None, 0
    if spec.method == "draft_model":
        check_draft_model(target, spec.draft_model)
        return spec.draft_model, 0
    keep_quant = spec.method == "mtp"  # MTP layers ship in the target's checkpoint format
    head = replace(target, name=f"{target.name} {spec.method} head", num_layers=1, layers=(), vocab_size=0,
                   num_dense_layers=0, num_parameters=None, num_active_parameters=None, tie_word_embeddings=False,
                   vision_parameters=None, rope_cache_elements=0,  # shares the target's cos/sin cache (get_rope)
                   **({} if keep_quant else dict(quantization=None, quant_bits=None, quant_group_size=None,
                                                 quant_scheme=None, quant_ignore=())))
    extra = 2 * h * h
    if spec.method == "eagle3":
        extra = 3 * h * h + (spec.draft_vocab_size or EAGLE3_DRAFT_VOCAB) * h
    return head, extra


def draft_memory(target: ModelSpec, spec: DraftSpec, deployment: DeploymentSpec, kv_dtype: str) -> DraftMemory:
    """Weights and KV per token of the drafter on one GPU of ``deployment``."""
    head, extra = head_spec(target, spec)
    if head is None:
        return DraftMemory(spec.method, spec.num_speculative_tokens, 0, "n-gram lookup (no model)", 0.0, 0.0)
    tp = deployment.tensor_parallel_size
    one_stage = deployment.with_(pipeline_parallel_size=1) if deployment.pipeline_parallel_size > 1 else deployment
    cb = DTYPE_BYTES.get(head.weights_dtype, 2)
    w = weights_bytes_per_gpu(head, one_stage) + extra * cb / tp
    kv = kv_bytes_per_token(head, kv_dtype, tp, per_gpu=True)
    return DraftMemory(spec.method, spec.num_speculative_tokens, spec.num_lookahead_tokens, head.name, w, kv)


def plan_with_draft(model: ModelSpec, gpu: GpuSpec, deployment: DeploymentSpec,
                    draft: DraftSpec | None) -> SizingResult:
    """:func:`simulator.sizing.closed_form.plan` with the drafter's memory taken out (``result.speculative``)."""
    if draft is None or not draft.enabled:
        return plan(model, gpu, deployment)
    return plan(model, gpu, deployment, draft_memory(model, draft, deployment, resolve_kv_dtype(model, deployment)))


def draft_step_terms(target: ModelSpec, spec: DraftSpec, gpu: GpuSpec, tp: int = 1,
                     coefficients: dict | None = None) -> StepCostTerms | None:
    """The drafter's roofline step terms (one forward pass), for ``SpeculativeConfig.draft_cost_model``.

    A head reads the LM head it shares with the target (EAGLE, MTP) or its own smaller one (EAGLE-3)
    in every pass, so the pass is costed with that vocabulary. The CPU terms are zero: the draft
    passes run inside the step the target's clock already charges. A draft token is the argmax of the
    drafter's logits (vLLM's proposers sample no draft), so its sampler is the ``greedy`` path whatever
    the requests' sampling. None for n-gram lookup.
    """
    head, _ = head_spec(target, spec)
    if head is None:
        return None
    if spec.method != "draft_model":
        vocab = (spec.draft_vocab_size or EAGLE3_DRAFT_VOCAB) if spec.method == "eagle3" else target.vocab_size
        head = replace(head, vocab_size=vocab, tie_word_embeddings=True)
    coefficients = {**(coefficients or {}), **sampling_coefficients("greedy")}
    terms = build_step_time_model("roofline", model=head, gpu=gpu, tp=tp, coefficients=coefficients).terms
    return replace(terms, base_s=0.0, per_token_s=0.0, per_req_s=0.0, serve_request_s=0.0,
                   serve_prompt_token_s=0.0, serve_output_token_s=0.0)
