"""The sweep form: a browser-friendly face on the JSON definition (planner.sweeps.definition)."""

from __future__ import annotations

import re

from django import forms

from config.form_errors import attach_errors
from config.json_input import finite_number
from gpuprofiles.models import GpuProfile, ModelProfile
from gpuprofiles.selectors import visible_profiles
from planner.errors import field_and_message
from planner.sampling_words import sampling_field
from planner.sizing.forms import gpu_choice_label
from planner.sizing.selectors import DEFAULT_GPU_PREFIXES, DEFAULT_MODEL_NAMES
from planner.sweeps import disaggregated as disagg
from planner.sweeps.axes import AXES, LATER_AXES
from planner.sweeps.labels import axis_title, metric_title
from planner.sweeps.limits import MAX_SWEEP_INSTANCES
from planner.sweeps.sections import CLIFF_METRICS
from simulator.base.specs import DEPLOYMENT_LIMITS as TOPS  # the spec's ranges: written once
from simulator.workload import ArrivalProcess, WorkloadError, parse_arrival
from simulator.workload.distributions import distribution_from_dict
from simulator.workload.requests import MAX_TOKENS

#: The knobs a sweep can vary, as a person reads them, with units ("Max running requests (max_num_seqs)").
_AXIS_CHOICE_LABELS = {"rate": "Request rate (requests per arrival unit)",
                       "cpu_tier_gib": "CPU KV tier (GiB; 0 = none)"}
AXIS_CHOICES = [(k, _AXIS_CHOICE_LABELS.get(k) or axis_title(k)) for k in AXES]
CLIFF_CHOICES = [(k, c) for k, c in AXIS_CHOICES if AXES[k].get("cliff")]
CLIFF_METRIC_CHOICES = [(k, metric_title(k)) for k in CLIFF_METRICS]

#: What a new sweep starts from: Llama 3.1 8B on one H100, KV blocks from far below to near its sized cache.
DEFAULT_AXIS_VALUES = "1000, 2000, 4000, 8000, 16000"


def _profile_choices(kind: str, user) -> tuple[list[tuple[str, str]], str | None]:
    """``(choices, default slug)`` of the catalog's and the user's models or GPUs.

    The default is the sizing page's: Llama 3.1 8B, an H100 SXM.
    """
    try:
        cls = ModelProfile if kind == "model" else GpuProfile
        rows = list(visible_profiles(cls, user=user).order_by("name"))
    except Exception:  # noqa: BLE001 - the catalog may be empty or not migrated yet
        return [], None
    if kind == "model":
        choices = [(r.slug, f"{r.name}{' (yours)' if not r.is_catalog else ''}") for r in rows]
        default = next((r.slug for n in DEFAULT_MODEL_NAMES for r in rows if r.is_catalog and r.name == n), None)
    else:
        choices = [(r.slug, gpu_choice_label(r)) for r in rows]
        default = next((r.slug for p in DEFAULT_GPU_PREFIXES for r in rows
                        if r.is_catalog and r.name.startswith(p)), None)
    return choices, default


#: Examples for the distribution kinds, used when a formula has the wrong number of numbers.
_DIST_EXAMPLES = {"const": "const:512", "uniform": "uniform:256,1024", "normal": "normal:512,128 (mean, spread)",
                  "lognormal": "lognormal:512,256 (mean, spread)", "poisson": "poisson:4 (requests per unit)",
                  "gamma": "gamma:4,2 (rate, variation)", "every": "every:0.5"}


def human_message(message: str) -> str:
    """A simulator or definition message in words: no "argument(s)", the search's bounds by their labels. (The
    definition's messages carry no paths: a path is the error's field, never in its words.)"""
    m = re.search(r"\b([a-z-]+) takes (\d+) (?:argument|number)\(s\)(?: \(([^)]*)\))?, got (\d+)", message)
    if m:
        kind, want, names, got = m.groups()
        example = _DIST_EXAMPLES.get(kind, "")
        noun = "number" if want == "1" else "numbers"
        what = f" ({names})" if names else ""
        return (f"“{kind}” needs {want} {noun}{what} after the colon, not {got}"
                + (f": for example {example}" if example else ""))
    message = message.replace("greater than lo", "greater than “Search from”").replace(
        "smaller than hi - lo", "smaller than the searched range")
    return message[:1].upper() + message[1:] if message else message


def _workload_initial(wl: dict) -> dict:
    """A generated workload's fields as the sweep form shows them (a trace's are left at their defaults)."""
    spec = wl.get("spec")
    if not isinstance(spec, dict):
        return {}
    out: dict = {"seed": wl["seed"]} if isinstance(wl.get("seed"), int) else {}
    if spec.get("n") is not None:
        out["n"] = spec["n"]
    for k in ("prompt", "output"):
        if spec.get(k) is not None:
            try:
                out[k] = spec[k] if isinstance(spec[k], str) else distribution_from_dict(spec[k], name=k).to_string()
            except (WorkloadError, ValueError, TypeError):
                pass
    if spec.get("arrival") is not None:
        try:
            arrival = ArrivalProcess.from_dict(spec["arrival"])
            out["arrival"], out["arrival_unit"] = arrival.to_string(), arrival.unit
        except (WorkloadError, ValueError, TypeError):
            pass
    prefixes = spec.get("prefixes") or []
    if prefixes and isinstance(prefixes[0], dict):
        out["prefix_length"], out["prefix_fraction"] = prefixes[0].get("length"), prefixes[0].get("fraction")
    return out


def _axes_initial(axes: list) -> dict:
    """The grid's axes as the form's fields: values comma-separated (routing policies by spaces), or a range."""
    out: dict = {}
    for key, axis in zip(("axis1", "axis2"), axes):
        if not isinstance(axis, dict) or not axis.get("param"):
            continue
        out[f"{key}_param"] = axis["param"]
        if isinstance(axis.get("values"), list):
            sep = " " if axis["param"] == "routing" else ", "
            out[f"{key}_values"] = sep.join(str(v).lower() if isinstance(v, bool) else str(v) for v in axis["values"])
        elif key == "axis1":
            out["axis1_values"] = ""
            out.update({f"axis1_{k}": axis[k] for k in ("start", "stop", "steps", "scale") if axis.get(k) is not None})
    return out


class SweepForm(forms.Form):
    """A sweep as a person fills it in; :meth:`to_definition` turns it into the JSON definition."""

    # -- scenario
    name = forms.CharField(required=False, max_length=200, label="Name",
                           help_text="Optional; shown on the sweep, its report and the lists.")
    mode = forms.ChoiceField(choices=[("grid", "Grid of points"), ("cliff", "Find the cliff (bisection)")],
                             initial="grid", label="Mode",
                             help_text="A grid simulates every point of the axes below; “find the cliff” "
                                       "bisects one knob until the preemption cliff is bracketed.")
    model = forms.ChoiceField(required=False, label="Model",
                              help_text="With a GPU, sizes the KV cache as vLLM would. “None” = engine only: "
                                        "give KV blocks.")
    gpu = forms.ChoiceField(required=False, label="GPU",
                            help_text="Memory as vLLM sees it (GiB) and the catalog's price per GPU-hour.")
    tensor_parallel_size = forms.IntegerField(
        min_value=1, max_value=TOPS["tensor_parallel_size"], initial=1, label="GPUs (tensor parallel size)",
        help_text="GPUs one engine's layers are split across (1 = one GPU); must divide the attention heads.")
    data_parallel_size = forms.IntegerField(
        required=False, min_value=1, max_value=TOPS["data_parallel_size"], initial=1,
        label="Data-parallel ranks (DP)",
        help_text="vLLM's --data-parallel-size: ranks of TP GPUs each, each its own engine and KV pool; an MoE "
                  "model's ranks step together. GPUs = TP × PP × DP.")
    enable_expert_parallel = forms.BooleanField(
        required=False, label="Expert parallelism (EP)",
        help_text="vLLM's --enable-expert-parallel: whole experts spread over TP × DP GPUs (MoE models only).")
    gpu_memory_utilization = forms.FloatField(
        min_value=0.05, max_value=1.0, initial=0.9, label="GPU memory utilization",
        help_text="Fraction of each GPU's memory vLLM may use, 0.05 to 1 (vLLM default 0.9).",
        widget=forms.NumberInput(attrs={"step": "0.01"}))
    sampling = sampling_field()
    block_size = forms.IntegerField(min_value=1, max_value=TOPS["block_size"], initial=16, label="Block size (tokens)",
                                    help_text="Tokens per KV block (vLLM default 16).")
    num_gpu_blocks = forms.IntegerField(
        required=False, min_value=2, label="KV blocks",
        help_text="KV cache per engine, in blocks. Blank = as sized from the model and GPU; required without "
                  "them.")
    max_num_seqs = forms.IntegerField(
        required=False, min_value=1, max_value=TOPS["max_num_seqs"], label="Max running requests (max_num_seqs)",
        help_text="Requests the scheduler runs at once, in requests. Blank = vLLM's default for the "
                  "deployment (256 without a model and GPU).")
    max_num_batched_tokens = forms.IntegerField(
        required=False, min_value=1, max_value=TOPS["max_num_batched_tokens"], label="Max batched tokens per step (max_num_batched_tokens)",
        help_text="Tokens one engine step may process, in tokens. Blank = vLLM's default for the GPU "
                  "(2,048 without a model and GPU).")
    enable_prefix_caching = forms.BooleanField(
        required=False, initial=True, label="Prefix caching",
        help_text="Reuse the KV blocks of shared prompt prefixes (vLLM default: on).")
    speculative_method = forms.ChoiceField(
        required=False, label="Speculative decoding",
        choices=[("", "off"), ("eagle", "EAGLE head"), ("eagle3", "EAGLE-3 head"), ("mtp", "MTP layer"),
                 ("ngram", "n-gram lookup")],
        help_text="vLLM's drafter; with a model and a GPU its weights and KV come out of the KV cache "
                  "(docs/speculative_decoding.md).")
    num_speculative_tokens = forms.IntegerField(
        required=False, min_value=0, max_value=16, label="Draft tokens per step (k)",
        help_text="num_speculative_tokens, 0 to 16 (sweep it as an axis too).")
    acceptance_rate = forms.FloatField(
        required=False, min_value=0, max_value=1, label="Draft acceptance rate",
        help_text="Probability a draft is accepted when the drafts before it were, 0 to 1.",
        widget=forms.NumberInput(attrs={"step": "0.05"}))

    # -- workload
    n = forms.IntegerField(min_value=1, initial=500, label="Requests",
                           help_text="Number of requests in the generated workload.")
    prompt = forms.CharField(initial="normal:512,128", label="Prompt length (tokens)",
                             help_text="Distribution in tokens: const:N, uniform:A,B, normal:MEAN,STD, "
                                       "lognormal:MEAN,STD, pareto-lognormal:….")
    output = forms.CharField(initial="normal:256,64", label="Output length (tokens)",
                             help_text="Distribution in tokens, written like the prompt length.")
    arrival = forms.CharField(initial="poisson:4", label="Arrival",
                              help_text="poisson:RATE (requests per arrival unit), gamma:RATE,CV, every:K (one "
                                        "request every K units) or burst (all at once).")
    arrival_unit = forms.ChoiceField(choices=[("s", "per second"), ("step", "per engine step")], initial="s",
                                     label="Arrival unit",
                                     help_text="What RATE and K count: engine steps, or seconds (through the "
                                               "step-time model).")
    prefix_length = forms.IntegerField(required=False, min_value=1, max_value=MAX_TOKENS, label="Shared prefix (tokens)",
                                       help_text="Optional: a prompt prefix some requests share, in tokens.")
    prefix_fraction = forms.FloatField(required=False, min_value=0, max_value=1,
                                       label="Requests sharing the prefix (fraction)",
                                       help_text="0 to 1: the share of requests that start with the prefix.")
    seed = forms.IntegerField(min_value=0, initial=0, label="Random seed",
                              help_text="The same seed makes the same workload.")
    trace = forms.FileField(required=False, label="Trace file (optional)",
                            help_text="Requests with their tokens and arrival times, replacing the generated "
                                      "workload: a Mooncake JSONL, Azure or BurstGPT CSV, vLLM bench JSON, or the "
                                      "planner's own CSV/JSONL columns. At most 4 MiB.")
    trace_format = forms.ChoiceField(
        required=False, initial="auto", label="Trace format",
        choices=[("auto", "Guess from the file"), ("mooncake", "Mooncake (JSONL, hash_ids)"),
                 ("azure", "Azure LLM inference (CSV)"), ("burstgpt", "BurstGPT (CSV)"),
                 ("vllm-bench", "vLLM bench serve result (JSON)"), ("csv", "Planner columns, CSV"),
                 ("jsonl", "Planner columns, JSONL")],
        help_text="Guessed from the content unless named (docs/traffic.md).")

    # -- grid axes
    axis1_param = forms.ChoiceField(choices=AXIS_CHOICES, initial="num_gpu_blocks", label="Axis 1",
                                    help_text="The knob to vary; its unit is in brackets.")
    axis1_values = forms.CharField(required=False, initial=DEFAULT_AXIS_VALUES, label="Axis 1 values",
                                   help_text="Comma-separated, in the knob's unit, e.g. 2000, 4000, 8000 (KV "
                                             "blocks); 0, 8, 32 (CPU KV tier, GiB; 0 = none); 1, 2, 4 "
                                             "(replicas). Routing policies are separated by spaces: "
                                             "round-robin prefix-affinity weighted:prefix-affinity:3,queue-depth:1.")
    axis1_start = forms.FloatField(required=False, label="Range start",
                                   help_text="Instead of values: the first value, in the knob's unit.")
    axis1_stop = forms.FloatField(required=False, label="Range stop",
                                  help_text="The last value, in the knob's unit.")
    axis1_steps = forms.IntegerField(required=False, min_value=1, label="Range points",
                                     help_text="How many values from start to stop (points).")
    axis1_scale = forms.ChoiceField(choices=[("linear", "linear"), ("log", "log (geometric)")], initial="linear",
                                    label="Range spacing", help_text="Even steps, or even ratios.")
    axis2_param = forms.ChoiceField(choices=[("", "— none —")] + AXIS_CHOICES, required=False,
                                    label="Axis 2 (optional)",
                                    help_text="A second knob makes a grid: every axis 1 value with every axis 2 "
                                              "value.")
    axis2_values = forms.CharField(required=False, label="Axis 2 values",
                                   help_text="Comma-separated, in the second knob's unit (routing policies: "
                                             "separated by spaces).")

    # -- replicas behind a router, and latency targets (optional)
    cluster_instances = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_SWEEP_INSTANCES, label="Replicas (instances)",
        help_text=f"Optional: identical engines behind a router, 1 to {MAX_SWEEP_INSTANCES}, for every point. "
                  "Blank = one engine (or as the Replicas axis says).")
    cluster_routing = forms.CharField(
        required=False, max_length=200, label="Routing policy",
        widget=forms.TextInput(attrs={"placeholder": "round-robin"}),
        help_text="How the router picks a replica: round-robin, least-loaded, prefix-affinity, random, or "
                  "weighted:prefix-affinity:3,queue-depth:1. Blank = round-robin.")
    slo_ttft_ms = forms.FloatField(
        required=False, min_value=0.001, max_value=3_600_000, label="TTFT target (ms)",
        help_text="Optional time-to-first-token SLO in milliseconds; with a Replicas axis the report names the "
                  "fewest replicas meeting it (arrivals per second only).",
        widget=forms.NumberInput(attrs={"step": "any"}))
    slo_itl_ms = forms.FloatField(
        required=False, min_value=0.001, max_value=3_600_000, label="ITL target (ms)",
        help_text="Optional inter-token latency SLO in milliseconds (the gap between generated tokens).",
        widget=forms.NumberInput(attrs={"step": "any"}))
    slo_percentile = forms.ChoiceField(
        choices=[("p50", "p50 (median)"), ("p90", "p90"), ("p99", "p99")], initial="p90", required=False,
        label="Target percentile", help_text="Which percentile of TTFT and ITL over all requests must meet the "
                                             "targets.")

    # -- cliff search
    cliff_param = forms.ChoiceField(choices=CLIFF_CHOICES, required=False, initial="num_gpu_blocks",
                                    label="Knob to search", help_text="Searched from low to high; unit in "
                                                                      "brackets.")
    cliff_metric = forms.ChoiceField(choices=CLIFF_METRIC_CHOICES, required=False, label="Cliff metric",
                                     help_text="What rises sharply at the cliff.")
    cliff_lo = forms.FloatField(required=False, label="Search from",
                                help_text="The lowest value, in the knob's unit (e.g. 500 blocks).")
    cliff_hi = forms.FloatField(required=False, label="Search to",
                                help_text="The highest value, in the knob's unit.")
    cliff_resolution = forms.FloatField(required=False, label="Resolution",
                                        help_text="Stop when the cliff is bracketed this finely, in the knob's "
                                                  "unit. Blank = 1/50 of the range.")
    cliff_threshold = forms.FloatField(required=False, label="Limit",
                                       help_text="The metric's level that counts as the cliff: preemptions per "
                                                 "request (default 0.02) or TTFT p99 as a factor of the lowest "
                                                 "(default 2).")

    #: definition error path prefix -> form field
    ERROR_FIELDS = [
        ("workload.spec.n", "n"), ("workload.spec.prompt", "prompt"), ("workload.spec.output", "output"),
        ("workload.spec.arrival", "arrival"), ("workload.spec.prefixes", "prefix_fraction"),
        ("workload.seed", "seed"), ("workload.trace", "trace"), ("workload.format", "trace_format"), ("engine.num_gpu_blocks", "num_gpu_blocks"),
        ("engine.max_num_seqs", "max_num_seqs"), ("engine.max_num_batched_tokens", "max_num_batched_tokens"),
        ("engine.block_size", "block_size"), ("deployment.gpu_memory_utilization", "gpu_memory_utilization"),
        ("deployment.tensor_parallel_size", "tensor_parallel_size"), ("deployment.block_size", "block_size"),
        ("deployment.data_parallel_size", "data_parallel_size"),
        ("deployment.enable_expert_parallel", "enable_expert_parallel"),
        ("deployment.sampling", "sampling"),
        ("axes[0]", "axis1_values"), ("axes[1]", "axis2_values"), ("axes", "axis1_values"),
        ("cliff.lo", "cliff_lo"), ("cliff.hi", "cliff_hi"), ("cliff.resolution", "cliff_resolution"),
        ("cliff.threshold", "cliff_threshold"), ("cliff.param", "cliff_param"), ("cliff", "cliff_lo"),
        ("model", "model"), ("gpu", "gpu"), ("name", "name"),
        ("cluster.num_instances", "cluster_instances"), ("cluster.routing", "cluster_routing"),
        ("cluster", "cluster_instances"), ("slo.ttft_s", "slo_ttft_ms"), ("slo.itl_s", "slo_itl_ms"),
        ("slo.percentile", "slo_percentile"), ("slo", "slo_ttft_ms"),
        ("disaggregated.routing", "cluster_routing"), ("disaggregated", "axis1_param"),
        ("engine.speculative.method", "speculative_method"),
        ("engine.speculative.num_speculative_tokens", "num_speculative_tokens"),
        ("engine.speculative.acceptance_rate", "acceptance_rate"), ("engine.speculative", "speculative_method"),
    ]

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        models, default_model = _profile_choices("model", user)
        gpus, default_gpu = _profile_choices("gpu", user)
        self.fields["model"].choices = [("", "— none (engine only) —")] + models
        self.fields["gpu"].choices = [("", "— none —")] + gpus
        self.fields["model"].initial = default_model
        self.fields["gpu"].initial = default_gpu

    @staticmethod
    def _values(text: str, param: str) -> list:
        # routing policies may hold commas (weighted:prefix-affinity:3,queue-depth:1): spaces separate them
        items = [x for x in re.split(r"[\s;]+" if param == "routing" else r"[,\s;]+", text.strip()) if x]
        typ = AXES[param]["type"]
        out = []
        for x in items:
            if typ is bool:
                if x.lower() not in ("true", "false", "on", "off", "1", "0", "yes", "no"):
                    raise forms.ValidationError(f"{x!r} is not true or false")
                out.append(x.lower() in ("true", "on", "1", "yes"))
            elif typ is str:
                out.append(x)
            else:
                try:
                    v = finite_number(x)  # (1e999 and 5,000 digits are refused as a JSON body's numbers are)
                except ValueError:
                    raise forms.ValidationError(f"{x[:40]!r} is not a number (or not a finite one)") from None
                out.append(int(v) if typ is int and v == int(v) else v)
        return out

    def _length(self, name: str) -> str:
        """A length distribution checked as the workload reads it, so a bad prompt and a bad output show
        together (the workload stops at its first problem)."""
        text = self.cleaned_data[name]
        try:
            distribution_from_dict(text, name=name)
        except WorkloadError as exc:
            raise forms.ValidationError(human_message(field_and_message(exc)[1])) from None
        return text

    def clean_prompt(self) -> str:
        return self._length("prompt")

    def clean_output(self) -> str:
        return self._length("output")

    def clean(self):
        data = super().clean()
        for key in ("axis1_param", "axis2_param"):
            if data.get(key) in LATER_AXES:
                self.add_error(key, LATER_AXES[data[key]])
        return data

    def to_definition(self) -> dict:
        """The JSON definition this form describes (validated again by the service)."""
        d = self.cleaned_data
        definition: dict = {"name": d.get("name") or "", "mode": d.get("mode") or "grid"}
        if d.get("model") or d.get("gpu"):
            definition["model"] = d.get("model") or None
            definition["gpu"] = d.get("gpu") or None
            definition["deployment"] = {"tensor_parallel_size": d.get("tensor_parallel_size") or 1,
                                        "gpu_memory_utilization": d.get("gpu_memory_utilization") or 0.9,
                                        "block_size": d.get("block_size") or 16}
            if d.get("sampling"):  # empty: each model's own path
                definition["deployment"]["sampling"] = d["sampling"]
            if (d.get("data_parallel_size") or 1) > 1:  # (DP 1, EP off: today's definition, unchanged)
                definition["deployment"]["data_parallel_size"] = d["data_parallel_size"]
            if d.get("enable_expert_parallel"):
                definition["deployment"]["enable_expert_parallel"] = True
        engine = {"block_size": d.get("block_size") or 16,
                  "enable_prefix_caching": bool(d.get("enable_prefix_caching"))}
        for k in ("num_gpu_blocks", "max_num_seqs", "max_num_batched_tokens"):
            if d.get(k) is not None:
                engine[k] = d[k]
        if d.get("speculative_method"):
            engine["speculative"] = {"method": d["speculative_method"],
                                     "num_speculative_tokens": d.get("num_speculative_tokens") or 0,
                                     **({} if d.get("acceptance_rate") is None
                                        else {"acceptance_rate": d["acceptance_rate"]})}
        definition["engine"] = engine
        trace = d.get("trace")
        if trace:
            raw = trace.read(4 * 1024 * 1024 + 1)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.add_error("trace", "the trace must be UTF-8 text")
                text = ""
            definition["workload"] = {"trace": text, "format": d.get("trace_format") or "auto"}
        else:
            arrival = {"kind": "poisson", "rate": 1.0, "unit": d.get("arrival_unit") or "s"}
            if d.get("arrival") is not None:
                try:
                    arrival = parse_arrival(d["arrival"], d.get("arrival_unit") or "s").to_dict()
                except WorkloadError as exc:
                    self.add_error("arrival", human_message(field_and_message(exc)[1]))
            spec = {"n": d.get("n") or 1, "prompt": d.get("prompt") or "const:1",
                    "output": d.get("output") or "const:1", "arrival": arrival}
            if d.get("prefix_length"):
                spec["prefixes"] = [{"length": d["prefix_length"], "fraction": d.get("prefix_fraction") or 0.0}]
            definition["workload"] = {"spec": spec, "seed": d.get("seed") or 0}
        if d.get("cluster_instances") is not None or (d.get("cluster_routing") or "").strip():
            cluster: dict = {"num_instances": d.get("cluster_instances") or 1}
            if (d.get("cluster_routing") or "").strip():
                cluster["routing"] = d["cluster_routing"].strip()
            definition["cluster"] = cluster
        if {d.get("axis1_param"), d.get("axis2_param")} & set(disagg.AXES):
            # a prefill/decode pool axis: every point is an xPyD deployment, the routing field its pools'
            definition["disaggregated"] = {"routing": (d.get("cluster_routing") or "").strip() or "round-robin"}
            if d.get("cluster_instances") is None:
                definition.pop("cluster", None)
        if d.get("slo_ttft_ms") is not None or d.get("slo_itl_ms") is not None:
            slo: dict = {"percentile": d.get("slo_percentile") or "p90"}
            for k in ("ttft", "itl"):
                if d.get(f"slo_{k}_ms") is not None:
                    slo[f"{k}_s"] = d[f"slo_{k}_ms"] / 1000
            definition["slo"] = slo
        if definition["mode"] == "grid":
            axes = []
            for i, key in ((0, "axis1"), (1, "axis2")):
                param = d.get(f"{key}_param")
                if not param:
                    continue
                text = d.get(f"{key}_values") or ""
                if text.strip():
                    try:
                        axes.append({"param": param, "values": self._values(text, param)})
                    except forms.ValidationError as exc:
                        self.add_error(f"{key}_values", exc.messages)
                elif i == 0 and d.get("axis1_start") is not None:
                    axes.append({"param": param, "start": d["axis1_start"], "stop": d.get("axis1_stop"),
                                 "steps": d.get("axis1_steps"), "scale": d.get("axis1_scale") or "linear"})
                else:
                    self.add_error(f"{key}_values", "give values (or start, stop and steps)")
            definition["axes"] = axes
        else:
            cliff = {"param": d.get("cliff_param") or "num_gpu_blocks",
                     "metric": d.get("cliff_metric") or "preemptions_per_request"}
            for k in ("lo", "hi", "resolution", "threshold"):
                if d.get(f"cliff_{k}") is not None:
                    cliff[k] = d[f"cliff_{k}"]
            lo, hi = cliff.get("lo"), cliff.get("hi")
            if "resolution" not in cliff and lo is not None and hi is not None and hi > lo:
                cliff["resolution"] = (hi - lo) / 50  # a sensible default: the cliff to 2% of the range
            for k, label in (("lo", "Search from"), ("hi", "Search to")):
                if k not in cliff and f"cliff_{k}" not in self.errors:
                    self.add_error(f"cliff_{k}", f"give where to {label.lower()}, in the knob's unit")
            definition["cliff"] = cliff
        return definition

    @staticmethod
    def initial_from(definition: dict) -> dict:
        """The form's values for a definition (the inverse of :meth:`to_definition`): "Edit and run again".

        Distributions and arrivals given as JSON objects (the API's) are written in the form's short
        strings; what the form cannot show (an inline model spec, a trace file) is left at its default."""
        d = definition or {}
        out: dict = {k: d[k] for k in ("name", "mode") if d.get(k) is not None}
        for k in ("model", "gpu"):
            if d.get(k) is None or isinstance(d[k], str):  # none: an engine-only sweep
                out[k] = d.get(k) or ""
        dep, eng = d.get("deployment") or {}, d.get("engine") or {}
        out.update({k: dep[k] for k in ("tensor_parallel_size", "gpu_memory_utilization", "block_size", "sampling",
                                        "data_parallel_size", "enable_expert_parallel") if dep.get(k) is not None})
        out.update({k: eng[k] for k in ("block_size", "num_gpu_blocks", "max_num_seqs", "max_num_batched_tokens",
                                        "enable_prefix_caching") if eng.get(k) is not None})
        spec_dec = eng.get("speculative") or {}
        out.update({f: spec_dec[k] for f, k in (("speculative_method", "method"), ("num_speculative_tokens",
                    "num_speculative_tokens"), ("acceptance_rate", "acceptance_rate")) if spec_dec.get(k) is not None})
        out.update(_workload_initial(d.get("workload") or {}))
        out.update(_axes_initial(d.get("axes") or []))
        cluster, slo, cliff = d.get("cluster") or {}, d.get("slo") or {}, d.get("cliff") or {}
        if cluster.get("num_instances") is not None:
            out["cluster_instances"] = cluster["num_instances"]
        if cluster.get("routing") or (d.get("disaggregated") or {}).get("routing"):
            out["cluster_routing"] = cluster.get("routing") or d["disaggregated"]["routing"]
        for k in ("ttft", "itl"):
            if slo.get(f"{k}_s") is not None:
                out[f"slo_{k}_ms"] = f"{slo[f'{k}_s'] * 1000:g}"
        if slo.get("percentile"):
            out["slo_percentile"] = slo["percentile"]
        out.update({f"cliff_{k}": cliff[k] for k in ("param", "metric", "lo", "hi", "resolution", "threshold")
                    if cliff.get(k) is not None})
        if d.get("calibration") is not None:
            out["calibration"] = d["calibration"]
        return out

    def add_definition_errors(self, errors: dict[str, list[str]]) -> None:
        """The definition's errors at the fields they are about, in words (no JSON paths); a field that
        already shows an error keeps only that one."""
        attach_errors(self, errors, prefixes=self.ERROR_FIELDS, paths="never", words=lambda m, _: human_message(m))

    def error_summary(self) -> list[dict]:
        """Every error of the form, for the summary at its top: ``{"id", "label", "message"}`` (``id`` links
        to the field; ``None`` for an error about the whole form)."""
        out = [{"id": None, "label": "", "message": str(m)} for m in self.non_field_errors()]
        for name in self.fields:
            for m in self.errors.get(name, []):
                out.append({"id": self[name].auto_id, "label": self.fields[name].label, "message": str(m)})
        return out

    GROUPS = {
        "scenario": ("name", "mode", "model", "gpu", "tensor_parallel_size", "data_parallel_size",
                     "enable_expert_parallel", "gpu_memory_utilization", "sampling", "block_size",
                     "num_gpu_blocks", "max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching",
                     "speculative_method", "num_speculative_tokens", "acceptance_rate"),
        "workload": ("n", "prompt", "output", "arrival", "arrival_unit", "prefix_length", "prefix_fraction", "seed",
                     "trace", "trace_format"),
        "axes": ("axis1_param", "axis1_values", "axis1_start", "axis1_stop", "axis1_steps", "axis1_scale",
                 "axis2_param", "axis2_values"),
        "cliff": ("cliff_param", "cliff_metric", "cliff_lo", "cliff_hi", "cliff_resolution", "cliff_threshold"),
        "cluster": ("cluster_instances", "cluster_routing"),
        "slo": ("slo_ttft_ms", "slo_itl_ms", "slo_percentile"),
    }

    def group(self, name: str) -> list:
        return [self[f] for f in self.GROUPS[name]]

    @property
    def scenario_fields(self):
        return self.group("scenario")

    @property
    def workload_fields(self):
        return self.group("workload")

    @property
    def axis_fields(self):
        return self.group("axes")

    @property
    def cliff_fields(self):
        return self.group("cliff")

    @property
    def group_cluster(self):
        return self.group("cluster")

    @property
    def group_slo(self):
        return self.group("slo")
