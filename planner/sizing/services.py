"""Sizing services: turn validated knobs into a plan, a summary and figure data.

The numbers come from :mod:`simulator.sizing.closed_form`; this module only

* builds the :class:`~simulator.base.specs.DeploymentSpec` from the knobs of a form or
  an API call (applying a pasted vLLM log as calibration),
* checks what the simulator leaves to its callers (``max_model_len`` beyond the
  model's positions, calibration figures larger than the GPU),
* turns every :class:`~simulator.base.specs.SpecError` into a message attached to
  the field the user typed (:class:`PlanInputError`), never a traceback,
* writes the plain-language summary and the series the figures draw.

Views and the API call :func:`plan_deployment`, :func:`compare_gpus`,
:func:`concurrency_curve` and :func:`fragmentation`; none of them touches the
database (model and GPU specs are resolved by :mod:`planner.sizing.selectors`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from planner.api.validation import context_problems
from planner.errors import InputError, every_problem
from simulator.base import GIB, DeploymentSpec, GpuSpec, ModelSpec, SpecError
from simulator.base.specs import DEPLOYMENT_LIMITS
from simulator.sizing import closed_form as sizing
from simulator.sizing import quantization
from simulator.sizing.moe_parallel import shape_label
from simulator.speculative import plan_with_draft
from simulator.workload import WorkloadError, parse_distribution

logger = logging.getLogger(__name__)

#: Knobs a caller may pass to :func:`plan_deployment`; each is a DeploymentSpec field.
KNOB_FIELDS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "enable_expert_parallel",
    "dtype",
    "kv_cache_dtype",
    "block_size",
    "gpu_memory_utilization",
    "max_model_len",
    "max_num_batched_tokens",
    "max_num_seqs",
    "vllm_version",
    "cpu_tier_gib",
    "weights_gib",
    "available_kv_gib",
    "activation_gib",
    "non_torch_gib",
    "cudagraph_gib",
    "max_loras",
    "max_lora_rank",
    "lora_target_modules",
    "subtract_cudagraph",
)

#: Knobs that override the model's checkpoint quantization (``quantization`` method, ``quant_group_size``).
QUANT_FIELDS = ("quantization", "quant_group_size")

#: Caps on what a form or an API call may ask for (absurd values get a message, not a long computation): a
#: deployment's fields as its spec bounds them (:data:`simulator.base.specs.DEPLOYMENT_LIMITS`, the one table of
#: those ranges; :class:`DeploymentSpec` refuses past them), and the page's own inputs.
LIMITS = {
    **DEPLOYMENT_LIMITS,
    "num_gpus": 4096,
    "vllm_log": 200_000,  # characters
    "compare_gpus": 4,
}

#: Fragmentation sample: requests drawn from the length distribution (fixed seed: same answer every time).
FRAGMENTATION_SAMPLES = 2000  # requests
FRAGMENTATION_SEED = 1

# Spec fields that belong to the model or the GPU rather than to a knob.
_DEPLOYMENT_FIELDS = set(KNOB_FIELDS) | {"disk_tier_gib", "activation_gib", "non_torch_gib", "cudagraph_gib"} \
    | set(QUANT_FIELDS)


#: Input that cannot be sized: the planner's one input-error type (:class:`planner.errors.InputError`).
PlanInputError = InputError


def spec_error_field(exc: SpecError, *, default: str) -> tuple[str, str]:
    """A SpecError as ``(field, message)``: its ``field`` and ``message`` (never read back out of the words).

    Deployment fields keep their name; anything else (a ModelSpec or GpuSpec
    field, or none) is reported under ``default`` ("model" or "gpu"), with the
    spec field kept in the message (``str(exc)``, "field: message") so the user
    knows which value is wrong.
    """
    name = exc.field or ""
    if name in _DEPLOYMENT_FIELDS or name.startswith("speculative."):
        return name, exc.message
    return default, str(exc)


@dataclass(frozen=True)
class PlanOutcome:
    """A sizing result with what the page and the API add to it.

    Attributes
    ----------
    result : simulator.sizing.closed_form.SizingResult
    model, gpu : ModelSpec, GpuSpec
    deployment : DeploymentSpec
        As planned (calibration applied).
    num_gpus : int
        GPUs of the whole deployment (``replicas x TP x PP x DP``).
    replicas : int
        Independent copies of the deployment (each a vLLM server of DP ranks, each rank the KV cache of
        ``result``).
    summary : str
        One plain-language sentence.
    field_errors : dict
        Why it does not fit, attached to the field most likely to fix it (empty when it fits).
    calibration : dict
        Figures read from a pasted vLLM log.
    shape_comparison : str
        For an MoE model: its KV tokens under data parallelism with expert parallelism against tensor
        parallelism on the same GPUs, in words (:func:`shape_comparison`); "" when not compared.
    """

    result: sizing.SizingResult
    model: ModelSpec
    gpu: GpuSpec
    deployment: DeploymentSpec
    num_gpus: int
    replicas: int
    summary: str
    field_errors: dict[str, list[str]] = field(default_factory=dict)
    calibration: dict[str, float] = field(default_factory=dict)
    shape_comparison: str = ""

    @property
    def fits(self) -> bool:
        return self.result.fits

    @property
    def total_kv_cache_tokens(self) -> int:
        """KV cache tokens of all replicas and DP ranks together.  # tokens"""
        return self.result.kv_cache_tokens_per_deployment * self.replicas

    @property
    def total_max_concurrency(self) -> float:
        """Requests of ``max_model_len`` tokens all replicas and DP ranks hold at once.  # requests"""
        return self.result.max_concurrency_per_deployment * self.replicas

    @property
    def cpu_tier_tokens(self) -> int | None:
        b = self.result.cpu_tier_blocks
        return None if b is None else b * self.result.block_size

    @property
    def price_per_hour(self) -> float | None:
        """Deployment price: GPUs x the GPU's price per GPU-hour.  # USD/hour"""
        p = self.gpu.price_per_hour
        return None if p is None else p * self.num_gpus

    def to_dict(self) -> dict[str, Any]:
        d = self.result.to_dict()
        d.update(
            summary=self.summary,
            num_gpus=self.num_gpus,
            replicas=self.replicas,
            price_per_hour=self.price_per_hour,
            calibration=dict(self.calibration),
            shape_comparison=self.shape_comparison,
        )
        return d


# ---------------------------------------------------------------------------
# wording
# ---------------------------------------------------------------------------


def short_tokens(n: int | float) -> str:
    """131072 -> '128K', 1048576 -> '1M', 1000 -> '1,000' (binary K/M only when exact)."""
    n = int(n)
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10}K"
    return f"{n:,}"


def _gpu_short_name(gpu: GpuSpec) -> str:
    return gpu.name


def summary_sentence(outcome_parts: dict[str, Any]) -> str:
    """"Llama 3.1 70B on 4x H100 at TP 4: N tokens of KV cache, room for about C requests of 128K tokens at once"."""
    r: sizing.SizingResult = outcome_parts["result"]
    model: ModelSpec = outcome_parts["model"]
    gpu: GpuSpec = outcome_parts["gpu"]
    num_gpus, replicas = outcome_parts["num_gpus"], outcome_parts["replicas"]
    par = [f"TP {r.tensor_parallel_size}"]
    if r.pipeline_parallel_size > 1:
        par.append(f"PP {r.pipeline_parallel_size}")
    if r.data_parallel_size > 1 or r.expert_parallel_size > 1:
        par = [shape_label(outcome_parts["deployment"])]
    if replicas > 1:
        par.append(f"{replicas} replicas")
    head = f"{model.name} on {num_gpus}x {_gpu_short_name(gpu)} at {', '.join(par)}"
    if not r.fits:
        return f"{head}: does not fit — {r.reason}."
    tokens = r.kv_cache_tokens_per_deployment * replicas
    conc = r.max_concurrency_per_deployment * replicas
    about = f"{conc:,.1f}" if conc < 10 else f"{conc:,.0f}"
    return (f"{head}: {tokens:,} tokens of KV cache, room for about {about} requests of "
            f"{short_tokens(r.max_model_len)} tokens at once.")


def _not_fit_field(result: sizing.SizingResult) -> str:
    """The field a user should change when the plan does not fit."""
    mem = result.memory_gib
    if mem.weights > mem.total:
        return "model"
    if mem.kv <= 0:
        return "gpu_memory_utilization"
    return "max_model_len"


# ---------------------------------------------------------------------------
# planning
# ---------------------------------------------------------------------------


def build_deployment(*, model: ModelSpec, gpu: GpuSpec, knobs: dict[str, Any]) -> tuple[DeploymentSpec, dict]:
    """DeploymentSpec from knobs (``None`` = the simulator's default), calibration from ``vllm_log``.

    Returns the spec and the figures read from the log. Raises :class:`PlanInputError`.
    """
    values = {k: knobs[k] for k in KNOB_FIELDS if knobs.get(k) is not None}
    calibration: dict[str, float] = {}
    log_text = knobs.get("vllm_log") or ""
    if log_text.strip():
        if len(log_text) > LIMITS["vllm_log"]:
            raise PlanInputError.one("vllm_log", f"at most {LIMITS['vllm_log']:,} characters; paste only the "
                                                 "start-up lines")
        found = sizing.calibration_from_log(sizing.parse_vllm_log(log_text))
        # every figure the log prints replaces its term (weights, available KV, activation, non-torch, CUDA graphs)
        calibration = dict(found)
        if not any(k in calibration for k in ("weights_gib", "available_kv_gib")):
            raise PlanInputError.one(
                "vllm_log",
                "found neither 'Model loading took … GiB' nor 'Available KV cache memory: … GiB' in the pasted text",
            )
        for k, v in calibration.items():  # numbers typed into their own fields win over the log
            values.setdefault(k, v)
    for name in ("weights_gib", "available_kv_gib", "activation_gib", "non_torch_gib"):
        v = values.get(name)
        if v is not None and v > gpu.memory_gib:
            raise PlanInputError.one(name, f"{v:,.2f} GiB is more than the GPU's {gpu.memory_gib:,.2f} GiB "
                                           "(give the per-GPU figure from the vLLM log)")
    too_long = context_problems(model_name=model.name, max_positions=model.max_position_embeddings,
                                max_model_len=values.get("max_model_len"))
    if too_long:
        raise PlanInputError.one("max_model_len", too_long["max_model_len"])
    try:
        dep = DeploymentSpec(**values)
    except SpecError as exc:
        f, msg = spec_error_field(exc, default="non_field_errors")
        raise PlanInputError.one(f, msg) from None
    return dep, calibration


def apply_quantization(model: ModelSpec, knobs: dict[str, Any]) -> ModelSpec:
    """The model with the ``quantization`` / ``quant_group_size`` knobs applied (a method the planner does
    not know is refused at the ``quantization`` field, never guessed)."""
    method = knobs.get("quantization")
    group = knobs.get("quant_group_size")
    if not method and group is None:
        return model
    changes: dict[str, Any] = {}
    if method:
        problem = quantization.method_problem(method)
        if problem:
            raise PlanInputError.one("quantization", problem)
        name = quantization.METHOD_ALIASES[str(method).strip().lower()]
        if name == "none":
            return replace(model, quantization=None, quant_bits=None, quant_group_size=None, quant_scheme=None,
                           quant_ignore=())
        if name != model.quantization:
            changes.update(quantization=name, quant_bits=None, quant_scheme=None, quant_group_size=None)
    if group is not None:
        if not changes.get("quantization", model.quantization):
            raise PlanInputError.one("quant_group_size", f"{model.name}'s weights are not quantized; give "
                                                         "quantization as well")
        changes["quant_group_size"] = group
    try:
        out = replace(model, **changes)
        quantization.check_group_size(out, quantization.scheme_for(out))
    except SpecError as exc:  # (quantization_config.group_size: the group size; the scheme's fields otherwise)
        name = "quant_group_size" if "group" in (exc.field or "") else "quantization"
        raise PlanInputError.one(name, exc.message) from None
    return out


def plan_deployment(*, model: ModelSpec, gpu: GpuSpec, knobs: dict[str, Any]) -> PlanOutcome:
    """Size one deployment, or refuse it with every problem of its knobs at once.

    Each check stops at its first problem; a refused knob is put back to vLLM's default and the plan tried
    again (:func:`planner.errors.every_problem`), so a TP that does not divide the heads is reported with a
    ``max_model_len`` beyond the model's positions, not after it is fixed. The rest as :func:`plan_once`.
    """
    outcome = every_problem(lambda k: plan_once(model=model, gpu=gpu, knobs=k), knobs, reset=_reset_knob)
    words = shape_comparison(outcome, knobs)
    return replace(outcome, shape_comparison=words) if words else outcome


#: Knobs that carry figures of one shape (from a log): a comparison with another shape cannot reuse them.
_SHAPE_BOUND_KNOBS = ("weights_gib", "available_kv_gib", "activation_gib", "non_torch_gib", "cudagraph_gib",
                      "vllm_log")


def shape_comparison(outcome: PlanOutcome, knobs: dict[str, Any]) -> str:
    """The comparison that matters for an MoE model, in words, computed on the same GPUs and knobs.

    A plan with data parallelism (DP > 1, EP on or off) is set against tensor parallelism over the same
    ``TP x DP`` GPUs at DP 1; a plan with TP > 1 at DP 1 against ``DP = TP`` ranks of TP 1 with expert
    parallelism. "DP 8 + EP 8 holds 5.1x the KV tokens of TP 8 for DeepSeek-V3 on 8 x H200 SXM 141GB
    (3,255,040 vs 644,480 tokens)". "" for a dense model, a plan calibrated from a log (its figures belong to
    its own shape) or when the other shape cannot be sized at all.
    """
    dep, model = outcome.deployment, outcome.model
    if not model.is_moe or any(knobs.get(k) not in (None, "") for k in _SHAPE_BOUND_KNOBS):
        return ""
    tp, dp = dep.tensor_parallel_size, dep.data_parallel_size
    if dp > 1:
        other = {"tensor_parallel_size": tp * dp, "data_parallel_size": 1, "enable_expert_parallel": False}
    elif tp > 1:
        other = {"tensor_parallel_size": 1, "data_parallel_size": tp, "enable_expert_parallel": True}
    else:
        return ""
    try:
        alt = plan_once(model=model, gpu=outcome.gpu, knobs={**knobs, **other, "num_gpus": None})
    except PlanInputError:
        return ""
    dp_plan, tp_plan = (outcome, alt) if dp > 1 else (alt, outcome)
    a, b = dp_plan.result.kv_cache_tokens_per_deployment, tp_plan.result.kv_cache_tokens_per_deployment
    head = f"{shape_label(dp_plan.deployment)} holds"
    tail = (f"the KV tokens of {shape_label(tp_plan.deployment)} for {model.name} on "
            f"{dep.num_gpus} x {outcome.gpu.name}")
    if not dp_plan.fits or not tp_plan.fits:
        which = dp_plan if not dp_plan.fits else tp_plan
        return f"{shape_label(which.deployment)} does not fit on {dep.num_gpus} x {outcome.gpu.name}: {which.result.reason}"
    return f"{head} {a / b:.1f}x {tail} ({a:,} vs {b:,} tokens)" if b else ""


def _reset_knob(knobs: dict[str, Any], name: str) -> bool:
    """Put a refused knob back to vLLM's default (False when ``name`` is no knob, or is the default already)."""
    key = "speculative" if name.startswith("speculative") else name
    if key not in knobs or knobs[key] in (None, ""):
        return False
    knobs[key] = "" if key == "vllm_log" else None
    return True


def plan_once(*, model: ModelSpec, gpu: GpuSpec, knobs: dict[str, Any]) -> PlanOutcome:
    """Size one deployment (the first problem found refuses it).

    Parameters
    ----------
    model, gpu : ModelSpec, GpuSpec
    knobs : dict
        Any of :data:`KNOB_FIELDS` (``None`` or absent = vLLM's default), plus
        ``num_gpus`` (a multiple of TP x PP; the rest are replicas) and
        ``vllm_log`` (pasted start-up lines used as calibration) and ``speculative`` (a
        :class:`simulator.speculative.memory.DraftSpec`: the drafter's memory is taken out).

    Returns
    -------
    PlanOutcome
        A plan that does not fit is still an outcome (``fits`` False,
        ``field_errors`` says where to act).

    Raises
    ------
    PlanInputError
        Input that cannot be sized at all, with a message per field.
    """
    model = apply_quantization(model, knobs)
    dep, calibration = build_deployment(model=model, gpu=gpu, knobs=knobs)
    per_engine = dep.num_gpus
    num_gpus = knobs.get("num_gpus") or per_engine
    if num_gpus > LIMITS["num_gpus"]:
        raise PlanInputError.one("num_gpus", f"at most {LIMITS['num_gpus']:,} GPUs, got {num_gpus:,}"
                                 + (f" (TP x PP x DP = {per_engine:,})" if per_engine > LIMITS["num_gpus"] else ""))
    if num_gpus % per_engine:
        dp = f" x DP {dep.data_parallel_size}" if dep.data_parallel_size > 1 else ""
        raise PlanInputError.one(
            "num_gpus",
            f"{num_gpus} GPUs cannot be split into deployments of TP {dep.tensor_parallel_size} x PP "
            f"{dep.pipeline_parallel_size}{dp} = {per_engine} GPUs (vLLM runs TP x PP x DP GPUs); use a multiple "
            f"of {per_engine}",
        )
    try:
        result = plan_with_draft(model, gpu, dep, knobs.get("speculative"))
    except SpecError as exc:
        f, msg = spec_error_field(exc, default="model")
        raise PlanInputError.one(f, msg) from None
    except (ArithmeticError, ValueError) as exc:  # a spec the formulas cannot handle: say so, don't crash
        logger.warning("sizing failed for %s on %s: %s", model.name, gpu.name, exc)
        raise PlanInputError.one("non_field_errors", f"cannot size this deployment: {exc}") from None
    replicas = num_gpus // per_engine
    parts = dict(result=result, model=model, gpu=gpu, num_gpus=num_gpus, replicas=replicas, deployment=dep)
    errors = {} if result.fits else {_not_fit_field(result): [f"Does not fit: {result.reason}."]}
    return PlanOutcome(
        result=result,
        model=model,
        gpu=gpu,
        deployment=dep,
        num_gpus=num_gpus,
        replicas=replicas,
        summary=summary_sentence(parts),
        field_errors=errors,
        calibration=calibration,
    )


def plan_launch(outcome: PlanOutcome, model_id: str, speculative=None) -> dict[str, Any] | None:
    """What to run for a plan that fits (:func:`simulator.launch.sizing_launch`; None when it does not):
    ``replicas`` engines of TP x PP GPUs with the knobs the sizing resolved."""
    from simulator.launch import sizing_launch

    if not outcome.result.fits:
        return None
    model_id = model_id or "-".join((outcome.model.name or "MODEL").split())
    return sizing_launch(outcome.result, outcome.deployment, model_id, replicas=outcome.replicas,
                         quantization=outcome.model.quantization, speculative=speculative)


# ---------------------------------------------------------------------------
# figure data
# ---------------------------------------------------------------------------


def concurrency_curve(outcome: PlanOutcome, *, points: int = 24) -> dict[str, list]:
    """Maximum concurrency against context length for this deployment's KV cache.

    Context lengths run log-spaced from 256 tokens to the model's maximum
    (or ``max_model_len``, whichever is larger); the concurrency at each is
    what vLLM would print with that ``max_model_len`` (same blocks, more or
    fewer blocks per request).

    Returns
    -------
    dict
        ``context_tokens`` (tokens), ``max_concurrency`` (requests, all replicas and DP ranks), and ``max_model_len``.
    """
    r = outcome.result
    hi = max(r.max_model_len, outcome.model.max_position_embeddings or 0, 1024)
    lo = min(256, r.max_model_len)
    xs = sorted({int(x) for x in np.geomspace(lo, hi, points).round()} | {r.max_model_len})
    ys = []
    if r.num_gpu_blocks <= 0:
        ys = [0.0 for _ in xs]
    else:
        for x in xs:
            res = sizing.plan(outcome.model, outcome.gpu, outcome.deployment.with_(
                max_model_len=x, max_num_batched_tokens=r.max_num_batched_tokens, max_num_seqs=r.max_num_seqs,
                available_kv_gib=r.memory_gib.kv, weights_gib=r.memory_gib.weights))
            ys.append(float(res.max_concurrency_per_deployment) * outcome.replicas)
    return {"context_tokens": xs, "max_concurrency": ys, "max_model_len": r.max_model_len}


@dataclass(frozen=True)
class CompareRow:
    """One GPU of a comparison: the plan, or why it could not be sized."""

    gpu: GpuSpec
    outcome: PlanOutcome | None
    error: str = ""


def compare_gpus(*, model: ModelSpec, gpus: list[GpuSpec], knobs: dict[str, Any]) -> list[CompareRow]:
    """Plan the same model and knobs on each GPU (a GPU whose plan fails gets its message, not an exception)."""
    rows = []
    for gpu in gpus:
        try:
            rows.append(CompareRow(gpu=gpu, outcome=plan_deployment(model=model, gpu=gpu, knobs=knobs)))
        except PlanInputError as exc:
            rows.append(CompareRow(gpu=gpu, outcome=None, error=str(exc)))
    return rows


def lengths_distribution(lengths: str):
    """The request-length distribution ``lengths`` names; :class:`PlanInputError` on ``lengths`` otherwise
    (the form checks it with the other fields, before any plan)."""
    text = (lengths or "").strip()
    if text.split(":", 1)[0].strip().lower() == "empirical":
        raise PlanInputError.one("lengths", "empirical distributions read a file; give a formula such as "
                                            "'lognormal:2048,1536' or 'uniform:1000,2000'")
    try:
        return parse_distribution(text, name="lengths")
    except WorkloadError as exc:
        raise PlanInputError.one("lengths", exc.message) from None


def fragmentation(outcome: PlanOutcome, *, lengths: str) -> sizing.FragmentationResult:
    """Paged allocation vs naive pre-allocation at ``max_model_len`` for a length distribution.

    ``lengths`` is a distribution string (``lognormal:2048,1536``; see
    :mod:`simulator.workload.distributions`), sampled :data:`FRAGMENTATION_SAMPLES`
    times with a fixed seed, each length clipped to ``max_model_len``.
    Raises :class:`PlanInputError` on the ``lengths`` field.
    """
    dist = lengths_distribution(lengths)
    rng = np.random.default_rng(FRAGMENTATION_SEED)
    sample = dist.sample(rng, FRAGMENTATION_SAMPLES)
    r = outcome.result
    groups = _sliding_groups(outcome)
    if groups is not None:  # a sliding-window layer keeps only its window: count blocks as the cards do
        return _hybrid_paged_vs_naive(sample, groups, r)
    blocks = max(r.num_gpu_blocks - 1, 0) // max(r.num_kv_groups, 1)  # the null block is never allocated
    try:
        return sizing.paged_vs_naive(sample, blocks, r.block_size, r.max_model_len)
    except SpecError as exc:
        raise PlanInputError.one("lengths", str(exc)) from None


def _sliding_groups(outcome: PlanOutcome):
    """The KV groups of the stage the plan sized, when it has sliding-window layers (else ``None``)."""
    r, model = outcome.result, outcome.model
    for rng in sizing.pp_layer_partition(model.num_layers, r.pipeline_parallel_size):
        layers = [model.layer_specs[i] for i in rng]
        groups = sizing.kv_groups(model, layers, r.kv_cache_dtype, r.block_size, r.tensor_parallel_size)
        if groups.num_groups == r.num_kv_groups and groups.bytes_per_block == r.bytes_per_block_per_gpu:
            return groups if groups.sliding_groups else None
    return None


def _hybrid_paged_vs_naive(sample, groups, r) -> sizing.FragmentationResult:
    """Paged vs naive for a model with sliding-window layers, in blocks of the shared pool.

    A request of ``L`` tokens holds ``blocks_per_request(L)`` blocks (its window only in the sliding
    groups), exactly what "maximum concurrency" divides by; naive pre-allocation reserves the
    ``max_model_len`` request's blocks for every request, so it fits ``floor`` of that concurrency.
    """
    lens = np.minimum(np.asarray(sample, dtype=np.int64), r.max_model_len)
    pool = max(r.num_gpu_blocks - 1, 0)  # the null block is never allocated
    def need(tokens: int) -> int:
        return sizing.blocks_per_request(groups, int(tokens), r.block_size, r.max_num_batched_tokens)
    per = np.array([need(t) for t in lens], dtype=np.int64)
    naive = pool // max(need(r.max_model_len), 1)
    cycle = int(per.sum())
    full = pool // cycle
    partial = int(np.searchsorted(np.cumsum(per), pool - full * cycle, side="right"))
    paged = full * lens.size + partial
    bs = r.block_size
    waste = np.where(lens % bs == 0, 0, bs - lens % bs)
    return sizing.FragmentationResult(
        naive_requests=int(naive), paged_requests=int(paged),
        naive_utilization=float(lens.mean() / r.max_model_len),
        paged_utilization=float(lens.sum() / (sizing.blocks_for_tokens(lens, bs).sum() * bs)),
        paged_gain=float(paged / naive) if naive else float("inf"), mean_last_block_waste=float(waste.mean()))


def memory_segments(outcome: PlanOutcome) -> list[tuple[str, float]]:
    """Per-GPU memory as stacked segments that add up to the GPU's total.  # GiB

    ``weights``, ``activation`` (profiling peak), ``overhead`` (non-torch memory,
    plus the CUDA-graph estimate when the vLLM version subtracts it), ``LoRA``
    and ``encoder cache`` (only when present), ``KV cache`` (the allocated
    blocks) and ``free`` (outside ``gpu_memory_utilization`` plus the unused
    tail below one block). A plan that does not fit can exceed the total;
    ``free`` is then 0.
    """
    m = outcome.result.memory_gib
    overhead = m.non_torch + (m.cudagraph if sizing.cudagraph_subtracted(outcome.deployment) else 0.0)
    extra = [(name, v) for name, v in (("LoRA", m.lora), ("Encoder cache", m.encoder_cache)) if v > 0]
    used = m.weights + m.activation + overhead + m.kv_used + sum(v for _, v in extra)
    free = max(m.total - used, 0.0)
    return [("Weights", m.weights), ("Activation", m.activation), ("Overhead", overhead), *extra,
            ("KV cache", m.kv_used), ("Free", free)]


def memory_segment_notes(outcome: PlanOutcome) -> dict[str, str]:
    """Per chart segment (:func:`memory_segments`): where its figure comes from and the vLLM rule it followed."""
    terms = {t.key: t for t in outcome.result.memory_terms}

    def note(*keys: str) -> str:
        return "; ".join(f"{terms[k].label}: {terms[k].source}, {terms[k].rule}" for k in keys if k in terms)

    return {"Weights": note("weights"), "Activation": note("activation_forward", "activation_sampler", "activation"),
            "Overhead": note("non_torch", "cudagraph"), "LoRA": note("lora"), "Encoder cache": note("encoder_cache"),
            "KV cache": outcome.result.vllm_rule, "Free": ""}


def gib_to_bytes(gib: float) -> int:
    return int(math.floor(gib * GIB))
