"""The inputs of a deployment search: the latency objective and the space of deployments.

A *candidate* is one way to build a replica: a GPU type, tensor and pipeline
parallel degrees, a weight precision, a KV cache dtype and a ``max_num_seqs``
cap. The search (:mod:`simulator.search.deployments`) then chooses how many replicas of it
sit behind a router. Everything here is a frozen dataclass that validates on
construction and raises :class:`SearchError` naming the field.

Weight precision is the checkpoint's quantization as
:func:`simulator.sizing.closed_form.weights_bytes_per_gpu` and the roofline clock read it:
``bf16`` (no quantization), ``fp8`` (W8A8: fp8 GEMMs on GPUs that list fp8
TFLOPS) or ``int4`` (weight-only, computed in bf16). Smaller weights leave more
memory for KV blocks; fp8 also shortens compute-bound steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from simulator.base import KV_CACHE_DTYPES, GpuSpec, ModelSpec, milliseconds, unknown_message
from simulator.base.errors import FieldError
from simulator.clock import sampling_coefficients
from simulator.clock.cost_model import SAMPLER_PATHS
from simulator.cluster import ClusterError, parse_routing
from simulator.speculative import MAX_SPECULATIVE_TOKENS, SpeculativeConfig, SpeculativeError

#: Weight precision -> the ModelSpec ``quantization`` it deploys as.
PRECISIONS: dict[str, str | None] = {"bf16": None, "fp8": "fp8", "int4": "int4"}
#: Latencies an SLO target may bound.
SLO_METRICS = ("ttft", "tpot", "itl", "e2e")
SLO_METRIC_LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E"}
#: The usual percentiles; any ``p<number>`` strictly between 0 and 100 is accepted (``p95``, ``p99.9``).
SLO_PERCENTILES = ("p50", "p90", "p99")
#: Metrics a request meets or misses on its own (vLLM bench's ``--goodput`` keys: ttft, tpot, e2el).
GOODPUT_METRICS = ("ttft", "tpot", "e2e")


def parse_percentile(text: Any) -> float:
    """``p90`` -> 90.0, ``p99.9`` -> 99.9; :class:`SearchError` unless strictly between 0 and 100."""
    bad = SearchError(f"must be p followed by a number strictly between 0 and 100 (p50, p90, p99.9), got {text!r}",
                      field="slo.percentile")
    if not isinstance(text, str) or not text[:1] == "p":
        raise bad
    try:
        q = float(text[1:])
    except ValueError:
        raise bad from None
    if not math.isfinite(q) or not 0 < q < 100 or text[1:].strip() != text[1:] or "e" in text.lower():
        raise bad
    return q
#: Most replicas a search may put behind the router.
MAX_SEARCH_REPLICAS = 256
#: Most GPUs ``SearchSpace.max_gpus`` may give (MAX_SEARCH_REPLICAS replicas of 256 GPUs).
MAX_SEARCH_GPUS = 65_536
#: Most candidates (replica shapes) one search may enumerate.
MAX_CANDIDATES = 2_000


class SearchError(FieldError):
    """Bad search input; the message starts with the field it is about."""


#: Drafters a search can try: those whose head is derived from the target (a draft model needs its own checkpoint).
SEARCH_SPEC_METHODS = ("eagle", "eagle3", "mtp", "ngram")


@dataclass(frozen=True)
class SpecOption:
    """A speculative decoding setting a search tries: vLLM's ``method`` and ``num_speculative_tokens``, and the
    acceptance rate ``alpha`` the drafts are judged at (``P(draft i accepted | drafts before it were)``)."""

    method: str
    num_speculative_tokens: int
    acceptance_rate: float

    @classmethod
    def parse(cls, value: Any, field: str) -> SpecOption:
        """From ``"eagle:3:0.7"`` or ``{"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.7}``."""
        if isinstance(value, SpecOption):
            return value
        if isinstance(value, str):
            parts = value.split(":")
            if len(parts) != 3:
                raise SearchError(f"{value!r} must look like METHOD:K:ACCEPTANCE, e.g. eagle:3:0.7", field=field)
            try:
                value = {"method": parts[0].strip(), "num_speculative_tokens": int(parts[1]),
                         "acceptance_rate": float(parts[2])}
            except ValueError:
                raise SearchError(f"{value!r}: K must be a whole number and ACCEPTANCE a number", field=field) from None
        if not isinstance(value, dict):
            raise SearchError(f"must be null, METHOD:K:ACCEPTANCE or an object, got {value!r}", field=field)
        unknown = set(value) - {"method", "num_speculative_tokens", "acceptance_rate"}
        if unknown:
            raise SearchError(f"unknown field(s) {', '.join(sorted(map(str, unknown)))}", field=field)
        method, k, alpha = value.get("method"), value.get("num_speculative_tokens"), value.get("acceptance_rate")
        if method not in SEARCH_SPEC_METHODS:
            raise SearchError(f"must be one of {', '.join(SEARCH_SPEC_METHODS)} (a draft model needs "
                              f"its own checkpoint: size it on the sizing page), got {method!r}", field=f"{field}.method")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SPECULATIVE_TOKENS:
            raise SearchError(f"must be a whole number from 1 to {MAX_SPECULATIVE_TOKENS}, got {k!r}",
                              field=f"{field}.num_speculative_tokens")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 1:
            raise SearchError(f"must be a number in (0, 1] (the chance a draft is accepted when the drafts before "
                              f"it were), got {alpha!r}", field=f"{field}.acceptance_rate")
        try:
            SpeculativeConfig(method=method, num_speculative_tokens=k, acceptance_rate=alpha)
        except SpeculativeError as exc:
            raise SearchError(exc.message, field=f"{field}.{(exc.field or '').removeprefix('speculative.')}".rstrip(".")) from None
        return cls(method, k, float(alpha))

    def config(self, draft_cost_model=None) -> SpeculativeConfig:
        """The engine's :class:`~simulator.speculative.drafting.SpeculativeConfig`, timed by ``draft_cost_model``."""
        return SpeculativeConfig(method=self.method, num_speculative_tokens=self.num_speculative_tokens,
                                 acceptance_rate=self.acceptance_rate, draft_cost_model=draft_cost_model)

    @property
    def label(self) -> str:
        """``EAGLE k=3 at acceptance 0.7``."""
        name = {"eagle": "EAGLE", "eagle3": "EAGLE-3", "mtp": "MTP", "ngram": "n-gram"}[self.method]
        return f"{name} k={self.num_speculative_tokens} at acceptance {self.acceptance_rate:g}"

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens,
                "acceptance_rate": self.acceptance_rate}


def _whole_tuple(name: str, values: Any, lo: int, hi: int) -> tuple[int, ...]:
    if isinstance(values, (int, str)) or not hasattr(values, "__iter__"):
        raise SearchError("must be a list of whole numbers", field=name)
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise SearchError(f"each value must be a whole number from {lo} to {hi}, got {v!r}", field=name)
        out.append(int(v))
    if not out:
        raise SearchError("give at least one value (the space is empty)", field=name)
    return tuple(dict.fromkeys(out))


def _bool_tuple(name: str, values: Any) -> tuple[bool, ...]:
    if isinstance(values, (bool, str)) or not hasattr(values, "__iter__"):
        raise SearchError("must be a list of true / false", field=name)
    out = tuple(dict.fromkeys(values))
    if not out or any(not isinstance(v, bool) for v in out):
        raise SearchError(f"give true, false or both (a list), got {list(values)!r}", field=name)
    return out


def _choice_tuple(name: str, values: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(values, str) or not hasattr(values, "__iter__"):
        raise SearchError(f"must be a list of {', '.join(allowed)}", field=name)
    out = []
    for v in values:
        if v not in allowed:
            raise SearchError(f"{v!r} is not one of {', '.join(allowed)}", field=name)
        out.append(v)
    if not out:
        raise SearchError("give at least one value (the space is empty)", field=name)
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class SloTarget:
    """``metric`` at ``percentile`` over all requests must be at most ``max_s`` seconds.

    vLLM bench's definitions (:mod:`simulator.engine.metrics`): ``ttft``;
    ``tpot``, each request's mean gap after its first token, percentiles over
    the requests; ``itl``, every inter-token gap, percentiles over all gaps;
    ``e2e``. ``percentile`` is ``p`` and any number strictly between 0 and 100.
    For goodput a request meets the ``ttft``, ``tpot`` and ``e2e`` targets on
    its own figures; an ``itl`` target has no per-request form (vLLM's goodput
    has none either) and does not enter goodput.
    """

    metric: str
    percentile: str
    max_s: float  # s

    def __post_init__(self) -> None:
        if self.metric not in SLO_METRICS:
            raise SearchError(f"must be one of {', '.join(SLO_METRICS)}, got {self.metric!r}", field="slo.metric")
        parse_percentile(self.percentile)
        v = self.max_s
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v <= 86_400:
            raise SearchError(f"must be a number of seconds in (0, 86400], got {v!r}", field="slo.max_s")
        object.__setattr__(self, "max_s", float(v))

    @property
    def q(self) -> float:
        """The percentile as a number: ``p90`` -> 90.0."""
        return parse_percentile(self.percentile)

    @property
    def label(self) -> str:
        """``TTFT p90``."""
        return f"{SLO_METRIC_LABELS[self.metric]} {self.percentile}"

    def describe(self) -> str:
        """``TTFT p90 <= 500 ms``."""
        return f"{self.label} <= {format_seconds(self.max_s)}"

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "percentile": self.percentile, "max_s": self.max_s}


@dataclass(frozen=True)
class Slo:
    """Latency targets (all must hold) and the least share of requests that must meet them.

    ``min_goodput`` in [0, 1]: the fraction of all requests that must finish
    with TTFT, TPOT and E2E within every target given for them (0 = not
    checked; ITL targets are percentiles over gaps, not per request). Every
    request must finish in any case (none dropped).
    """

    targets: tuple[SloTarget, ...]
    min_goodput: float = 0.0

    def __post_init__(self) -> None:
        ts = tuple(t if isinstance(t, SloTarget) else SloTarget(**t) for t in self.targets)
        if not ts:
            raise SearchError("give at least one latency target (e.g. TTFT p90 <= 0.5 s)", field="slo.targets")
        if len({(t.metric, t.percentile) for t in ts}) != len(ts):
            raise SearchError("each metric and percentile at most once", field="slo.targets")
        object.__setattr__(self, "targets", ts)
        g = self.min_goodput
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0.0 <= g <= 1.0:
            raise SearchError(f"must be a fraction from 0 to 1, got {g!r}", field="slo.min_goodput")
        object.__setattr__(self, "min_goodput", float(g))

    @property
    def primary(self) -> SloTarget:
        """The first target: the metric of the Pareto frontier."""
        return self.targets[0]

    def per_request_limits(self) -> dict[str, float]:
        """The tightest bound per metric of :data:`GOODPUT_METRICS`, applied to each request for goodput.  # s"""
        out: dict[str, float] = {}
        for t in self.targets:
            if t.metric in GOODPUT_METRICS:
                out[t.metric] = min(out.get(t.metric, math.inf), t.max_s)
        return out

    def describe(self) -> str:
        text = " and ".join(t.describe() for t in self.targets)
        if self.min_goodput > 0:
            text += f", with at least {self.min_goodput:.0%} of requests meeting them"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"targets": [t.to_dict() for t in self.targets], "min_goodput": self.min_goodput}

    @classmethod
    def from_dict(cls, data: Any) -> Slo:
        if not isinstance(data, dict):
            raise SearchError("must be an object {\"targets\": [...], \"min_goodput\": ...}", field="slo")
        unknown = set(data) - {"targets", "min_goodput"}
        if unknown:
            raise SearchError(f"{unknown_message(sorted(unknown)[0], ['targets', 'min_goodput'])}", field=f"slo.{sorted(unknown)[0]}")
        targets = data.get("targets")
        if not isinstance(targets, (list, tuple)):
            raise SearchError("must be a list of {metric, percentile, max_s}", field="slo.targets")
        parsed = []
        known = ["metric", "percentile", "max_s"]
        for i, t in enumerate(targets):
            if not isinstance(t, dict):
                raise SearchError("each target is {\"metric\", \"percentile\", \"max_s\"}", field=f"slo.targets[{i}]")
            extra = sorted(set(t) - set(known), key=str)
            if extra:  # each target's first unknown key, named with the closest known one
                raise SearchError(unknown_message(extra[0], known), field=f"slo.targets[{i}].{extra[0]}")
            parsed.append(SloTarget(t.get("metric"), t.get("percentile", "p90"), t.get("max_s")))
        return cls(tuple(parsed), data.get("min_goodput", 0.0))


def parse_slo_target(text: str) -> SloTarget:
    """``ttft:p90:0.5`` (seconds) -> :class:`SloTarget`."""
    parts = text.strip().split(":")
    if len(parts) != 3:
        raise SearchError(f"{text!r} must look like METRIC:PERCENTILE:SECONDS, e.g. ttft:p90:0.5", field="slo")
    try:
        seconds = float(parts[2])
    except ValueError:
        raise SearchError(f"{parts[2]!r} is not a number of seconds", field="slo.max_s") from None
    return SloTarget(parts[0].lower(), parts[1].lower(), seconds)


def format_seconds(s: float) -> str:
    """``0.212`` -> ``212 ms``; ``7.15`` -> ``7,150 ms``: always milliseconds (:mod:`simulator.base.readable`)."""
    return milliseconds(s)


#: The traffic a search simulates when the question names only a rate (every door: the command line, the API
#: and the search page take these; ``tests/planner/test_search_defaults.py`` checks the three agree).
TRAFFIC_DEFAULTS = {"duration_s": 60.0, "prompt": "normal:1024,256", "output": "normal:256,64", "seed": 0}


#: Bounds of the traffic a search simulates when its duration is left out (:func:`default_duration`).  # s
DURATION_BOUNDS_S = (60.0, 600.0)
#: Two-sided 95 % normal quantile, for the percentile's confidence interval.
Z95 = 1.959964


def requests_for_percentile(q: float) -> int:
    """Requests whose ``q``-th percentile lies, at 95 % confidence, within a quarter of the tail ``100 - q``
    percentile points of the true one (the order statistic's binomial interval, ``z sqrt(p (1 - p) / n)``):
    62 for p50, 554 for p90, 6,085 for p99."""
    p = q / 100.0
    half = (1.0 - p) / 4.0
    return max(1, math.ceil(Z95 ** 2 * p * (1.0 - p) / half ** 2))


def default_duration(rate: float, slo: Slo) -> tuple[float, str]:
    """Seconds of traffic at ``rate`` requests/s for the SLO's highest percentile to be known as
    :func:`requests_for_percentile` says, within :data:`DURATION_BOUNDS_S` (at least a minute, so a slowly
    growing queue shows; at most ten), and the rule in words."""
    top = max(slo.targets, key=lambda t: parse_percentile(t.percentile))
    q = parse_percentile(top.percentile)
    n = requests_for_percentile(q)
    lo, hi = DURATION_BOUNDS_S
    want = n / rate
    seconds = min(hi, max(lo, want))
    band = (100.0 - q) / 4.0
    why = (f"{n:,} requests put {top.label} within ±{band:g} percentile points (p{q - band:g}-p{q + band:g}) at "
           "95 % confidence")
    if want < lo:
        why = f"{why}; at least {lo:g} s, so that a growing queue shows"
    elif want > hi:
        why = f"{why}, {want:,.0f} s at this rate; capped at {hi:g} s, so it is known less closely"
    return seconds, why


def check_space_for_model(space: SearchSpace, model: ModelSpec) -> None:
    """Refuse, naming the space's field and vLLM's rule, a DP / EP dimension no shape of ``space`` could run
    ``model`` with (:func:`simulator.sizing.moe_parallel.check_moe_shape`), as vLLM refuses it at start-up:

    - ``space.expert_parallel`` holding true for a model without experts (expert parallelism applies to MoE
      layers only);
    - a ``space.data_parallel`` size that no TP of the space (with EP on or off, as the space tries) makes a
      shape vLLM starts: the routed experts' intermediate split TP x DP ways must divide (EP off), EP size
      TP x DP at most the routed experts (EP on);
    - a ``space.data_parallel`` size whose smallest replica (the space's smallest TP x PP x DP) needs more GPUs
      than ``space.max_gpus``.

    Shapes of a mixed space that vLLM refuses while others of the same DP size run are rejected one by one with
    the same rule (the search's outcomes), not refused here.
    """
    from simulator.base import DeploymentSpec, SpecError
    from simulator.sizing.moe_parallel import check_moe_shape

    if True in space.expert_parallel and not model.is_moe:
        raise SearchError(f"{model.name} has no experts; vLLM's expert parallelism (--enable-expert-parallel) "
                          "applies to MoE layers only: give false", field="space.expert_parallel")
    smallest = min(space.tensor_parallel) * min(space.pipeline_parallel)
    for dp in space.data_parallel:
        if space.max_gpus is not None and smallest * dp > space.max_gpus:
            raise SearchError(f"DP {dp} needs at least {smallest * dp:,} GPUs a replica (TP x PP x DP = {smallest} x "
                              f"{dp}: vLLM starts TP x PP GPUs for each of its {dp} DP ranks), more than the "
                              f"{space.max_gpus:,} of space.max_gpus", field="space.data_parallel")
        if dp == 1:
            continue
        problems = []
        for tp in space.tensor_parallel:
            for ep in space.expert_parallel:
                try:
                    check_moe_shape(model, DeploymentSpec(tensor_parallel_size=tp, data_parallel_size=dp,
                                                          enable_expert_parallel=ep))
                except SpecError as exc:
                    problems.append(exc.message)
        if len(problems) == len(space.tensor_parallel) * len(space.expert_parallel):
            raise SearchError(f"DP {dp} runs with no TP of the space: {problems[0]}", field="space.data_parallel")


def space_defaults() -> dict:
    """The space a search tries when the question leaves it out: :class:`SearchSpace`'s field defaults (TP 1, 2,
    4, 8; PP 1; bf16 and fp8 weights, fp8 dynamically quantized from any bf16 checkpoint; KV ``auto``;
    ``max_num_seqs`` 256; up to 16 replicas; round-robin)."""
    from dataclasses import MISSING

    return {f.name: f.default for f in fields(SearchSpace) if f.default is not MISSING and f.name in (
        "tensor_parallel", "pipeline_parallel", "precisions", "kv_cache_dtypes", "max_num_seqs", "max_replicas",
        "routing")}


def _spec_tuple(values: Any) -> tuple[SpecOption | None, ...]:
    if isinstance(values, (str, dict)) or not hasattr(values, "__iter__"):
        raise SearchError("must be a list of settings (null for none)", field="space.speculative")
    out = tuple(None if v is None or v == "none" else SpecOption.parse(v, f"space.speculative[{i}]")
                for i, v in enumerate(values))
    if not out:
        raise SearchError("give at least one value (null: without speculative decoding)", field="space.speculative")
    if len(set(out)) != len(out):
        raise SearchError("each setting at most once", field="space.speculative")
    return out


@dataclass(frozen=True)
class SearchSpace:
    """The deployments to consider.

    Parameters
    ----------
    gpus : tuple of GpuSpec
        GPU types; one without ``price_per_hour`` is rejected (no cost to compare).
    tensor_parallel, pipeline_parallel : tuple of int
        Degrees per replica (GPUs per replica = TP x PP).
    precisions : tuple of {"bf16", "fp8", "int4"}
        Weight precision.
    kv_cache_dtypes : tuple of str
        ``auto`` (the compute dtype) or a KV dtype such as ``fp8``.
    max_num_seqs : tuple of int
        Running-request caps.
    max_replicas : int
        Most replicas behind the router.
    routing : str
        Router policy (``docs/cluster.md``).
    gpu_memory_utilization : float
    max_model_len : int, optional
        Default: the workload's longest request rounded up to 256 tokens.  # tokens
    sampling : str, optional
        The requests' sampler path (a key of :data:`simulator.clock.cost_model.SAMPLER_PATHS`): the
        sampler time every candidate's roofline clock charges a step. None (the default): each model's
        own (``ModelSpec.sampling``, from its ``generation_config.json``; :data:`simulator.base.sampling.DEFAULT_SAMPLER_PATH`
        when not known).
    async_scheduling : bool, optional
        Time the candidates with vLLM's asynchronous scheduler (True) or the synchronous one (False); None (the
        default): vLLM's default, asynchronous since 0.14 (:func:`simulator.sizing.default_async_scheduling`).
    coefficients_by_gpu : dict, optional
        GPU name -> roofline coefficients (:class:`simulator.clock.RooflineCoefficients` fields) that time the
        shapes on that GPU instead of the defaults and ``sampling``'s terms: a calibration fitted on that GPU
        (the planner merges its sampler terms). Shapes on the other GPUs keep the defaults.
    speculative : tuple of (SpecOption or None)
        Speculative decoding settings to try (:class:`SpecOption`, or its ``"eagle:3:0.7"`` / dict form); None in
        the tuple: without. Default ``(None,)``: no speculative decoding.
    data_parallel : tuple of int
        DP sizes (vLLM's ``--data-parallel-size``): a replica is one DP group of TP x PP x DP GPUs
        (``simulator.cluster.data_parallel``). Default ``(1,)``: one engine a replica.
    expert_parallel : tuple of bool
        vLLM's ``--enable-expert-parallel`` off and / or on (MoE models; on a dense model the shape is rejected
        with vLLM's rule). Default ``(False,)``.
    max_gpus : int, optional
        The GPUs there are: an answer's replicas x GPUs per replica stays within it (a shape whose one replica
        needs more is rejected; :func:`check_space_for_model` refuses a DP size none of whose shapes fits). None
        (the default): only ``max_replicas`` bounds the count.
    """

    gpus: tuple[GpuSpec, ...]
    tensor_parallel: tuple[int, ...] = (1, 2, 4, 8)
    pipeline_parallel: tuple[int, ...] = (1,)
    precisions: tuple[str, ...] = ("bf16", "fp8")
    kv_cache_dtypes: tuple[str, ...] = ("auto",)
    max_num_seqs: tuple[int, ...] = (256,)
    max_replicas: int = 16
    routing: str = "round-robin"
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    sampling: str | None = None
    async_scheduling: bool | None = None
    coefficients_by_gpu: dict[str, dict[str, float]] | None = None
    speculative: tuple[SpecOption | None, ...] = (None,)
    data_parallel: tuple[int, ...] = (1,)
    expert_parallel: tuple[bool, ...] = (False,)
    max_gpus: int | None = None

    def __post_init__(self) -> None:
        gpus = tuple(self.gpus) if hasattr(self.gpus, "__iter__") else ()
        if not gpus:
            raise SearchError("give at least one GPU type (the space is empty)", field="space.gpus")
        if any(not isinstance(g, GpuSpec) for g in gpus):
            raise SearchError("must be GpuSpec objects", field="space.gpus")
        if len({g.name for g in gpus}) != len(gpus):
            raise SearchError("each GPU type at most once", field="space.gpus")
        object.__setattr__(self, "gpus", gpus)
        object.__setattr__(self, "tensor_parallel", _whole_tuple("space.tensor_parallel", self.tensor_parallel, 1, 64))
        object.__setattr__(self, "pipeline_parallel",
                           _whole_tuple("space.pipeline_parallel", self.pipeline_parallel, 1, 64))
        object.__setattr__(self, "precisions", _choice_tuple("space.precisions", self.precisions, tuple(PRECISIONS)))
        object.__setattr__(self, "kv_cache_dtypes",
                           _choice_tuple("space.kv_cache_dtypes", self.kv_cache_dtypes, ("auto", *KV_CACHE_DTYPES)))
        object.__setattr__(self, "max_num_seqs", _whole_tuple("space.max_num_seqs", self.max_num_seqs, 1, 65_536))
        m = self.max_replicas
        if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= MAX_SEARCH_REPLICAS:
            raise SearchError(f"must be a whole number from 1 to {MAX_SEARCH_REPLICAS}, got {m!r}", field="space.max_replicas")
        try:
            object.__setattr__(self, "routing", str(parse_routing(self.routing)))
        except (ClusterError, TypeError, AttributeError) as exc:
            raise SearchError(exc.message if isinstance(exc, FieldError) else str(exc), field="space.routing") from None
        g = self.gpu_memory_utilization
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 < g <= 1:
            raise SearchError(f"must be a fraction in (0, 1], got {g!r}", field="space.gpu_memory_utilization")
        mml = self.max_model_len
        if mml is not None and (isinstance(mml, bool) or not isinstance(mml, int) or not 1 <= mml <= 10_000_000):
            raise SearchError(f"must be a whole number of tokens from 1 to 10,000,000, got {mml!r}", field="space.max_model_len")
        if self.sampling is not None and (not isinstance(self.sampling, str) or self.sampling not in SAMPLER_PATHS):
            raise SearchError(f"must be one of {', '.join(SAMPLER_PATHS)}, got {self.sampling!r}", field="space.sampling")
        if self.async_scheduling is not None and not isinstance(self.async_scheduling, bool):
            raise SearchError(f"must be true, false or null (vLLM's default), "
                              f"got {self.async_scheduling!r}", field="space.async_scheduling")
        by_gpu = self.coefficients_by_gpu
        if by_gpu is not None and (not isinstance(by_gpu, dict) or not set(by_gpu) <= {g.name for g in gpus}
                                   or not all(isinstance(c, dict) for c in by_gpu.values())):
            raise SearchError("must map GPU names of space.gpus to coefficient objects", field="space.coefficients_by_gpu")
        object.__setattr__(self, "speculative", _spec_tuple(self.speculative))
        object.__setattr__(self, "data_parallel", _whole_tuple("space.data_parallel", self.data_parallel, 1, 256))
        object.__setattr__(self, "expert_parallel", _bool_tuple("space.expert_parallel", self.expert_parallel))
        mg = self.max_gpus
        if mg is not None and (isinstance(mg, bool) or not isinstance(mg, int) or not 1 <= mg <= MAX_SEARCH_GPUS):
            raise SearchError(f"must be a whole number of GPUs from 1 to {MAX_SEARCH_GPUS:,}, or null (no limit), "
                              f"got {mg!r}", field="space.max_gpus")
        n = self.size
        if n > MAX_CANDIDATES:
            dp_ep = (" x DP sizes" if len(self.data_parallel) > 1 else "") + (
                " x EP on / off" if len(self.expert_parallel) > 1 else "")
            raise SearchError(f"{n:,} replica shapes (GPUs x TP x PP x precisions x KV dtypes x max_num_seqs"
                              f"{' x speculative settings' if len(self.speculative) > 1 else ''}{dp_ep}) "
                              f"is more than the {MAX_CANDIDATES:,} a search may hold", field="space")

    @property
    def size(self) -> int:
        """Number of candidates (before sizing)."""
        return (len(self.gpus) * len(self.tensor_parallel) * len(self.pipeline_parallel) * len(self.precisions)
                * len(self.kv_cache_dtypes) * len(self.max_num_seqs) * len(self.speculative)
                * len(self.data_parallel) * len(self.expert_parallel))

    def candidates(self) -> list[Candidate]:
        """Every replica shape, in a fixed order (GPU, TP, PP, precision, KV dtype, max_num_seqs, speculative, DP,
        EP)."""
        return [Candidate(g, tp, pp, prec, kv, mns, spec, dp, ep)
                for g in self.gpus for tp in self.tensor_parallel for pp in self.pipeline_parallel
                for prec in self.precisions for kv in self.kv_cache_dtypes for mns in self.max_num_seqs
                for spec in self.speculative for dp in self.data_parallel for ep in self.expert_parallel]

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": [g.to_dict() for g in self.gpus], "tensor_parallel": list(self.tensor_parallel),
                "pipeline_parallel": list(self.pipeline_parallel), "precisions": list(self.precisions),
                "kv_cache_dtypes": list(self.kv_cache_dtypes), "max_num_seqs": list(self.max_num_seqs),
                "max_replicas": self.max_replicas, "routing": self.routing,
                "gpu_memory_utilization": self.gpu_memory_utilization, "max_model_len": self.max_model_len,
                "sampling": self.sampling,
                **({} if self.async_scheduling is None else {"async_scheduling": self.async_scheduling}),
                **({} if self.coefficients_by_gpu is None else {"coefficients_by_gpu": self.coefficients_by_gpu}),
                **({} if self.speculative == (None,) else
                   {"speculative": [None if o is None else o.to_dict() for o in self.speculative]}),
                **({} if self.data_parallel == (1,) else {"data_parallel": list(self.data_parallel)}),
                **({} if self.expert_parallel == (False,) else {"expert_parallel": list(self.expert_parallel)}),
                **({} if self.max_gpus is None else {"max_gpus": self.max_gpus})}

    def replicas_cap(self, cand: Candidate) -> int:
        """Most replicas of ``cand`` the search tries: ``max_replicas``, and within ``max_gpus`` (0: one replica
        needs more GPUs than there are)."""
        if self.max_gpus is None:
            return self.max_replicas
        return min(self.max_replicas, self.max_gpus // cand.gpus_per_replica)

    def coefficients_for(self, gpu: GpuSpec) -> dict[str, float] | None:
        """The roofline coefficients that time shapes on ``gpu``: ``coefficients_by_gpu``'s for it, else the
        ``sampling`` path's terms (None: every default, the model's own path)."""
        if self.coefficients_by_gpu and gpu.name in self.coefficients_by_gpu:
            return dict(self.coefficients_by_gpu[gpu.name])
        return None if self.sampling is None else sampling_coefficients(self.sampling)


@dataclass(frozen=True)
class Candidate:
    """One replica shape (the search picks how many replicas of it)."""

    gpu: GpuSpec
    tensor_parallel: int
    pipeline_parallel: int
    precision: str
    kv_cache_dtype: str
    max_num_seqs: int
    speculative: SpecOption | None = None
    data_parallel: int = 1
    expert_parallel: bool = False

    @property
    def gpus_per_replica(self) -> int:
        """TP x PP x DP: a replica is one DP group."""
        return self.tensor_parallel * self.pipeline_parallel * self.data_parallel

    @property
    def dp_group(self) -> bool:
        """A DP group (DP > 1, or EP on over TP x DP > 1 GPUs: vLLM's ``use_ep``), not one engine."""
        return self.data_parallel > 1 or (self.expert_parallel and self.tensor_parallel > 1)

    @property
    def price_per_replica(self) -> float | None:
        """USD per hour of one replica, or None without a GPU price.  # USD/h"""
        p = self.gpu.price_per_hour
        return None if p is None else p * self.gpus_per_replica

    def model_for(self, model: ModelSpec) -> ModelSpec:
        """``model`` with this candidate's weight precision."""
        return replace(model, quantization=PRECISIONS[self.precision])

    @property
    def label(self) -> str:
        """``2x H100 SXM5 80GB (TP 2), fp8 weights, KV auto, max_num_seqs 256`` (``, EAGLE k=3 at acceptance 0.7``
        with speculative decoding)."""
        par = f"TP {self.tensor_parallel}" + (f", PP {self.pipeline_parallel}" if self.pipeline_parallel > 1 else "")
        if self.dp_group:  # "TP 1 x DP 8 + EP": the deployment's shape
            par = " x ".join(p for p in (f"TP {self.tensor_parallel}", self.pipeline_parallel > 1 and
                                         f"PP {self.pipeline_parallel}", self.data_parallel > 1 and
                                         f"DP {self.data_parallel}") if p)
            par += " + EP" if self.expert_parallel else ""
        spec = "" if self.speculative is None else f", {self.speculative.label}"
        return (f"{self.gpus_per_replica}x {self.gpu.name} ({par}), {self.precision} weights, "
                f"KV {self.kv_cache_dtype}, max_num_seqs {self.max_num_seqs}{spec}")

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu.name, "tensor_parallel": self.tensor_parallel,
                "pipeline_parallel": self.pipeline_parallel, "precision": self.precision,
                "kv_cache_dtype": self.kv_cache_dtype, "max_num_seqs": self.max_num_seqs,
                "gpus_per_replica": self.gpus_per_replica, "price_per_replica": self.price_per_replica,
                "label": self.label, **({} if self.speculative is None else {"speculative": self.speculative.to_dict()}),
                **({"data_parallel": self.data_parallel, "expert_parallel": self.expert_parallel} if self.dp_group
                   else {})}
