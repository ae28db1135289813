"""One table of sizing knobs (planner/sizing/knobs.py) gives the sizing form and POST /api/plan/ the same bounds,
defaults and rules: a value one door refuses the other refuses too, and a value at a bound passes both."""

from __future__ import annotations

import django.forms
import pytest
from django.test import Client

from planner.api.sizing import PlanCreateApi
from planner.sizing.forms import SizingForm
from planner.sizing.knobs import KNOBS
from simulator.base import DeploymentSpec, SpecError
from simulator.base.specs import DEPLOYMENT_LIMITS

pytestmark = pytest.mark.django_db

INPUT = PlanCreateApi.InputSerializer
NUMERIC = [k for k in KNOBS.values()
           if k.kind in ("int", "float") and not k.choices and k.name != "num_speculative_tokens"]


def _edges(knob):
    """(value, accepted) pairs at and just past the knob's bounds."""
    step = 1 if knob.kind == "int" else 0.5
    out = []
    if knob.low is not None:
        out += [(knob.low, True), (knob.low - step, False)]
    if knob.high is not None:
        out += [(knob.high, True), (knob.high + step, False)]
    return out


@pytest.mark.parametrize("knob", NUMERIC, ids=lambda k: k.name)
def test_both_doors_have_the_tables_bounds(knob):
    form, field = SizingForm.base_fields[knob.name], INPUT().fields[knob.name]
    assert (form.min_value, form.max_value) == (knob.low, knob.high)
    assert (field.min_value, field.max_value) == (knob.low, knob.high)
    assert form.required is not knob.optional
    assert field.required is False  # absent means the default (or the service's choice, as the help says)
    if knob.default is not None:
        assert field.default == knob.default


@pytest.mark.parametrize("knob", [k for k in NUMERIC if k.low is not None or k.high is not None],
                         ids=lambda k: k.name)
def test_a_value_past_a_bound_is_refused_by_both_doors(knob):
    for value, accepted in _edges(knob):
        form = SizingForm.base_fields[knob.name]
        api = INPUT(data={"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", knob.name: value})
        api.is_valid()
        try:
            form.clean(str(value))
            form_ok = True
        except Exception:  # noqa: BLE001 - django.forms.ValidationError
            form_ok = False
        assert form_ok is accepted, (knob.name, value)
        assert (knob.name not in api.errors) is accepted, (knob.name, value, api.errors)


@pytest.mark.parametrize("value", [0, -0.1, 1.01])
def test_memory_fraction_rule_is_one_message_at_both_doors(value):
    api = INPUT(data={"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "gpu_memory_utilization": value})
    assert not api.is_valid()
    page = Client().get("/", {"gpu_memory_utilization": value})
    message = str(api.errors["gpu_memory_utilization"][0])
    assert message.startswith("Must be more than 0 and at most 1")
    assert message.replace("'", "&#x27;") in page.content.decode()


def test_help_says_what_blank_means_in_each_doors_words():
    form, field = SizingForm.base_fields["max_model_len"], INPUT().fields["max_model_len"]
    assert form.help_text.endswith("Blank = the model's maximum.")
    assert field.help_text.endswith("Default: the model's maximum.")


SPEC_BOUNDED = [k for k in NUMERIC if k.name in DEPLOYMENT_LIMITS]


def test_the_spec_bounds_most_knobs():
    assert len(SPEC_BOUNDED) >= 8, [k.name for k in SPEC_BOUNDED]


@pytest.mark.parametrize("knob", SPEC_BOUNDED, ids=lambda k: k.name)
def test_a_knobs_top_is_the_simulator_specs_and_the_spec_refuses_past_it(knob):
    """Range rules live once, in the simulator's spec (simulator.base.specs.DEPLOYMENT_LIMITS): the doors' tops are
    the spec's, and the spec itself (what the CLI, sweeps and searches build) accepts the top and refuses past it,
    naming the field."""
    assert knob.high == DEPLOYMENT_LIMITS[knob.name]
    top = int(knob.high) if knob.kind == "int" else float(knob.high)
    DeploymentSpec(**{knob.name: top})
    with pytest.raises(SpecError) as caught:
        DeploymentSpec(**{knob.name: top + (1 if knob.kind == "int" else 0.5)})
    assert caught.value.field == knob.name and f"{top:,.0f}" in caught.value.message


# --------------------------------------------------------------------------- the knobs of fixed values and words


@pytest.mark.parametrize(("name", "bad", "words"), [
    ("dtype", "fp7", "Must be one of the weight dtypes: auto, bf16, fp16, fp32, fp8, int4, "),
    ("kv_cache_dtype", "fp7", "Must be one of the KV cache dtypes: auto, fp32, "),
    ("block_size", 7, "Must be one of vLLM's block sizes (1, 8, 16, 32, 64, 128, 256 tokens"),
    ("quantization", "hqq", "'hqq' is not a quantization method the planner knows (known: awq, "),
    ("vllm_version", "latest", "Give a version such as 0.10.1 or 0.28.0; got 'latest'."),
    ("vllm_version", "1x", "Give a version such as 0.10.1 or 0.28.0; got '1x'."),
])
def test_both_doors_give_the_same_words_for_the_same_bad_value(name, bad, words):
    """Issue 29 item 5: the five fields the form and the serializer declared apart (with different values and
    words) come from the knob table; a bad value gets one message, whichever door it came through."""
    api = INPUT(data={"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", name: bad})
    assert not api.is_valid()
    (api_message,) = [str(m) for m in api.errors[name]]
    with pytest.raises(django.forms.ValidationError) as caught:
        SizingForm.base_fields[name].clean(str(bad))
    (form_message,) = caught.value.messages
    assert api_message == form_message and api_message.startswith(words), (api_message, form_message)


@pytest.mark.parametrize(("name", "good"), [
    ("dtype", "int8"), ("dtype", "nvfp4"), ("kv_cache_dtype", "fp8_e4m3"), ("block_size", 1), ("block_size", 256),
    ("quantization", "awq_marlin"), ("quantization", "AWQ"), ("vllm_version", "v0.10.1"),
    ("vllm_version", "0.10.1.post1"),
])
def test_a_value_one_door_takes_the_other_takes_too(name, good):
    api = INPUT(data={"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", name: good})
    assert api.is_valid(), api.errors
    SizingForm.base_fields[name].clean(str(good))


def test_the_value_lists_are_the_simulators():
    from simulator.base.specs import DTYPE_BYTES, KV_CACHE_DTYPES, VLLM_BLOCK_SIZES

    assert [v for v, _ in KNOBS["dtype"].choices] == ["auto", "bf16", "fp16", "fp32", "fp8", "int4",
                                                      *(d for d in DTYPE_BYTES if d not in
                                                        ("bf16", "fp16", "fp32", "fp8", "int4"))]
    assert tuple(v for v, _ in KNOBS["kv_cache_dtype"].choices) == KV_CACHE_DTYPES
    assert tuple(v for v, _ in KNOBS["block_size"].choices) == VLLM_BLOCK_SIZES
    for name in ("dtype", "kv_cache_dtype", "block_size"):  # the form's menu is the table's
        assert SizingForm.base_fields[name].choices == list(KNOBS[name].choices)
    for name in ("dtype", "kv_cache_dtype"):  # and so are the API's values
        assert list(INPUT().fields[name].choices) == [v for v, _ in KNOBS[name].choices]
