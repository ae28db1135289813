"""The sweep form: a browser-friendly face on the JSON definition (planner.sweeps.definition)."""

from __future__ import annotations

import re

from django import forms

from planner.sweeps.definition import AXES, CLIFF_METRICS, LATER_AXES

AXIS_CHOICES = [(k, f"{v['label']}" + (f" ({v['unit']})" if v["unit"] else "")) for k, v in AXES.items()]
CLIFF_CHOICES = [(k, AXES[k]["label"]) for k, v in AXES.items() if v.get("cliff")]


def _profile_choices(kind: str, user) -> list[tuple[str, str]]:
    try:
        from django.db.models import Q

        from gpuprofiles.models import GpuProfile, ModelProfile

        cls = ModelProfile if kind == "model" else GpuProfile
        q = Q(owner__isnull=True)
        if user is not None and user.is_authenticated:
            q |= Q(owner=user)
        rows = cls.objects.filter(q).order_by("name").values_list("slug", "name", "owner_id")
        return [(slug, f"{name}{' (yours)' if owner else ''}") for slug, name, owner in rows]
    except Exception:  # noqa: BLE001 - the catalog may be empty or not migrated yet
        return []


class SweepForm(forms.Form):
    name = forms.CharField(required=False, max_length=200)
    mode = forms.ChoiceField(choices=[("grid", "Grid of points"), ("cliff", "Find the cliff (bisection)")],
                             initial="grid")
    model = forms.ChoiceField(required=False, help_text="Leave empty for an engine-only sweep (give KV blocks).")
    gpu = forms.ChoiceField(required=False)
    tensor_parallel_size = forms.IntegerField(min_value=1, max_value=4096, initial=1, label="GPUs (tensor parallel)")
    gpu_memory_utilization = forms.FloatField(min_value=0.05, max_value=1.0, initial=0.9)
    block_size = forms.IntegerField(min_value=1, max_value=4096, initial=16, label="Block size (tokens)")
    num_gpu_blocks = forms.IntegerField(required=False, min_value=2, label="KV blocks",
                                        help_text="Overrides the sized value; required without a model and GPU.")
    max_num_seqs = forms.IntegerField(required=False, min_value=1)
    max_num_batched_tokens = forms.IntegerField(required=False, min_value=1)
    enable_prefix_caching = forms.BooleanField(required=False, initial=True)

    n = forms.IntegerField(min_value=1, initial=500, label="Requests")
    prompt = forms.CharField(initial="normal:512,128", label="Prompt length (tokens)",
                             help_text="const:N, uniform:A,B, normal:MEAN,STD, lognormal:..., pareto-lognormal:...")
    output = forms.CharField(initial="normal:256,64", label="Output length (tokens)")
    arrival = forms.CharField(initial="poisson:4", help_text="burst, poisson:RATE, gamma:RATE,CV, every:K")
    arrival_unit = forms.ChoiceField(choices=[("step", "per engine step"), ("s", "per second")], initial="step")
    prefix_length = forms.IntegerField(required=False, min_value=1, label="Shared prefix (tokens)")
    prefix_fraction = forms.FloatField(required=False, min_value=0, max_value=1, label="Requests sharing it")
    seed = forms.IntegerField(min_value=0, initial=0)
    trace = forms.FileField(required=False, help_text="CSV or JSONL trace; replaces the generated workload.")

    axis1_param = forms.ChoiceField(choices=AXIS_CHOICES, initial="num_gpu_blocks", label="Axis 1")
    axis1_values = forms.CharField(required=False, label="Values", help_text="e.g. 2000, 4000, 8000")
    axis1_start = forms.FloatField(required=False, label="or start")
    axis1_stop = forms.FloatField(required=False, label="stop")
    axis1_steps = forms.IntegerField(required=False, min_value=1, label="steps")
    axis1_scale = forms.ChoiceField(choices=[("linear", "linear"), ("log", "log")], initial="linear", label="scale")
    axis2_param = forms.ChoiceField(choices=[("", "—")] + AXIS_CHOICES, required=False, label="Axis 2 (optional)")
    axis2_values = forms.CharField(required=False, label="Values")

    cliff_param = forms.ChoiceField(choices=CLIFF_CHOICES, required=False, initial="num_gpu_blocks",
                                    label="Search")
    cliff_metric = forms.ChoiceField(choices=list(CLIFF_METRICS.items()), required=False)
    cliff_lo = forms.FloatField(required=False, label="from")
    cliff_hi = forms.FloatField(required=False, label="to")
    cliff_resolution = forms.FloatField(required=False, label="resolution")
    cliff_threshold = forms.FloatField(required=False, label="limit",
                                       help_text="preemptions/request (default 0.02) or TTFT factor (default 2)")

    #: definition error path prefix -> form field
    ERROR_FIELDS = [
        ("workload.spec.n", "n"), ("workload.spec.prompt", "prompt"), ("workload.spec.output", "output"),
        ("workload.spec.arrival", "arrival"), ("workload.spec.prefixes", "prefix_fraction"),
        ("workload.seed", "seed"), ("workload.trace", "trace"), ("engine.num_gpu_blocks", "num_gpu_blocks"),
        ("engine.max_num_seqs", "max_num_seqs"), ("engine.max_num_batched_tokens", "max_num_batched_tokens"),
        ("engine.block_size", "block_size"), ("deployment.gpu_memory_utilization", "gpu_memory_utilization"),
        ("deployment.tensor_parallel_size", "tensor_parallel_size"), ("deployment.block_size", "block_size"),
        ("axes[0]", "axis1_values"), ("axes[1]", "axis2_values"), ("axes", "axis1_values"),
        ("cliff.lo", "cliff_lo"), ("cliff.hi", "cliff_hi"), ("cliff.resolution", "cliff_resolution"),
        ("cliff.threshold", "cliff_threshold"), ("cliff.param", "cliff_param"), ("cliff", "cliff_lo"),
        ("model", "model"), ("gpu", "gpu"), ("name", "name"),
    ]

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["model"].choices = [("", "— none (engine only) —")] + _profile_choices("model", user)
        self.fields["gpu"].choices = [("", "— none —")] + _profile_choices("gpu", user)

    @staticmethod
    def _values(text: str, param: str) -> list:
        items = [x for x in re.split(r"[,\s;]+", text.strip()) if x]
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
                    v = float(x.replace("_", ""))
                except ValueError:
                    raise forms.ValidationError(f"{x!r} is not a number") from None
                out.append(int(v) if typ is int and v == int(v) else v)
        return out

    def clean(self):
        data = super().clean()
        for key in ("axis1_param", "axis2_param"):
            if data.get(key) in LATER_AXES:
                self.add_error(key, LATER_AXES[data[key]])
        return data

    def to_definition(self) -> dict:
        """The JSON definition this form describes (validated again by the service)."""
        d = self.cleaned_data
        definition: dict = {"name": d.get("name") or "", "mode": d["mode"]}
        if d.get("model") or d.get("gpu"):
            definition["model"] = d.get("model") or None
            definition["gpu"] = d.get("gpu") or None
            definition["deployment"] = {"tensor_parallel_size": d["tensor_parallel_size"],
                                        "gpu_memory_utilization": d["gpu_memory_utilization"],
                                        "block_size": d["block_size"]}
        engine = {"block_size": d["block_size"], "enable_prefix_caching": bool(d.get("enable_prefix_caching"))}
        for k in ("num_gpu_blocks", "max_num_seqs", "max_num_batched_tokens"):
            if d.get(k) is not None:
                engine[k] = d[k]
        definition["engine"] = engine
        trace = d.get("trace")
        if trace:
            raw = trace.read(4 * 1024 * 1024 + 1)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError({"trace": "the trace must be UTF-8 text"}) from None
            fmt = "jsonl" if trace.name.lower().endswith((".jsonl", ".json")) else "csv"
            definition["workload"] = {"trace": text, "format": fmt}
        else:
            from simulator.generators import parse_arrival
            from simulator.workload import WorkloadError

            try:
                arrival = parse_arrival(d["arrival"], d["arrival_unit"]).to_dict()
            except WorkloadError as exc:
                raise forms.ValidationError({"arrival": str(exc).partition(": ")[2] or str(exc)}) from None
            spec = {"n": d["n"], "prompt": d["prompt"], "output": d["output"], "arrival": arrival}
            if d.get("prefix_length"):
                spec["prefixes"] = [{"length": d["prefix_length"], "fraction": d.get("prefix_fraction") or 0.0}]
            definition["workload"] = {"spec": spec, "seed": d["seed"]}
        if d["mode"] == "grid":
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
                        raise forms.ValidationError({f"{key}_values": exc.messages}) from None
                elif i == 0 and d.get("axis1_start") is not None:
                    axes.append({"param": param, "start": d["axis1_start"], "stop": d.get("axis1_stop"),
                                 "steps": d.get("axis1_steps"), "scale": d.get("axis1_scale") or "linear"})
                else:
                    raise forms.ValidationError({f"{key}_values": "give values (or start, stop and steps)"})
            definition["axes"] = axes
        else:
            cliff = {"param": d.get("cliff_param") or "num_gpu_blocks",
                     "metric": d.get("cliff_metric") or "preemptions_per_request"}
            for k in ("lo", "hi", "resolution", "threshold"):
                if d.get(f"cliff_{k}") is not None:
                    cliff[k] = d[f"cliff_{k}"]
            definition["cliff"] = cliff
        return definition

    def add_definition_errors(self, errors: dict[str, list[str]]) -> None:
        for path, messages in errors.items():
            field = next((f for prefix, f in self.ERROR_FIELDS if path == prefix or path.startswith(prefix)), None)
            for m in messages:
                if field and field in self.fields:
                    self.add_error(field, m if path == field else f"{path}: {m}")
                else:
                    self.add_error(None, f"{path}: {m}")

    GROUPS = {
        "scenario": ("name", "mode", "model", "gpu", "tensor_parallel_size", "gpu_memory_utilization", "block_size",
                     "num_gpu_blocks", "max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching"),
        "workload": ("n", "prompt", "output", "arrival", "arrival_unit", "prefix_length", "prefix_fraction", "seed",
                     "trace"),
        "axes": ("axis1_param", "axis1_values", "axis1_start", "axis1_stop", "axis1_steps", "axis1_scale",
                 "axis2_param", "axis2_values"),
        "cliff": ("cliff_param", "cliff_metric", "cliff_lo", "cliff_hi", "cliff_resolution", "cliff_threshold"),
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
