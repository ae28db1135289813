"""Sweep pages: the form creates a sweep or explains what is wrong; owner-only detail; never a 500."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from planner.models import Sweep
from planner.sweeps import services

pytestmark = pytest.mark.django_db

FORM = {"name": "from the form", "mode": "grid", "tensor_parallel_size": 1, "gpu_memory_utilization": 0.9,
        "block_size": 16, "num_gpu_blocks": 500, "enable_prefix_caching": "on", "n": 20, "prompt": "normal:100,20",
        "output": "normal:30,5", "arrival": "poisson:2", "arrival_unit": "step", "seed": 0,
        "axis1_param": "num_gpu_blocks", "axis1_values": "100, 200, 400", "axis1_scale": "linear",
        "cliff_metric": "preemptions_per_request", "cliff_param": "num_gpu_blocks"}


@pytest.fixture
def client():
    c = Client()
    c.force_login(get_user_model().objects.create_user("pat", password="pw-123456789"))
    return c


def test_form_creates_a_sweep_and_shows_progress(client):
    r = client.post("/sweeps/new/", FORM)
    assert r.status_code == 302, r.content.decode()[:2000]
    sweep = Sweep.objects.get(name="from the form")
    assert sweep.total_points == 3
    page = client.get(r["Location"]).content.decode()
    assert 'class="progress"' in page and "0</span> of <span data-field=\"points_total\">3</span> points" in page
    assert "sweep_progress.js" in page


@pytest.mark.parametrize("change,field_text", [
    ({"axis1_values": "100, lots"}, "not a number"),
    ({"num_gpu_blocks": "", "axis1_param": "max_num_seqs", "axis1_values": "4, 8"}, "required without a model"),
    ({"arrival": "sometimes"}, "unknown process"),
    ({"axis1_param": "max_num_seqs", "axis1_values": "4, 4"}, "distinct"),
    ({"mode": "cliff", "cliff_lo": "10", "cliff_hi": "5", "cliff_resolution": "1"}, "greater than “search from”"),
])
def test_form_errors_are_shown_by_field(client, change, field_text):
    r = client.post("/sweeps/new/", {**FORM, **change})
    # The form comes back with its errors as a normal page (a 4xx would be a failed load in the browser).
    assert r.status_code == 200
    assert not Sweep.objects.exists()
    html = r.content.decode()
    assert field_text in html.lower()
    assert re.search(r'<ul class="errorlist[^"]*" id="id_\w+_error" role="alert">', html) or \
        'id="error-summary"' in html
    assert 'id="error-summary"' in html, "a summary of every problem at the top"


def test_cliff_resolution_defaults_to_a_fiftieth_of_the_range(client):
    r = client.post("/sweeps/new/", {**FORM, "mode": "cliff", "cliff_lo": "100", "cliff_hi": "600"})
    assert r.status_code == 302, r.content.decode()[:2000]
    assert Sweep.objects.get().snapshot["cliff"]["resolution"] == 10


def test_a_running_cliff_search_shows_no_time_left_and_a_grid_does(client):
    """A cliff search stops once it has bracketed the cliff, so its time left is unknown: none is shown."""
    cliff = client.post("/sweeps/new/", {**FORM, "mode": "cliff", "cliff_lo": "100", "cliff_hi": "600"})
    grid = client.post("/sweeps/new/", FORM)
    Sweep.objects.update(status=Sweep.Status.RUNNING)
    assert 'data-field="eta"' not in client.get(cliff["Location"]).content.decode()
    assert 'remaining <span data-field="eta">estimating…' in client.get(grid["Location"]).content.decode()


def test_every_form_error_at_once_in_words():
    from planner.sweeps.forms import human_message

    assert human_message("prompt: normal takes 2 argument(s) (mean, std), got 1 in 'normal:512'") == (
        "“normal” needs 2 numbers (mean, std) after the colon, not 1: for example normal:512,128 (mean, spread)")


def test_detail_is_owner_only_and_list_needs_sign_in(client):
    owner = get_user_model().objects.create_user("own", password="pw-123456789")
    sweep = services.sweep_create(owner=owner, definition={
        "engine": {"num_gpu_blocks": 300}, "workload": {"spec": {"n": 5}},
        "axes": [{"param": "max_num_seqs", "values": [1, 2]}]})
    assert client.get(f"/sweeps/{sweep.pk}/").status_code == 403
    assert client.post(f"/sweeps/{sweep.pk}/cancel/").status_code == 403
    assert Client().get("/sweeps/").status_code == 302
    assert client.get("/sweeps/").status_code == 200
    o = Client()
    o.force_login(owner)
    services.chunk_run(sweep_id=sweep.pk, index=0)
    page = o.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert "Open the report" in page


def test_new_sweep_form_defaults_to_llama_8b_on_one_h100_with_human_labels(client):
    html = client.get("/sweeps/new/").content.decode()
    assert re.search(r'<option value="llama-3-1-8b" selected>Llama 3.1 8B</option>', html)
    assert re.search(r'<option value="h100-sxm5-80gb" selected>H100 SXM5 80GB · 79.2 GiB · \$3.78/h</option>', html)
    labels = re.findall(r'<label for="id_\w+">([^<]+)</label>', html)
    for label in ("GPU", "Max running requests (max_num_seqs)", "Axis 1 values", "Axis 2 values"):
        assert label in labels
    assert len(labels) == len(set(labels)), "two fields share a label"
    assert not any(label.replace("_", " ") != label and "(" not in label for label in labels), labels
    # every field explains itself (with its unit where it has one)
    assert html.count('class="help" id="id_') == len(re.findall(r'<div class="field', html))


def test_new_sweep_form_as_it_comes_runs_the_default_deployment(client):
    from planner.sweeps.forms import SweepForm

    form = SweepForm()
    initial = {name: form.get_initial_for_field(field, name) for name, field in form.fields.items()}
    data = {name: ("on" if value is True else value) for name, value in initial.items()
            if value is not None and value != "" and value is not False}
    r = client.post("/sweeps/new/", data)
    assert r.status_code == 302, r.content.decode()[:3000]
    sweep = Sweep.objects.get()
    assert sweep.total_points == 5
    inputs = sweep.snapshot
    assert inputs["model"]["spec"]["name"] == "Llama 3.1 8B" and inputs["gpu"]["spec"]["name"] == "H100 SXM5 80GB"
    assert inputs["sizing"]["num_gpus"] == 1


REPLICAS_FORM = {**FORM, "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "num_gpu_blocks": "", "n": 20,
                 "arrival": "poisson:5", "arrival_unit": "s", "axis1_param": "num_instances", "axis1_values": "1, 2",
                 "cluster_routing": "least-loaded", "slo_ttft_ms": "500", "slo_itl_ms": "50",
                 "slo_percentile": "p99"}


def test_form_sweeps_replicas_with_a_base_cluster_and_latency_targets(client):
    r = client.post("/sweeps/new/", REPLICAS_FORM)
    assert r.status_code == 302, r.content.decode()[:3000]
    sweep = Sweep.objects.get()
    assert sweep.total_points == 2
    assert sweep.snapshot["cluster"] == {"num_instances": 1, "routing": "least-loaded", "router_delay_s": 0.0}
    assert sweep.snapshot["slo"] == {"ttft_s": 0.5, "itl_s": 0.05, "percentile": "p99"}
    assert sweep.snapshot["axes"] == [{"param": "num_instances", "values": [1, 2]}]


def test_form_routing_axis_takes_weighted_policies_separated_by_spaces(client):
    r = client.post("/sweeps/new/", {**REPLICAS_FORM, "axis1_param": "routing", "cluster_instances": "2",
                                     "axis1_values": "round-robin  weighted:prefix-affinity:3,queue-depth:1"})
    assert r.status_code == 302, r.content.decode()[:3000]
    sweep = Sweep.objects.get()
    assert sweep.snapshot["axes"][0]["values"] == ["round-robin", "weighted:prefix-affinity:3,queue-depth:1"]
    assert sweep.snapshot["cluster"]["num_instances"] == 2


def test_form_sweeps_the_cpu_tier_in_gib(client):
    r = client.post("/sweeps/new/", {**REPLICAS_FORM, "axis1_param": "cpu_tier_gib", "axis1_values": "0, 8"})
    assert r.status_code == 302, r.content.decode()[:3000]
    assert Sweep.objects.get().snapshot["axes"] == [{"param": "cpu_tier_gib", "values": [0.0, 8.0]}]


@pytest.mark.parametrize("change, field, text", [
    ({"cluster_routing": "telepathy"}, "cluster_routing", "telepathy"),
    ({"cluster_instances": "65"}, "cluster_instances", "64"),
    ({"slo_ttft_ms": "-1"}, "slo_ttft_ms", "greater than or equal to"),
    ({"slo_percentile": "p75"}, "slo_percentile", "valid choice"),
])
def test_cluster_and_slo_errors_are_shown_at_their_field(client, change, field, text):
    r = client.post("/sweeps/new/", {**REPLICAS_FORM, **change})
    assert r.status_code == 200 and not Sweep.objects.exists()
    m = re.search(rf'<ul class="errorlist" id="id_{field}_error"[^>]*>(.*?)</ul>', r.content.decode(), re.S)
    assert m and text in m.group(1), (field, r.context["form"].errors)


def test_a_report_runs_again_as_a_new_sweep_of_the_signed_in_user(client, monkeypatch):
    from planner.models import Report

    monkeypatch.setattr(services, "sweep_enqueue", lambda sweep_id: None)
    owner = get_user_model().objects.create_user("own2", password="pw-123456789")
    sweep = services.sweep_create(owner=owner, definition={
        "name": "first", "engine": {"num_gpu_blocks": 300}, "workload": {"spec": {"n": 5}},
        "axes": [{"param": "max_num_seqs", "values": [1, 2]}]})
    for i in range(sweep.num_chunks):
        services.chunk_run(sweep_id=sweep.pk, index=i)
    report = Report.objects.get(sweep=sweep)
    r = client.post(f"/reports/{report.slug}/run-again/")
    assert r.status_code == 302
    again = Sweep.objects.exclude(pk=sweep.pk).get()
    assert again.owner.username == "pat" and again.total_points == 2 and again.name == "first (again)"
    assert Client().post(f"/reports/{report.slug}/run-again/").status_code == 302  # signed out: to sign in
    assert Sweep.objects.count() == 2


def test_the_form_takes_the_requests_sampler_path(client):
    """The sweep form's "Sampling" select reaches the definition (``deployment.sampling``) and the snapshot the
    points are timed with; a value that is no path is an error on that field, and no sweep is made."""
    base = {**REPLICAS_FORM, "name": "greedy from the form", "axis1_param": "max_num_seqs", "axis1_values": "8, 16",
            "slo_ttft_ms": "", "slo_itl_ms": "", "cluster_routing": ""}
    r = client.post("/sweeps/new/", {**base, "sampling": "greedy"})
    assert r.status_code == 302, r.content.decode()[:3000]
    sweep = Sweep.objects.get(name="greedy from the form")
    assert sweep.definition["deployment"]["sampling"] == "greedy" and sweep.snapshot["sampling"] == "greedy"
    r = client.post("/sweeps/new/", {**base, "name": "the model's own", "sampling": ""})
    assert r.status_code == 302, r.content.decode()[:3000]
    sweep = Sweep.objects.get(name="the model's own")
    assert "sampling" not in sweep.definition["deployment"]  # the select's default: each model's own path
    assert sweep.snapshot["sampling_source"] in ("model", "default")
    r = client.post("/sweeps/new/", {**base, "name": "no such path", "sampling": "beam"})
    assert r.status_code == 200 and not Sweep.objects.filter(name="no such path").exists()
    assert "beam is not a sampler path" in r.content.decode()


def test_the_sweep_forms_sizes_stop_at_the_specs_tops_on_their_own_field():
    """A 400-digit shared prefix was an OverflowError, a 500, then a message on the wrong field (prefix_fraction):
    the form's integer fields now stop at the simulator spec's tops (one table), each on its own field."""
    from django import forms as django_forms

    from planner.sweeps.forms import SweepForm
    from simulator.base.specs import DEPLOYMENT_LIMITS
    from simulator.workload.requests import MAX_TOKENS

    tops = {"tensor_parallel_size": DEPLOYMENT_LIMITS["tensor_parallel_size"], "block_size": DEPLOYMENT_LIMITS["block_size"],
            "max_num_seqs": DEPLOYMENT_LIMITS["max_num_seqs"],
            "max_num_batched_tokens": DEPLOYMENT_LIMITS["max_num_batched_tokens"], "prefix_length": MAX_TOKENS}
    for name, top in tops.items():
        field = SweepForm.base_fields[name]
        assert field.clean(str(top)) == top
        with pytest.raises(django_forms.ValidationError):
            field.clean("9" * 400)
