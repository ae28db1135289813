"""The sizing form (home page) and the compare form: labels, units, limits.

Both are submitted with GET so a result is a link. Field validation (types,
ranges, caps on absurd values) lives here; what needs the model and the GPU
(TP dividing the heads, ``max_model_len`` beyond the model's positions, a plan
that does not fit) comes back from :mod:`planner.sizing.services` as
:class:`~planner.sizing.services.PlanInputError` and is attached to the field
with :meth:`SizingForm.add_plan_errors`.
"""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.http import QueryDict

from config.form_errors import attach_errors, capitalized
from planner.sampling_words import sampling_field
from simulator.base import SpecError
from simulator.speculative import MAX_SPECULATIVE_TOKENS, DraftSpec

from . import selectors
from .knobs import KNOBS
from .services import LIMITS, PlanInputError, lengths_distribution

DEFAULT_LENGTHS = "lognormal:2048,1536"

#: What an empty form stands for: vLLM's defaults, the knobs' (model and GPU are filled in from the catalog).
DEFAULTS: dict[str, str] = {
    **{k.name: str(k.default) for k in KNOBS.values() if k.default is not None and not k.optional
       and k.kind != "bool"},
    "lengths": DEFAULT_LENGTHS,
}

_NUMBER = {"class": "num"}


class KnobChoiceField(forms.TypedChoiceField):
    """A knob offered as a menu (:attr:`Knob.choices <planner.sizing.knobs.Knob.choices>`): the knob's rule, not
    Django's "Select a valid choice", decides what is refused, in the words ``POST /api/plan/`` answers."""

    def __init__(self, *, knob, **kwargs):
        self.knob = knob
        super().__init__(**kwargs)

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values or self.coerce is str:
            return value
        try:
            return self.coerce(value)
        except (TypeError, ValueError):
            raise forms.ValidationError(self.knob.problem(value) or "Not a valid value.", code="invalid") from None

    def valid_value(self, value) -> bool:
        return True  # the knob's rule (a validator) says what is refused

    def _coerce(self, value):
        # (coerced in to_python, before the rule runs)
        return self.empty_value if value in self.empty_values else value


def knob_field(name: str, **overrides: Any) -> forms.Field:
    """The form field of a sizing knob (:data:`planner.sizing.knobs.KNOBS`): its bounds or values, label, help and
    rule; ``overrides`` for a form that words it its own way (the replicas form's TP label)."""
    k = KNOBS[name]
    kw: dict[str, Any] = {"label": k.label, "help_text": k.form_help(), "validators": k.validators(),
                          "required": k.kind != "bool" and not k.optional}
    if k.kind == "bool":
        return forms.BooleanField(**{**kw, **overrides})
    if k.choices:
        coerce = int if k.kind == "int" else str
        return KnobChoiceField(knob=k, choices=list(k.choices), coerce=coerce, empty_value=None if k.optional else "",
                               **{**kw, **overrides})
    if k.kind == "text":
        return forms.CharField(**{**kw, "max_length": k.max_length, **overrides})
    kw.update(min_value=k.low, max_value=k.high)
    if k.kind == "int":
        return forms.IntegerField(**{**kw, "widget": forms.NumberInput(attrs=_NUMBER), **overrides})
    return forms.FloatField(**{**kw, "widget": forms.NumberInput(attrs={"step": k.step, **_NUMBER}), **overrides})


class SizingForm(forms.Form):
    """Model, GPU and vLLM knobs of one deployment, plus optional calibration."""

    model = forms.ChoiceField(label="Model", help_text="A catalog model or one of your own profiles.")
    gpu = forms.ChoiceField(label="GPU", help_text="Memory as vLLM sees it (GiB = 2³⁰ bytes) and the catalog's "
                                                   "lowest price per GPU-hour ($/h).")
    num_gpus = knob_field("num_gpus")
    tensor_parallel_size = knob_field("tensor_parallel_size")
    pipeline_parallel_size = knob_field("pipeline_parallel_size")
    data_parallel_size = knob_field("data_parallel_size")
    enable_expert_parallel = knob_field("enable_expert_parallel")
    dtype = knob_field("dtype")
    kv_cache_dtype = knob_field("kv_cache_dtype")
    block_size = knob_field("block_size")
    gpu_memory_utilization = knob_field("gpu_memory_utilization")
    max_model_len = knob_field("max_model_len")
    max_num_batched_tokens = knob_field("max_num_batched_tokens")
    cpu_tier_gib = knob_field("cpu_tier_gib")
    vllm_log = forms.CharField(
        label="Calibrate from a vLLM log", required=False, max_length=LIMITS["vllm_log"],
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "Model loading took 14.99 GiB …\n"
                                                              "Available KV cache memory: 55.26 GiB"}),
        help_text="Optional: paste the start-up lines 'Model loading took … GiB' and 'Available KV cache memory: "
                  "… GiB' of your own run; their figures replace the modelled ones.")
    weights_gib = knob_field("weights_gib")
    available_kv_gib = knob_field("available_kv_gib")
    quantization = knob_field("quantization")
    max_loras = knob_field("max_loras")
    max_lora_rank = knob_field("max_lora_rank")
    speculative_method = forms.ChoiceField(
        label="Speculative decoding", required=False,
        choices=[("", "off"), ("eagle", "EAGLE head"), ("eagle3", "EAGLE-3 head"), ("mtp", "MTP layer"),
                 ("draft_model", "draft model"), ("ngram", "n-gram lookup")],
        help_text="vLLM --speculative-config method: the drafter's weights and KV come out of the KV cache.")
    num_speculative_tokens = knob_field("num_speculative_tokens")
    draft_model = forms.ChoiceField(
        label="Draft model", required=False,
        help_text="Only for the draft model method: a smaller model of the same vocabulary.")
    vllm_version = knob_field("vllm_version")
    lengths = forms.CharField(
        label="Request lengths (paged vs naive)", required=False, max_length=200,
        help_text="Token lengths of the requests for the fragmentation chart, e.g. 'lognormal:2048,1536' "
                  "(mean, std), 'uniform:1000,2000', 'const:1024'.")

    #: Fields shown under "Calibration" (the rest are the deployment).
    calibration_fields = ("vllm_log", "weights_gib", "available_kv_gib")
    #: The dozen inputs most people change, on the form's first screen; the others sit behind "More options"
    #: (``templates/planner/sizing_form.html``, ``{% form_sections %}``), open whenever one of them is set or wrong.
    #: Data parallelism and expert parallelism (docs/moe_parallelism.md) sit behind "More options" with the rest.
    basic_fields = ("model", "gpu", "num_gpus", "tensor_parallel_size", "pipeline_parallel_size", "dtype",
                    "quantization", "kv_cache_dtype", "gpu_memory_utilization", "max_model_len",
                    "max_num_batched_tokens", "block_size")

    def __init__(self, data=None, *, user=None, **kwargs):
        self.user = user
        self.model_options = selectors.model_profile_options(user=user)
        self.gpu_options = selectors.gpu_profile_options(user=user)
        super().__init__(data, **kwargs)
        self.fields["model"].choices = self.model_options.choices
        self.fields["draft_model"].choices = [("", "—"), *self.model_options.choices]
        if "gpu" in self.fields:
            self.fields["gpu"].choices = gpu_choices(self.gpu_options)

    # -- binding ------------------------------------------------------------

    @classmethod
    def defaults(cls, *, model_default: str | None, gpu_default: str | None) -> dict[str, str]:
        d = dict(DEFAULTS)
        if model_default:
            d["model"] = model_default
        if gpu_default:
            d["gpu"] = gpu_default
        return d

    @classmethod
    def from_query(cls, query: QueryDict, *, user=None) -> SizingForm:
        """Bind to a query string, with defaults for every missing knob (an empty query = the default plan)."""
        form = cls(None, user=user)
        data = query.copy()
        for key, value in cls.defaults(model_default=form.model_options.default,
                                       gpu_default=form.gpu_options.default).items():
            if key in form.fields and key not in data:
                data[key] = value
        form.data = data
        form.is_bound = True
        return form

    # -- validation ---------------------------------------------------------

    def clean_vllm_version(self) -> str | None:
        """(checked by its knob's rule) without the leading ``v``; blank = the newest."""
        return (self.cleaned_data.get("vllm_version") or "").strip().lstrip("v") or None

    def clean_quantization(self) -> str | None:
        return self.cleaned_data.get("quantization") or None

    def clean_lengths(self) -> str:
        text = (self.cleaned_data.get("lengths") or "").strip() or DEFAULT_LENGTHS
        try:
            lengths_distribution(text)
        except PlanInputError as exc:
            raise forms.ValidationError(exc.errors["lengths"]) from None
        return text

    def model_spec(self):
        return self.model_options.rows[self.cleaned_data["model"]].to_spec()

    def gpu_spec(self):
        return self.gpu_options.rows[self.cleaned_data["gpu"]].to_spec()

    def knobs(self) -> dict[str, Any]:
        """The cleaned knobs as :func:`~planner.sizing.services.plan_deployment` takes them."""
        c = self.cleaned_data
        keys = ("num_gpus", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                "enable_expert_parallel", "dtype", "kv_cache_dtype",
                "block_size", "gpu_memory_utilization", "max_model_len", "max_num_batched_tokens", "cpu_tier_gib",
                "weights_gib", "available_kv_gib", "vllm_log", "quantization", "max_loras", "max_lora_rank",
                "vllm_version")
        knobs = {k: c.get(k) for k in keys if k in c}
        # (a drafter already refused at its fields is left out: the other knobs are still checked)
        knobs["speculative"] = None if set(SPECULATIVE_FIELDS.values()) & set(self.errors) else self.draft_spec()
        return knobs

    def draft_spec(self) -> DraftSpec | None:
        """The speculative decoding fields as a :class:`DraftSpec` (None when off)."""
        c = self.cleaned_data
        method, k = c.get("speculative_method"), c.get("num_speculative_tokens")
        if not method or not k:
            return None
        slug = c.get("draft_model")
        draft = self.model_options.rows[slug].to_spec() if slug and method == "draft_model" else None
        return DraftSpec(method=method, num_speculative_tokens=k, draft_model=draft)

    def clean(self):
        data = super().clean()
        if data.get("speculative_method") and data.get("num_speculative_tokens"):
            try:
                self.draft_spec()
            except SpecError as exc:
                attach_errors(self, exc, where=SPECULATIVE_FIELDS, paths="never", words=capitalized)
        return data

    def add_plan_errors(self, errors: dict[str, list[str]]) -> None:
        """Attach service errors to their fields (unknown names go to the top of the form); a field that shows
        its own error already keeps only that one."""
        attach_errors(self, errors, where={"non_field_errors": None, **SPECULATIVE_FIELDS}, by_name=True,
                      prefixes=(("model", "model"),), paths="never")


#: Speculative decoding error paths -> the sizing form's fields.
SPECULATIVE_FIELDS = {"speculative.method": "speculative_method",
                      "speculative.num_speculative_tokens": "num_speculative_tokens",
                      "speculative.draft_model": "draft_model"}


class CompareForm(SizingForm):
    """The same model and knobs on 2 to 4 GPUs."""

    basic_fields = ("model", "gpus", *SizingForm.basic_fields[2:])

    gpus = forms.MultipleChoiceField(
        label="GPUs to compare", widget=forms.CheckboxSelectMultiple,
        help_text="Pick 2 to 4 GPUs; each gets the same model and knobs.")

    def __init__(self, data=None, *, user=None, **kwargs):
        super().__init__(data, user=user, **kwargs)
        del self.fields["gpu"]
        del self.fields["lengths"]
        self.fields["gpus"].choices = gpu_choices(self.gpu_options)
        # put the GPU picker right after the model
        order = ["model", "gpus"] + [f for f in self.fields if f not in ("model", "gpus")]
        self.order_fields(order)

    @classmethod
    def defaults(cls, *, model_default, gpu_default) -> dict[str, str]:
        d = super().defaults(model_default=model_default, gpu_default=gpu_default)
        d.pop("gpu", None)
        return d

    @classmethod
    def from_query(cls, query: QueryDict, *, user=None) -> CompareForm:
        form = super().from_query(query, user=user)
        if "gpus" not in query:
            form.data.setlist("gpus", default_compare_gpus(form.gpu_options))
        return form

    def clean_gpus(self) -> list[str]:
        gpus = list(dict.fromkeys(self.cleaned_data["gpus"]))
        if not (2 <= len(gpus) <= LIMITS["compare_gpus"]):
            raise forms.ValidationError(f"Pick 2 to {LIMITS['compare_gpus']} GPUs (you picked {len(gpus)}).")
        return gpus

    def gpu_specs(self):
        return [self.gpu_options.rows[s].to_spec() for s in self.cleaned_data["gpus"]]


def gpu_choice_label(row) -> str:
    """A GPU as an option, short enough for the form column: "H100 SXM5 80GB · 79.2 GiB · $3.78/h"."""
    parts = [row.name, f"{row.memory_gib:,.1f} GiB"]
    if row.price_per_hour:
        parts.append(f"${row.price_per_hour:,.2f}/h")
    return " · ".join(parts) + ("" if row.is_catalog else " (yours)")


def gpu_choices(options: selectors.ProfileOptions) -> list[tuple[str, str]]:
    return [(slug, gpu_choice_label(row)) for slug, row in options.rows.items()]


def default_compare_gpus(options: selectors.ProfileOptions) -> list[str]:
    """H100 SXM, H200 and A100 80GB when the catalog has them, else the first three GPUs."""
    wanted = ("H100 SXM", "H200", "A100 SXM4 80GB")
    picked = []
    for w in wanted:
        for slug, row in options.rows.items():
            if row.is_catalog and row.name.startswith(w) and slug not in picked:
                picked.append(slug)
                break
    if len(picked) < 2:
        picked = list(options.rows)[:3]
    return picked


# --------------------------------------------------------------------------- replicas for a rate

#: Routing policies of the replicas page: (value, label). "weighted" takes its scorers from a text field.
ROUTING_CHOICES = [
    ("round-robin", "Round-robin"),
    ("least-loaded", "Least-loaded"),
    ("prefix-affinity", "Prefix-affinity"),
    ("weighted", "Weighted (scorers below)"),
]
PERCENTILE_CHOICES = [("p50", "p50 (median)"), ("p90", "p90"), ("p99", "p99")]

#: The drafters the replicas page offers (a draft model needs its own profile and sizing: the API and the
#: sizing page take it; a simulated deployment here takes the heads and n-gram lookup).
SPEC_METHOD_CHOICES = [("", "off"), ("eagle", "EAGLE head"), ("eagle3", "EAGLE-3 head"), ("mtp", "MTP layer"),
                       ("ngram", "n-gram lookup")]

#: What an empty replicas form stands for (model and GPU come from the catalog: Llama 3.1 8B on one H100).
REPLICAS_DEFAULTS: dict[str, str] = {
    "tensor_parallel_size": "1",
    "sampling": "",
    "rate": "20",
    "num_requests": "300",
    "prompt_mean": "2000",
    "prompt_std": "400",
    "output_mean": "300",
    "output_std": "60",
    "routing": "round-robin",
    "ttft_ms": "500",
    "itl_ms": "50",
    "percentile": "p90",
    "max_instances": "16",
}
#: The query key that says the form was submitted (the link from the sizing page only pre-fills it).
REPLICAS_SUBMITTED = "rate"


def _tokens_field(label: str, min_value: int, help_text: str) -> forms.IntegerField:
    """A whole number of tokens, from ``min_value`` to 1,000,000."""
    return forms.IntegerField(label=label, min_value=min_value, max_value=1_000_000, help_text=help_text,
                              widget=forms.NumberInput(attrs=_NUMBER))


class ReplicasForm(forms.Form):
    """How many replicas for this traffic: one deployment, a Poisson workload in seconds, latency targets.

    :meth:`to_request` turns it into the input of :func:`planner.sweeps.replicas.find_replicas`;
    :meth:`add_definition_errors` puts that function's field paths back on the fields.
    """

    model = forms.ChoiceField(label="Model", help_text="A catalog model or one of your own profiles.")
    gpu = forms.ChoiceField(label="GPU", help_text="Memory as vLLM sees it (GiB) and the catalog's lowest price "
                                                   "per GPU-hour ($/h).")
    tensor_parallel_size = knob_field(
        "tensor_parallel_size", label="GPUs per replica (TP)",
        help_text="Tensor parallel size of one replica, in GPUs; must divide the attention heads.")
    data_parallel_size = knob_field("data_parallel_size", required=False)  # a replica: one DP group (issue 34)
    enable_expert_parallel = knob_field("enable_expert_parallel")
    sampling = sampling_field()
    rate = forms.FloatField(
        label="Request rate (requests/s)", min_value=0.001, max_value=100_000,
        error_messages={"min_value": "Must be more than 0 requests per second (at least 0.001)."},
        help_text="Mean arrival rate of your traffic, in requests per second (Poisson arrivals).",
        widget=forms.NumberInput(attrs={"step": "any", **_NUMBER}))
    num_requests = forms.IntegerField(
        label="Requests simulated", min_value=10, max_value=2_000,
        help_text="Requests in the simulated workload, 10 to 2,000 (each replica count tried simulates them "
                  "all; 300 takes a few seconds).", widget=forms.NumberInput(attrs=_NUMBER))
    prompt_mean = _tokens_field("Prompt length, mean (tokens)", 1,
                                "Mean prompt length in tokens (normal distribution).")
    prompt_std = _tokens_field("Prompt length, std (tokens)", 0,
                               "Standard deviation of the prompt length, in tokens (0 = fixed).")
    output_mean = _tokens_field("Output length, mean (tokens)", 1, "Mean number of generated tokens per request.")
    output_std = _tokens_field("Output length, std (tokens)", 0,
                               "Standard deviation of the output length, in tokens (0 = fixed).")
    prefix_length = forms.IntegerField(
        label="Shared prefix (tokens)", required=False, min_value=1, max_value=1_000_000,
        help_text="Optional: a system prompt some requests share, in tokens, before their own prompt.",
        widget=forms.NumberInput(attrs=_NUMBER))
    prefix_fraction = forms.FloatField(
        label="Requests sharing it (fraction)", required=False, min_value=0, max_value=1,
        help_text="0 to 1: the share of requests that start with the prefix (blank = 1, all of them).",
        widget=forms.NumberInput(attrs={"step": "any", **_NUMBER}))
    routing = forms.ChoiceField(label="Routing policy", choices=ROUTING_CHOICES,
                                help_text="How the router picks a replica: each in turn (round-robin), the "
                                          "one with the fewest requests in flight (least-loaded), the one "
                                          "holding the prompt's prefix (prefix-affinity), or scorers "
                                          "combined (weighted).")
    routing_weights = forms.CharField(
        label="Weighted scorers", required=False, max_length=200,
        widget=forms.TextInput(attrs={"placeholder": "prefix-affinity:3,queue-depth:1"}),
        help_text="For “Weighted” only: scorer:weight pairs, comma-separated, e.g. "
                  "prefix-affinity:3,queue-depth:1.")
    ttft_ms = forms.FloatField(
        label="Time to first token target (ms)", required=False, min_value=0.001, max_value=3_600_000,
        help_text="TTFT SLO in milliseconds: queueing plus prefill. Blank = no TTFT target.",
        widget=forms.NumberInput(attrs={"step": "any", **_NUMBER}))
    itl_ms = forms.FloatField(
        label="Inter-token latency target (ms)", required=False, min_value=0.001, max_value=3_600_000,
        help_text="ITL SLO in milliseconds: the gap between two generated tokens. Blank = no ITL target.",
        widget=forms.NumberInput(attrs={"step": "any", **_NUMBER}))
    percentile = forms.ChoiceField(label="Percentile", choices=PERCENTILE_CHOICES,
                                   help_text="Which percentile of TTFT and ITL over all requests must meet "
                                             "the targets.")
    max_instances = forms.IntegerField(
        label="Most replicas to try", min_value=1, max_value=64,
        help_text="Largest replica count the search tries, 1 to 64.", widget=forms.NumberInput(attrs=_NUMBER))
    prefill_instances = forms.IntegerField(
        label="Prefill instances", required=False, min_value=1, max_value=64,
        help_text="Optional: compare a disaggregated deployment (this many prefill instances plus the decode "
                  "instances below) with as many aggregated replicas. Blank = no comparison.",
        widget=forms.NumberInput(attrs=_NUMBER))
    decode_instances = forms.IntegerField(
        label="Decode instances", required=False, min_value=1, max_value=64,
        help_text="Decode instances of the disaggregated deployment, 1 to 64 (each the same GPUs and TP).",
        widget=forms.NumberInput(attrs=_NUMBER))
    link_gbps = forms.FloatField(
        label="KV link (GB/s)", required=False, min_value=0.001, max_value=100_000,
        error_messages={"min_value": "Must be more than 0 GB/s (a link of zero bandwidth moves no KV)."},
        help_text="Bandwidth a decode instance receives KV at, in GB/s (one 400 Gb/s NIC is 50 GB/s; blank = 50).",
        widget=forms.NumberInput(attrs={"step": "any", **_NUMBER}))

    speculative_method = forms.ChoiceField(
        label="Speculative decoding", required=False, choices=SPEC_METHOD_CHOICES,
        help_text="Optional: vLLM's drafter on every replica; an EAGLE/EAGLE-3 head or an MTP layer takes its "
                  "weights and KV out of the KV cache (docs/speculative_decoding.md). Blank = off.")
    num_speculative_tokens = knob_field(
        "num_speculative_tokens",
        help_text=f"num_speculative_tokens, 0 to {MAX_SPECULATIVE_TOKENS} (0 = the engine without speculation).")
    acceptance_rate = forms.FloatField(
        label="Draft acceptance rate", required=False, min_value=0, max_value=1,
        error_messages={"min_value": "Must be a fraction from 0 to 1.", "max_value": "Must be a fraction from 0 to 1."},
        help_text="0 to 1: the chance a draft is accepted when the drafts before it were (measure it: vLLM's "
                  "spec-decode acceptance metrics).", widget=forms.NumberInput(attrs={"step": "any", **_NUMBER}))

    #: Fields shown under "Workload", "Routing" and "Targets" (the rest are the deployment).
    GROUPS = {
        "deployment": ("model", "gpu", "tensor_parallel_size", "data_parallel_size", "enable_expert_parallel",
                       "sampling"),
        "speculative": ("speculative_method", "num_speculative_tokens", "acceptance_rate"),
        "workload": ("rate", "num_requests", "prompt_mean", "prompt_std", "output_mean", "output_std",
                     "prefix_length", "prefix_fraction"),
        "routing": ("routing", "routing_weights", "max_instances"),
        "targets": ("ttft_ms", "itl_ms", "percentile"),
        "disaggregated": ("prefill_instances", "decode_instances", "link_gbps"),
    }
    #: find_replicas' error paths -> form field (first match by prefix wins; the rest go to the form).
    ERROR_FIELDS = (
        ("model", "model"), ("gpu", "gpu"), ("deployment.tensor_parallel_size", "tensor_parallel_size"),
        ("deployment.data_parallel_size", "data_parallel_size"),
        ("deployment.enable_expert_parallel", "enable_expert_parallel"), ("deployment.sampling", "sampling"),
        ("workload.spec.arrival", "rate"), ("workload.spec.n", "num_requests"),
        ("workload.spec.prompt", "prompt_mean"), ("workload.spec.output", "output_mean"),
        ("workload.spec.prefixes", "prefix_length"), ("slo.ttft_s", "ttft_ms"), ("slo.itl_s", "itl_ms"),
        ("slo.percentile", "percentile"), ("slo", "ttft_ms"), ("cluster.routing", "routing"),
        ("max_instances", "max_instances"), ("disaggregated.prefill_instances", "prefill_instances"),
        ("disaggregated.decode_instances", "decode_instances"), ("disaggregated.link_gbps", "link_gbps"),
        ("engine.speculative.num_speculative_tokens", "num_speculative_tokens"),
        ("engine.speculative.acceptance_rate", "acceptance_rate"), ("engine.speculative", "speculative_method"),
        ("speculative.num_speculative_tokens", "num_speculative_tokens"),
        ("speculative.acceptance_rate", "acceptance_rate"), ("speculative", "speculative_method"),
    )

    def __init__(self, data=None, *, user=None, **kwargs):
        self.user = user
        self.model_options = selectors.model_profile_options(user=user)
        self.gpu_options = selectors.gpu_profile_options(user=user)
        super().__init__(data, **kwargs)
        self.fields["model"].choices = self.model_options.choices
        self.fields["gpu"].choices = gpu_choices(self.gpu_options)

    @classmethod
    def from_query(cls, query: QueryDict, *, user=None) -> tuple[ReplicasForm, bool]:
        """``(form, submitted)``: bound to the query when it was submitted, else unbound and pre-filled.

        The sizing page links here with only the model, GPU and TP: those pre-fill the form,
        the simulation waits for the person to give the traffic and press the button.
        """
        form = cls(None, user=user)
        values = dict(REPLICAS_DEFAULTS)
        if form.model_options.default:
            values["model"] = form.model_options.default
        if form.gpu_options.default:
            values["gpu"] = form.gpu_options.default
        if REPLICAS_SUBMITTED not in query:
            initial = {**values, **{k: query[k] for k in ("model", "gpu", "tensor_parallel_size") if query.get(k)}}
            return cls(None, user=user, initial=initial), False
        data = query.copy()
        for key, value in values.items():
            if key not in data:
                data[key] = value
        form.data = data
        form.is_bound = True
        return form, True

    @property
    def group(self) -> dict[str, list]:
        """Bound fields by section (``form.group.workload`` in the template)."""
        return {name: [self[f] for f in fields] for name, fields in self.GROUPS.items()}

    def clean(self):
        data = super().clean()
        if not {"ttft_ms", "itl_ms"} & set(self.errors) and data.get("ttft_ms") is None and data.get("itl_ms") is None:
            self.add_error("ttft_ms", "Give a TTFT target, an ITL target or both (in milliseconds).")
        if data.get("routing") == "weighted" and not (data.get("routing_weights") or "").strip():
            self.add_error("routing_weights", "Give the scorers for a weighted policy, e.g. "
                                              "prefix-affinity:3,queue-depth:1.")
        if data.get("prefix_fraction") is not None and not data.get("prefix_length"):
            self.add_error("prefix_length", "Give the prefix length in tokens (or clear the fraction).")
        self._clean_speculative(data)
        for one, other in (("prefill_instances", "decode_instances"), ("decode_instances", "prefill_instances")):
            if data.get(one) and not data.get(other) and other not in self.errors:
                self.add_error(other, "Give both prefill and decode instances to compare a disaggregated "
                                      "deployment (or clear both).")
        return data

    def _clean_speculative(self, data: dict) -> None:
        """A drafter needs k; k > 0 needs an acceptance rate; k or a rate without a drafter is an error."""
        if any(f in self.errors for f in ("speculative_method", "num_speculative_tokens", "acceptance_rate")):
            return
        method, k, rate = data.get("speculative_method"), data.get("num_speculative_tokens"), data.get("acceptance_rate")
        if not method:
            if k or rate is not None:
                self.add_error("speculative_method", "Choose the drafter (or clear k and the acceptance rate).")
            return
        if k is None:
            self.add_error("num_speculative_tokens", "Give k, the draft tokens per step (0 to "
                                                     f"{MAX_SPECULATIVE_TOKENS}).")
        elif k > 0 and rate is None:
            self.add_error("acceptance_rate", "Give the acceptance rate (0 to 1): it decides how many drafts "
                                              "each step keeps.")

    def speculative(self) -> dict[str, Any] | None:
        """The engine's ``speculative`` object (``docs/speculative_decoding.md``), or None when off."""
        c = self.cleaned_data
        if not c.get("speculative_method") or {"speculative_method", "num_speculative_tokens",
                                                "acceptance_rate"} & set(self.errors):
            return None
        out: dict[str, Any] = {"method": c["speculative_method"], "num_speculative_tokens": c["num_speculative_tokens"]}
        if c.get("acceptance_rate") is not None:
            out["acceptance_rate"] = c["acceptance_rate"]
        return out

    def disaggregated(self) -> dict[str, Any] | None:
        """The ``disaggregated`` object of the comparison (:mod:`planner.sweeps.disaggregated`), or None."""
        c = self.cleaned_data
        if not (c.get("prefill_instances") and c.get("decode_instances")):
            return None
        return {"prefill_instances": c["prefill_instances"], "decode_instances": c["decode_instances"],
                "routing": self.routing_policy(), "link_gbps": c.get("link_gbps") or 50.0}

    def routing_policy(self) -> str:
        """The policy as the router reads it: ``round-robin`` or ``weighted:prefix-affinity:3,...``."""
        c = self.cleaned_or_default()
        if c["routing"] != "weighted":
            return c["routing"]
        weights = re.sub(r"\s+", "", c.get("routing_weights") or "")
        return weights if weights.startswith("weighted:") else f"weighted:{weights}"

    def cleaned_or_default(self) -> dict[str, Any]:
        """The cleaned values, a refused field standing at its default (:data:`REPLICAS_DEFAULTS`), so that
        the search's own checks can report the other fields in the same answer."""
        out: dict[str, Any] = {"model": self.model_options.default, "gpu": self.gpu_options.default}
        for name, raw in REPLICAS_DEFAULTS.items():
            if name in self.fields and name not in self.cleaned_data:
                try:
                    out[name] = self.fields[name].clean(raw)
                except forms.ValidationError:
                    pass
        return {**out, **self.cleaned_data}

    def to_request(self) -> dict[str, Any]:
        """The input of :func:`planner.sweeps.replicas.find_replicas` (as ``POST /api/replicas/`` takes it)."""
        c = self.cleaned_or_default()
        spec: dict[str, Any] = {
            "n": c["num_requests"],
            "prompt": {"kind": "normal", "mean": c["prompt_mean"], "std": c["prompt_std"]},
            "output": {"kind": "normal", "mean": c["output_mean"], "std": c["output_std"]},
            "arrival": {"kind": "poisson", "rate": c["rate"], "unit": "s"},
        }
        if c.get("prefix_length"):
            fraction = c.get("prefix_fraction")
            spec["prefixes"] = [{"length": c["prefix_length"], "fraction": 1.0 if fraction is None else fraction}]
        slo: dict[str, Any] = {"percentile": c["percentile"]}
        if c.get("ttft_ms") is not None:
            slo["ttft_s"] = c["ttft_ms"] / 1000
        if c.get("itl_ms") is not None:
            slo["itl_s"] = c["itl_ms"] / 1000
        out = {
            "model": c["model"], "gpu": c["gpu"],
            "deployment": {"tensor_parallel_size": c["tensor_parallel_size"],
                           **({"sampling": c["sampling"]} if c.get("sampling") else {}),
                           **({"data_parallel_size": c["data_parallel_size"]} if (c.get("data_parallel_size") or 1) > 1
                              else {}),
                           **({"enable_expert_parallel": True} if c.get("enable_expert_parallel") else {})},
            "workload": {"spec": spec, "seed": 0},
            "slo": slo,
            "cluster": {"routing": self.routing_policy()},
            "max_instances": c["max_instances"],
        }
        if self.speculative() is not None:
            out["engine"] = {"speculative": self.speculative()}
        return out

    def add_definition_errors(self, errors: dict[str, list[str]]) -> None:
        """Attach ``DefinitionError.errors`` to their fields; unknown paths go to the top of the form."""
        weighted = self.cleaned_data.get("routing") == "weighted"
        attach_errors(self, errors, paths="top",
                      prefixes=[(p, "routing_weights" if f == "routing" and weighted else f) for p, f in self.ERROR_FIELDS],
                      words=lambda m, field: capitalized(m) if field else m)
