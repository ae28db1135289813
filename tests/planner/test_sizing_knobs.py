"""One table of sizing knobs (planner/sizing/knobs.py) gives the sizing form and POST /api/plan/ the same bounds,
defaults and rules: a value one door refuses the other refuses too, and a value at a bound passes both."""

from __future__ import annotations

import pytest
from django.test import Client

from planner.api.sizing import PlanCreateApi
from planner.sizing.forms import SizingForm
from planner.sizing.knobs import KNOBS
from simulator.base import DeploymentSpec, SpecError
from simulator.base.specs import DEPLOYMENT_LIMITS

pytestmark = pytest.mark.django_db

INPUT = PlanCreateApi.InputSerializer
NUMERIC = [k for k in KNOBS.values() if k.kind in ("int", "float") and k.name != "num_speculative_tokens"]


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
