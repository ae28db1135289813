"""The search form: a model, traffic, latency targets and the space, turned into a search definition."""

from __future__ import annotations

from django import forms

from config.form_errors import attach_errors
from planner.sampling_words import sampling_field
from simulator.cluster import POLICIES
from simulator.search import (
    DEFAULT_SEED_COUNT,
    DURATION_BOUNDS_S,
    MAX_SEEDS,
    PRECISIONS,
    TRAFFIC_DEFAULTS,
    SearchError,
    Slo,
    default_duration,
    requests_for_percentile,
    space_defaults,
)
from simulator.search.space import SEARCH_SPEC_METHODS, SpecOption
from simulator.workload import parse_distribution

PERCENTILES = [("p50", "p50"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99"), ("p99.9", "p99.9")]


def _list(text: str, field: str) -> list[int]:
    try:
        out = [int(x) for x in text.replace(" ", ",").split(",") if x.strip()]
    except ValueError:
        raise forms.ValidationError("whole numbers separated by commas, e.g. 1, 2, 4, 8") from None
    if not out:
        raise forms.ValidationError("give at least one value (the space is empty)")
    return out


#: The defaults every door shares (simulator.search: the command line and the API take the same).
_SPACE, _TRAFFIC = space_defaults(), TRAFFIC_DEFAULTS
_PROMPT, _OUTPUT = parse_distribution(_TRAFFIC["prompt"]), parse_distribution(_TRAFFIC["output"])


def _listed(values) -> str:
    return ", ".join(str(v) for v in values)


class SearchForm(forms.Form):
    name = forms.CharField(required=False, max_length=200, label="Name")
    model = forms.ChoiceField(label="Model", help_text="A catalog model or one of your own profiles.")
    gpus = forms.MultipleChoiceField(label="GPU types", widget=forms.CheckboxSelectMultiple,
                                     help_text="Priced GPUs only: the search compares costs.")
    rate = forms.FloatField(label="Request rate", min_value=0.001, max_value=10_000, initial=20,
                            help_text="requests per second (Poisson)")
    duration_s = forms.FloatField(label="Traffic to simulate", min_value=1, max_value=3600, required=False,
                                  help_text=f"seconds; leave empty to simulate enough requests for the SLO's highest "
                                            f"percentile (from {DURATION_BOUNDS_S[0]:g} to {DURATION_BOUNDS_S[1]:g} s: "
                                            f"{requests_for_percentile(90):,} requests for a p90, "
                                            f"{requests_for_percentile(99):,} for a p99)")
    prompt_mean = forms.IntegerField(label="Prompt length, mean", min_value=1, max_value=1_000_000,
                                     initial=int(_PROMPT.mean),
                                     help_text="tokens")
    prompt_std = forms.IntegerField(label="Prompt length, std", min_value=0, max_value=1_000_000,
                                    initial=int(_PROMPT.std))
    output_mean = forms.IntegerField(label="Output length, mean", min_value=1, max_value=1_000_000,
                                     initial=int(_OUTPUT.mean),
                                     help_text="tokens")
    output_std = forms.IntegerField(label="Output length, std", min_value=0, max_value=1_000_000,
                                    initial=int(_OUTPUT.std))
    prefix_tokens = forms.IntegerField(label="Shared prefix", required=False, min_value=1, max_value=1_000_000,
                                       help_text="tokens of a system prompt in front of the prompt (empty: none)")
    prefix_pct = forms.FloatField(label="Requests with the prefix", required=False, min_value=0, max_value=100,
                                  initial=100, help_text="%")
    ttft_ms = forms.FloatField(label="TTFT target", required=False, min_value=0.001, initial=500, help_text="ms")
    ttft_pct = forms.ChoiceField(label="TTFT percentile", choices=PERCENTILES, initial="p90")
    tpot_ms = forms.FloatField(label="TPOT target", required=False, min_value=0.001,
                               help_text="ms: each request's mean gap between tokens after the first (vLLM bench's "
                                         "TPOT), percentile over requests")
    tpot_pct = forms.ChoiceField(label="TPOT percentile", choices=PERCENTILES, initial="p90", required=False)
    itl_ms = forms.FloatField(label="ITL target", required=False, min_value=0.001, initial=50,
                              help_text="ms: every gap between two streamed tokens (vLLM bench's ITL), percentile "
                                        "over all gaps")
    itl_pct = forms.ChoiceField(label="ITL percentile", choices=PERCENTILES, initial="p90")
    e2e_s = forms.FloatField(label="End-to-end target", required=False, min_value=0.001, help_text="seconds")
    e2e_pct = forms.ChoiceField(label="E2E percentile", choices=PERCENTILES, initial="p90")
    min_goodput_pct = forms.FloatField(label="Goodput", required=False, min_value=0, max_value=100,
                                       help_text="% of requests that must meet every target (empty: not checked)")
    tensor_parallel = forms.CharField(label="TP degrees", initial=_listed(_SPACE["tensor_parallel"]))
    pipeline_parallel = forms.CharField(label="PP degrees", initial=_listed(_SPACE["pipeline_parallel"]), required=False)
    data_parallel = forms.CharField(label="DP sizes", initial="1", required=False,
                                    help_text="vLLM's --data-parallel-size values to try, e.g. 1, 2, 4: a replica is "
                                              "one DP group of TP × PP × DP GPUs (empty: 1)")
    expert_parallel = forms.MultipleChoiceField(
        label="Expert parallelism", widget=forms.CheckboxSelectMultiple, required=False,
        choices=[("off", "off"), ("on", "on (--enable-expert-parallel, MoE models)")], initial=["off"])
    precisions = forms.MultipleChoiceField(label="Weight precision", widget=forms.CheckboxSelectMultiple,
                                           choices=[(p, p) for p in PRECISIONS], initial=list(_SPACE["precisions"]))
    kv_cache_dtypes = forms.MultipleChoiceField(label="KV cache dtype", widget=forms.CheckboxSelectMultiple,
                                                required=False,
                                                choices=[("auto", "auto (the compute dtype)"), ("fp8", "fp8")],
                                                initial=list(_SPACE["kv_cache_dtypes"]))
    max_num_seqs = forms.CharField(label="max_num_seqs values", initial=_listed(_SPACE["max_num_seqs"]))
    speculative = forms.CharField(
        label="Speculative decoding to try", required=False, initial="none",
        help_text=f"settings separated by commas, each METHOD:K:ACCEPTANCE (methods {', '.join(SEARCH_SPEC_METHODS)}; "
                  "k draft tokens per step; the chance a draft is accepted), none for without: e.g. none, eagle:3:0.7")
    check_seeds = forms.IntegerField(
        label="Check the answer on more seeds", required=False, min_value=0, max_value=MAX_SEEDS,
        initial=DEFAULT_SEED_COUNT, widget=forms.NumberInput(attrs={"step": 1}),
        help_text=f"traffic draws after the search's own on which the answer, and one replica fewer, are simulated "
                  f"again (0 to {MAX_SEEDS}; 0: not checked; empty: {DEFAULT_SEED_COUNT})")
    max_replicas = forms.IntegerField(label="Most replicas", min_value=1, max_value=64, initial=_SPACE["max_replicas"])
    max_gpus = forms.IntegerField(label="GPUs available", required=False, min_value=1,
                                  widget=forms.NumberInput(attrs={"step": 1}),
                                  help_text="the most GPUs an answer may use, replicas × TP × PP × DP (empty: no "
                                            "limit but the replicas)")
    sampling = sampling_field()
    routing = forms.ChoiceField(label="Router", choices=[(p, p) for p in POLICIES], initial=_SPACE["routing"],
                                required=False,
                                help_text="how requests are spread over the replicas")
    disaggregated = forms.BooleanField(label="Also try prefill/decode splits (xPyD)", required=False,
                                       help_text="simulate the answer's N replicas (and N - 1) split into prefill "
                                                 "and decode instances, and compare at equal GPUs and cost")
    pools = forms.BooleanField(label="Also search prefill and decode pools of their own shapes", required=False,
                               help_text="each pool its own GPU, TP, precision and count among the shapes above "
                                         "(needs a TTFT target), compared with the aggregated answer's cost")
    link_gbps = forms.FloatField(label="KV link bandwidth", required=False, initial=50,
                                 help_text="GB/s per decode instance (one 400 Gb/s NIC is 50 GB/s)")
    link_latency_ms = forms.FloatField(label="KV link latency", required=False, initial=0.1,
                                       help_text="ms per transfer")
    prefill_instances = forms.CharField(label="Prefill instances to try", required=False,
                                        help_text="e.g. 1, 2 (empty: every split)")
    decode_instances = forms.CharField(label="Decode instances to try", required=False,
                                       help_text="e.g. 2, 3 (empty: every split)")

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        from gpuprofiles.models import GpuProfile, ModelProfile
        from gpuprofiles.selectors import visible_profiles
        from planner.search.definition import priced_catalog_gpus

        models = visible_profiles(ModelProfile, user=None, scope="catalog").order_by("name")
        self.fields["model"].choices = [(m.slug, m.name) for m in models]
        self.fields["model"].initial = "llama-3-1-8b"
        priced = priced_catalog_gpus()
        names = dict(visible_profiles(GpuProfile, user=None, scope="catalog").filter(slug__in=priced)
                     .values_list("slug", "name"))
        self.fields["gpus"].choices = [(s, names.get(s, s)) for s in priced]
        self.fields["gpus"].initial = priced

    def clean_tensor_parallel(self):
        return _list(self.cleaned_data["tensor_parallel"], "tensor_parallel")

    def clean_pipeline_parallel(self):
        text = self.cleaned_data["pipeline_parallel"]
        return _list(text, "pipeline_parallel") if text.strip() else [1]

    def clean_data_parallel(self):
        text = self.cleaned_data["data_parallel"]
        return _list(text, "data_parallel") if text.strip() else [1]

    def clean_expert_parallel(self):
        return [v == "on" for v in self.cleaned_data["expert_parallel"]] or [False]

    def clean_max_num_seqs(self):
        return _list(self.cleaned_data["max_num_seqs"], "max_num_seqs")

    def clean_speculative(self):
        """``none, eagle:3:0.7`` -> ``[None, "eagle:3:0.7"]``, each setting checked as the search checks it."""
        out = []
        for word in (w.strip() for w in self.cleaned_data["speculative"].split(",")):
            if not word:
                continue
            if word.lower() == "none":
                out.append(None)
                continue
            try:
                SpecOption.parse(word, "setting")
            except SearchError as exc:
                part = (exc.field or "").removeprefix("setting").lstrip(".")  # the setting's own field, if one
                problem = f"{part} {exc.message}"
                raise forms.ValidationError(f"{word}: {problem}") from None
            out.append(word)
        if len(set(out)) != len(out):
            raise forms.ValidationError("each setting at most once")
        return out or [None]

    def clean_check_seeds(self):
        k = self.cleaned_data["check_seeds"]
        return DEFAULT_SEED_COUNT if k is None else k

    def clean_prefill_instances(self):
        text = self.cleaned_data["prefill_instances"]
        return _list(text, "prefill_instances") if text.strip() else None

    def clean_decode_instances(self):
        text = self.cleaned_data["decode_instances"]
        return _list(text, "decode_instances") if text.strip() else None

    def _disaggregated(self) -> dict | None:
        """The definition's ``disaggregated`` object (the definition validates its values)."""
        d = self.cleaned_data
        if not d.get("disaggregated") and not d.get("pools"):
            return None
        out = {"link_gbps": 50.0 if d.get("link_gbps") is None else d["link_gbps"],
               "link_latency_s": 1e-4 if d.get("link_latency_ms") is None else d["link_latency_ms"] / 1e3}
        if d.get("pools"):
            out["pools"] = True
        for k in ("prefill_instances", "decode_instances"):
            if d.get(k):
                out[k] = d[k]
        return out

    def clean(self):
        data = super().clean()
        keys = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_s")
        if not any(data.get(k) for k in keys) and not set(keys) & set(self.errors):
            self.add_error(None, "Give at least one latency target (TTFT, TPOT, ITL or end-to-end).")
        return data

    #: What a field refused by the form stands for while the definition checks the others (its initial value).
    FALLBACKS = {"rate": 20.0, "duration_s": None, "prompt_mean": 1024, "prompt_std": 256, "output_mean": 256,
                 "output_std": 64, "tensor_parallel": [1], "pipeline_parallel": [1], "precisions": ["bf16"],
                 "max_num_seqs": [256], "max_replicas": 16, "ttft_pct": "p90", "tpot_pct": "p90", "itl_pct": "p90",
                 "e2e_pct": "p90", "speculative": [None], "check_seeds": DEFAULT_SEED_COUNT}
    #: Definition paths that come from more than one field: not reported when one of those fields is refused.
    DEPENDS = {"workload.spec.n": ("rate", "duration_s"), "slo.targets": ("ttft_ms", "tpot_ms", "itl_ms", "e2e_s")}

    def to_definition(self) -> dict:
        """The definition; with fields refused by the form, one standing in for them (:data:`FALLBACKS`), so
        that the definition's own checks report the other fields in the same answer."""
        d = {**self.FALLBACKS, "model": self.fields["model"].initial, "gpus": self.fields["gpus"].initial,
             **self.cleaned_data}
        targets = []
        for metric, key, scale in (("ttft", "ttft_ms", 1e-3), ("tpot", "tpot_ms", 1e-3), ("itl", "itl_ms", 1e-3),
                                   ("e2e", "e2e_s", 1.0)):
            if d.get(key):
                targets.append({"metric": metric, "percentile": d.get(f"{metric}_pct") or "p90",
                                "max_s": d[key] * scale})
        n = max(1, round(d["rate"] * _duration_s(d["rate"], d.get("duration_s"), targets)))
        spec = {"n": n, "prompt": {"kind": "normal", "mean": d["prompt_mean"], "std": d["prompt_std"]},
                "output": {"kind": "normal", "mean": d["output_mean"], "std": d["output_std"]},
                "arrival": {"kind": "poisson", "rate": d["rate"], "unit": "s"}}
        if d.get("prefix_tokens"):
            pct = 100.0 if d.get("prefix_pct") is None else d["prefix_pct"]
            spec["prefixes"] = [{"length": d["prefix_tokens"], "fraction": pct / 100, "count": 1}]
        out = {
            "name": d.get("name") or "",
            "model": d["model"],
            "workload": {"spec": spec, "seed": 0},
            "slo": {"targets": targets, "min_goodput": (d.get("min_goodput_pct") or 0) / 100},
            "space": {"gpus": d["gpus"], "tensor_parallel": d["tensor_parallel"],
                      "pipeline_parallel": d.get("pipeline_parallel") or [1], "precisions": d["precisions"],
                      "kv_cache_dtypes": d.get("kv_cache_dtypes") or ["auto"], "max_num_seqs": d["max_num_seqs"],
                      "max_replicas": d["max_replicas"], "routing": d.get("routing") or "round-robin"},
        }
        if d.get("sampling"):  # empty: each model's own path
            out["space"]["sampling"] = d["sampling"]
        if d["speculative"] != [None]:  # none: without speculative decoding (the space's default)
            out["space"]["speculative"] = d["speculative"]
        for k, default in (("data_parallel", [1]), ("expert_parallel", [False]), ("max_gpus", None)):
            if d.get(k, default) != default:  # (defaults: today's space)
                out["space"][k] = d[k]
        out["check_seeds"] = d["check_seeds"]
        dis = self._disaggregated()
        if dis is not None:
            out["disaggregated"] = dis
        return out

    def add_definition_errors(self, errors: dict) -> None:
        """Attach ``{field.path: [messages]}`` from the definition to the form's fields."""
        where = {"space.tensor_parallel": "tensor_parallel", "space.pipeline_parallel": "pipeline_parallel",
                 "space.data_parallel": "data_parallel", "space.expert_parallel": "expert_parallel",
                 "space.kv_cache_dtypes": "kv_cache_dtypes", "space.routing": "routing",
                 "workload.spec.prefixes": "prefix_tokens", "space.max_num_seqs": "max_num_seqs",
                 "space.max_replicas": "max_replicas", "space.max_gpus": "max_gpus", "space.precisions": "precisions", "model": "model",
                 "space.sampling": "sampling", "workload": "prompt_mean", "space.max_model_len": "prompt_mean",
                 "workload.spec.n": "duration_s", "slo.min_goodput": "min_goodput_pct",
                 "disaggregated": "disaggregated", "disaggregated.pools": "pools", "disaggregated.link_gbps": "link_gbps",
                 "disaggregated.link_latency_s": "link_latency_ms",
                 "disaggregated.prefill_instances": "prefill_instances",
                 "disaggregated.decode_instances": "decode_instances", "check_seeds": "check_seeds"}
        prefixes = {"space.gpus": "gpus", "workload.spec.prefixes": "prefix_tokens", "space.speculative": "speculative"}
        errors = {path: msgs for path, msgs in errors.items()
                  if not set(self.DEPENDS.get(path, ())) & set(self.errors)  # a stand-in value caused this one
                  and not (path == "slo.targets" and forms.forms.NON_FIELD_ERRORS in self.errors)}  # said already
        attach_errors(self, errors, where=where, prefixes=prefixes.items(), paths="top")


def _duration_s(rate: float, given: float | None, targets: list[dict]) -> float:
    """The duration given, else the one the SLO's highest percentile asks for (``default_duration``); with
    targets the definition will refuse, the search's fixed default stands in while it reports them."""
    if given is not None:
        return given
    try:
        return default_duration(rate, Slo(tuple(targets)))[0]
    except (SearchError, TypeError, ValueError):
        return TRAFFIC_DEFAULTS["duration_s"]
