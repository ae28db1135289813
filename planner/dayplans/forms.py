"""The day plan form: a deployment (or an engine configuration), a day of traffic, a policy, prices and
targets, turned into a day plan definition (``planner/dayplans/definition.py``)."""

from __future__ import annotations

import json
import math

from django import forms

from config.form_errors import attach_errors
from config.json_input import MAX_JSON_VALUES, loads_checked
from planner.sweeps.sections import TRACE_FORMAT_NAMES

#: A day of chat traffic in requests per hour (a night trough at 2,600, a day near 21,600): 3.6 requests/s
#: on average.
DEFAULT_HOURLY = "5000,3600,2800,2600,2800,4000,8000,14000,19000,21000,21600,21200,20000,20400,21000,20600,19600,18000" \
                 ",16000,14000,12000,10000,8000,6400"
DEFAULT_POLICY = '{"kind": "hpa", "metric": "running", "target": 16, "min_replicas": 1, "max_replicas": 8}'


def _json_object(text: str, what: str) -> dict | None:
    """``text`` as a JSON object under the API body's checks (:func:`config.json_input.loads_checked`: depth, NUL,
    surrogates, finite numbers, at most ``MAX_JSON_VALUES`` values); a 5,000-digit number was a 500 here (plain
    ``json.loads`` raises ``ValueError`` past 4,300 digits)."""
    if not text.strip():
        return None
    try:
        data = loads_checked(text, max_values=MAX_JSON_VALUES)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(f"{what}: invalid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") \
            from None
    except ValueError as exc:  # JsonInputError: the field inside, and what is wrong with it
        where = f"{what}.{exc.field}" if getattr(exc, "field", None) else what
        raise forms.ValidationError(f"{where}: {getattr(exc, 'message', exc)}") from None
    if not isinstance(data, dict):
        raise forms.ValidationError(f"{what}: must be a JSON object {{...}}")
    return data


class DayPlanForm(forms.Form):
    name = forms.CharField(label="Name", required=False, max_length=200)
    model = forms.ChoiceField(label="Model", required=False,
                              help_text="A catalog model or one of your profiles; empty: the engine configuration "
                                        "below alone.")
    gpu = forms.ChoiceField(label="GPU", required=False, help_text="Its catalog price is the price per GPU-hour "
                                                                   "unless you give one.")
    tensor_parallel_size = forms.IntegerField(label="Tensor parallel (TP)", min_value=1, max_value=64, initial=1)
    pipeline_parallel_size = forms.IntegerField(label="Pipeline parallel (PP)", min_value=1, max_value=64, initial=1)
    gpu_memory_utilization = forms.FloatField(label="GPU memory utilization", min_value=0.05, max_value=1.0,
                                              initial=0.9, help_text="share of each GPU's memory vLLM may use")
    engine = forms.CharField(label="Engine configuration", required=False, widget=forms.Textarea(attrs={"rows": 3}),
                             help_text="JSON (as examples/C.json): without a model, the engine each replica runs; "
                                       "with one, knobs over the sized engine (e.g. {\"max_num_seqs\": 128}).")
    hourly_rates = forms.CharField(label="Requests per hour", initial=DEFAULT_HOURLY,
                                   widget=forms.Textarea(attrs={"rows": 2}),
                                   help_text="one rate per hour, comma-separated (24 for a day; at most 48); the "
                                             "requests arrive as a Poisson process at each hour's rate")
    prompt_mean = forms.IntegerField(label="Prompt length, mean", min_value=1, max_value=1_000_000, initial=1024,
                                     help_text="tokens")
    prompt_std = forms.IntegerField(label="Prompt length, std", min_value=0, max_value=1_000_000, initial=256,
                                    help_text="tokens")
    output_mean = forms.IntegerField(label="Output length, mean", min_value=1, max_value=1_000_000, initial=256,
                                     help_text="tokens")
    output_std = forms.IntegerField(label="Output length, std", min_value=0, max_value=1_000_000, initial=64,
                                    help_text="tokens")
    trace = forms.CharField(label="Or a trace", required=False, widget=forms.Textarea(attrs={"rows": 3}),
                            help_text="paste a trace (Azure, Mooncake, BurstGPT, vLLM bench, CSV or JSONL; "
                                      "docs/traffic.md) to replay it instead of the hourly rates")
    trace_format = forms.ChoiceField(label="Trace format", choices=[(f, f) for f in TRACE_FORMAT_NAMES],
                                     initial="auto", required=False)
    policy = forms.CharField(label="Autoscaling policy", initial=DEFAULT_POLICY,
                             widget=forms.Textarea(attrs={"rows": 3}),
                             help_text="JSON: kind fixed (replicas), scheduled (replicas per hour), hpa (metric, "
                                       "target, min_replicas, max_replicas, windows, cooldown) or oracle "
                                       "(capacity_per_replica); docs/autoscaling.md")
    cold_start_s = forms.FloatField(label="Cold start", required=False, min_value=0, max_value=86_400,
                                    help_text="seconds from asking for a replica to its first request (empty: "
                                              "25 s container + weights at 1 GiB/s + 30 s compile + 20 s CUDA graphs)")
    weights_gib = forms.FloatField(label="Weights per GPU", required=False, min_value=0, max_value=10_000,
                                   help_text="GiB read at start, for the cold start (empty: the model's own)")
    routing = forms.ChoiceField(label="Router", choices=[("least-loaded", "least-loaded"),
                                                         ("round-robin", "round-robin")], initial="least-loaded")
    gpus_per_replica = forms.IntegerField(label="GPUs per replica", required=False, min_value=1, max_value=64,
                                          help_text="empty: TP x PP")
    price_per_gpu_hour = forms.FloatField(label="Price per GPU-hour", required=False, min_value=0.0001,
                                          max_value=10_000, help_text="USD (empty: the GPU's catalog price)")
    ttft_s = forms.FloatField(label="TTFT target", required=False, min_value=0.001, max_value=3600, initial=2,
                              help_text="seconds, arrival to first token")
    tpot_ms = forms.FloatField(label="TPOT target", required=False, min_value=0.001, max_value=3_600_000,
                               initial=50, help_text="ms, mean gap between tokens after the first")
    chunk_s = forms.FloatField(label="Chunk length", min_value=1, max_value=7 * 86_400, initial=3600,
                               help_text="seconds simulated per worker task (progress and cancel go chunk by chunk)")
    overlap_s = forms.FloatField(label="Chunk overlap", min_value=0, max_value=86_400, required=False,
                                 help_text="seconds of warm-up and cool-down around each chunk (empty: 300, or the "
                                           "policy's longest stabilization window if longer)")

    #: Where the definition's paths are shown on the form.
    WHERE = {"model": "model", "gpu": "gpu", "deployment.tensor_parallel_size": "tensor_parallel_size",
             "deployment.pipeline_parallel_size": "pipeline_parallel_size",
             "deployment.gpu_memory_utilization": "gpu_memory_utilization", "deployment": "tensor_parallel_size",
             "deployment.max_model_len": "engine", "engine": "engine", "workload.trace": "trace",
             "workload.format": "trace_format", "workload.options": "trace", "workload.spec.arrival": "hourly_rates",
             "workload.spec.n": "hourly_rates", "workload": "hourly_rates", "workload.spec.prompt": "prompt_mean",
             "workload.spec.output": "output_mean", "cold_start": "cold_start_s", "cold_start.seconds": "cold_start_s",
             "cold_start.weights_gib": "weights_gib", "routing": "routing", "gpus_per_replica": "gpus_per_replica",
             "price_per_gpu_hour": "price_per_gpu_hour", "slo.ttft_s": "ttft_s", "slo.tpot_s": "tpot_ms",
             "chunk_s": "chunk_s", "overlap_s": "overlap_s", "name": "name"}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        from gpuprofiles.models import GpuProfile, ModelProfile
        from gpuprofiles.selectors import visible_profiles

        self.fields["model"].choices = [("", "— none: the engine configuration —")] + [
            (m.slug, m.name) for m in visible_profiles(ModelProfile, user=user).order_by("name")]
        self.fields["gpu"].choices = [("", "— none —")] + [
            (g.slug, g.name) for g in visible_profiles(GpuProfile, user=user).order_by("name")]
        self.fields["model"].initial = "llama-3-1-8b"
        self.fields["gpu"].initial = "h100-sxm5-80gb"

    def clean_engine(self):
        return _json_object(self.cleaned_data["engine"], "engine")

    def clean_policy(self):
        data = _json_object(self.cleaned_data["policy"], "policy")
        if data is None:
            raise forms.ValidationError("give the autoscaling policy as a JSON object, e.g. " + DEFAULT_POLICY)
        return data

    def clean_hourly_rates(self):
        text = self.cleaned_data["hourly_rates"]
        try:
            rates = [float(x) for x in text.replace("\n", ",").split(",") if x.strip()]
        except ValueError:
            raise forms.ValidationError("numbers separated by commas, one per hour (requests per hour)") from None
        if not 1 <= len(rates) <= 48:
            raise forms.ValidationError(f"give 1 to 48 hourly rates, got {len(rates)}")
        if any(not math.isfinite(r) or r > 1e9 for r in rates):
            raise forms.ValidationError("each rate at most 1,000,000,000 requests per hour")
        if any(r < 0 for r in rates) or not any(r > 0 for r in rates):
            raise forms.ValidationError("rates are requests per hour: none below 0, at least one above 0")
        return rates

    def to_definition(self) -> dict:
        """The definition from the cleaned fields (a refused field is left out, so that the definition's own
        checks report the others in the same answer)."""
        d = self.cleaned_data
        out: dict = {"name": d.get("name") or ""}
        if d.get("model") or d.get("gpu"):
            out["model"], out["gpu"] = d.get("model") or None, d.get("gpu") or None
            out["deployment"] = {k: d[k] for k in ("tensor_parallel_size", "pipeline_parallel_size",
                                                   "gpu_memory_utilization") if d.get(k) is not None}
        if d.get("engine"):
            out["engine"] = d["engine"]
        if d.get("trace"):
            out["workload"] = {"trace": d["trace"], "format": d.get("trace_format") or "auto"}
        else:
            rates = d.get("hourly_rates") or [3600.0]
            spec = {"n": max(1, round(sum(rates))), "arrival": "hourly:" + ",".join(f"{r:g}" for r in rates)}
            for k in ("prompt", "output"):
                if d.get(f"{k}_mean") is not None:
                    spec[k] = {"kind": "normal", "mean": d[f"{k}_mean"], "std": d.get(f"{k}_std") or 0}
            out["workload"] = {"spec": spec, "seed": 0}
        out["policy"] = d.get("policy") or {"kind": "fixed", "replicas": 1}
        if d.get("cold_start_s") is not None:
            out["cold_start"] = {"seconds": d["cold_start_s"]}
        elif d.get("weights_gib") is not None:
            out["cold_start"] = {"weights_gib": d["weights_gib"]}
        for k in ("routing", "gpus_per_replica", "price_per_gpu_hour", "chunk_s", "overlap_s"):
            if d.get(k) not in (None, ""):
                out[k] = d[k]
        out["slo"] = {"ttft_s": d.get("ttft_s"), "tpot_s": None if d.get("tpot_ms") is None else d["tpot_ms"] / 1e3}
        return out

    def add_definition_errors(self, errors: dict) -> None:
        """Attach ``{field.path: [messages]}`` from the definition to the form's fields (each message once,
        the path in front when it is not the field's own)."""
        attach_errors(self, errors, where=self.WHERE, paths="foreign", also=("policy",),
                      prefixes=(("policy", "policy"), ("cold_start", "cold_start_s"), ("engine", "engine"),
                                ("deployment", "engine"), ("workload", "hourly_rates"), ("slo", "ttft_s")))
