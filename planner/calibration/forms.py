"""The calibration upload form."""

from __future__ import annotations

from django import forms


class CalibrationForm(forms.Form):
    name = forms.CharField(max_length=120, help_text="Your name for this calibration, e.g. “prod H100 Qwen”.")
    model = forms.ChoiceField(help_text="The model you measured.")
    gpu = forms.ChoiceField(label="GPU", help_text="The GPU it ran on.")
    tensor_parallel_size = forms.IntegerField(label="Tensor parallel size", min_value=1, max_value=64, initial=1)
    max_num_batched_tokens = forms.IntegerField(required=False, min_value=1,
                                                help_text="As the server ran (blank: vLLM's default).")
    max_num_seqs = forms.IntegerField(required=False, min_value=1)
    request_rate = forms.FloatField(required=False, min_value=0.0001, label="Request rate (requests/s)",
                                    help_text="Needed for a /metrics scrape, which has no arrival times.")
    file = forms.FileField(label="Measurement file",
                           help_text="JSON of vllm bench serve --save-result, a CSV of requests (arrival_time, "
                                     "prompt_tokens, output_tokens, ttft_s, e2e_s), or a scrape of /metrics.")

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        from gpuprofiles.models import GpuProfile, ModelProfile
        from gpuprofiles.selectors import visible_profiles

        self.fields["model"].choices = [(m.slug, m.name) for m in visible_profiles(ModelProfile, user=user).order_by("name")]
        self.fields["gpu"].choices = [(g.slug, g.name) for g in visible_profiles(GpuProfile, user=user).order_by("name")]

    def deployment(self) -> dict:
        d = self.cleaned_data
        return {k: d[k] for k in ("max_num_batched_tokens", "max_num_seqs") if d.get(k)}
