"""A day plan's definition (issue 36, "bad input"): every field checked with a message at its own path, all
problems at once, unknown fields named, absurd sizes refused with the limit, defaults from the catalog."""

from __future__ import annotations

import copy

import pytest
from rest_framework.test import APIClient

from planner.dayplans import definition, services
from planner.dayplans.api import EXAMPLE_DAY_PLAN
from planner.errors import InputError

pytestmark = pytest.mark.django_db


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("val", password="pw-val-123456")


def _body(**change):
    body = copy.deepcopy(EXAMPLE_DAY_PLAN)
    for k, v in change.items():
        if v is None:
            body.pop(k, None)
        else:
            body[k] = v
    return body


def _errors(user, body) -> dict:
    with pytest.raises(InputError) as exc:
        definition.validate(body, owner=user)
    return exc.value.errors


@pytest.mark.parametrize("change, field, words", [
    ({"policy": {"kind": "hpa", "min_replicas": 4, "max_replicas": 2}}, "policy.max_replicas", "below min_replicas"),
    ({"policy": {"kind": "telepathy"}}, "policy.kind", "fixed"),
    ({"policy": {"kind": "fixed", "replicas": 500}}, "policy.replicas", "at most 64 alive at once"),
    ({"policy": {"kind": "oracle", "capacity_per_replica": 0.01}}, "policy.max_replicas", "capacity_per_replica"),
    ({"policy": {"kind": "hpa", "targett": 3}}, "policy.targett", "unknown"),
    ({"policy": {"kind": "oracle", "sync_s": "soon"}}, "policy.sync_s", "must be a number"),
    ({"policy": None}, "policy", "give the autoscaling policy"),
    ({"policy": [1, 2]}, "policy", "JSON object"),
    ({"cold_start": {"seconds": -1}}, "cold_start.seconds", "0 to 86,400"),
    ({"cold_start": {"seconds": 10, "compile_s": 3}}, "cold_start", "not both"),
    ({"cold_start": {"compile_s": "fast"}}, "cold_start.compile_s", "seconds"),
    ({"cold_start": {"weights_gib": 1e9}}, "cold_start.weights_gib", "10,000"),
    ({"cold_start": {"warp": 1}}, "cold_start.warp", "unknown"),
    ({"routing": "random"}, "routing", "least-loaded"),
    ({"gpus_per_replica": 0}, "gpus_per_replica", "whole number"),
    ({"gpus_per_replica": 2.5}, "gpus_per_replica", "whole number"),
    ({"price_per_gpu_hour": -3}, "price_per_gpu_hour", "> 0"),
    ({"slo": {"ttft_s": 0}}, "slo.ttft_s", "> 0"),
    ({"slo": {"itl_s": 0.05}}, "slo.itl_s", "unknown"),
    ({"chunk_s": 301}, "chunk_s", "whole number of the policy's syncs"),
    ({"chunk_s": 0}, "chunk_s", "> 0"),
    ({"chunk_s": 1}, "chunk_s", ""),
    ({"overlap_s": 900}, "overlap_s", "at most chunk_s"),
    ({"name": "x" * 300}, "name", "200 characters"),
    ({"colour": "blue"}, "colour", "unknown field"),
    ({"workload": {"spec": {"n": 10 ** 9, "arrival": "hourly:1,2"}}}, "workload.spec.n", "at most 2,000,000"),
    ({"workload": {"spec": {"n": 100, "arrival": "poisson:2"}}}, "workload.spec.arrival", "seconds"),
    ({"workload": {"spec": {"n": 3000, "arrival": "hourly:" + ",".join(["100"] * 72)}}}, "workload", "48 hours"),
    ({"workload": {"trace": "arrival,prompt_len\n"}}, "workload.trace", ""),
    ({"engine": {"num_gpu_blocks": -4}}, "engine.num_gpu_blocks", ""),
    ({"model": "no-such-model", "gpu": "h100-sxm5-80gb", "engine": None}, "model", ""),
])
def test_each_bad_field_is_named(user, change, field, words):
    errors = _errors(user, _body(**change))
    assert field in errors, errors
    assert words in " ".join(errors[field])


def test_every_problem_at_once(user):
    errors = _errors(user, _body(policy={"kind": "hpa", "min_replicas": 4, "max_replicas": 2}, routing="random",
                                 slo={"ttft_s": -1}, price_per_gpu_hour=0, cold_start={"seconds": "x"}, extra=1))
    assert {"policy.max_replicas", "routing", "slo.ttft_s", "price_per_gpu_hour", "cold_start.seconds",
            "extra"} <= set(errors)


def test_the_busiest_chunk_must_fit_the_simulators_memory(user):
    body = _body(workload={"spec": {"n": 200_000, "prompt": "normal:64,8", "output": "normal:16,4",
                                    "arrival": {"kind": "piecewise", "segments": [[50, 4000]], "unit": "s"}}},
                 policy={"kind": "fixed", "replicas": 64}, chunk_s=4200, overlap_s=0)
    errors = _errors(user, body)
    assert "GiB" in errors["chunk_s"][0] and "shorter chunks" in errors["chunk_s"][0]


def test_defaults_come_from_the_catalog_and_the_deployment(user):
    _, snap = definition.validate({
        "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "deployment": {"tensor_parallel_size": 2},
        "workload": {"spec": {"n": 2000, "arrival": "hourly:" + ",".join(["1000"] * 2)}},
        "policy": {"kind": "oracle", "capacity_per_replica": 2}}, owner=user)
    day = snap["day"]
    assert day["gpus_per_replica"] == 2 and day["price_source"] == "the catalog's price of the GPU"
    assert day["price_per_gpu_hour"] == snap["gpu"]["spec"]["price_per_hour"] > 0
    assert day["chunk_s"] == 3600 and day["overlap_s"] == 300 and len(day["plans"]) == 2
    # 8B in bf16 over TP 2: about 7.5 GiB a GPU, read at 1 GiB/s with the default parts
    assert day["cold_start"]["weights_gib"] == pytest.approx(7.5, abs=0.5)
    assert day["cold_start_s"] == pytest.approx(25 + day["cold_start"]["weights_gib"] + 30 + 20)
    assert day["policy_resolved"]["lead_s"] == pytest.approx(day["cold_start_s"] + 15)  # the oracle's lead


def test_the_api_answers_400_with_the_fields_and_429_over_the_quota(user, settings, monkeypatch):
    monkeypatch.setattr(services, "chunk_enqueue", lambda plan_id, index: None)
    c = APIClient()
    c.force_authenticate(user)
    r = c.post("/api/day-plans/", _body(policy={"kind": "fixed", "replicas": 0}, colour=1), format="json")
    assert r.status_code == 400 and {"policy.replicas", "colour"} <= set(r.json()["errors"])
    assert c.post("/api/day-plans/", [1], format="json").status_code == 400
    settings.KVP_USER_MAX_DAY_PLANS = 1
    assert c.post("/api/day-plans/", _body(), format="json").status_code == 202
    r = c.post("/api/day-plans/", _body(), format="json")
    assert r.status_code == 429 and "limit per user is 1" in r.json()["errors"]["non_field_errors"][0]


def test_a_public_trace_and_a_catalog_deployment_plan_a_day(user, monkeypatch):
    """The Azure conversation trace's first 1,500 requests (tests/data/traces/README.md) on Llama 3.1 8B, one
    H100, timed by its roofline clock: the trace's arrivals are seconds, the price is the catalog's."""
    from pathlib import Path

    monkeypatch.setattr(services, "chunk_enqueue", lambda plan_id, index: None)
    text = (Path(__file__).resolve().parents[1] / "data" / "traces" / "azure_conv_2023_head1500.csv").read_text()
    plan = services.dayplan_create(owner=user, definition={
        "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "workload": {"trace": text, "format": "auto"},
        "policy": {"kind": "fixed", "replicas": 1}, "slo": {"ttft_s": 2}, "chunk_s": 150, "overlap_s": 30})
    assert plan.snapshot["workload"]["format"] == "azure" and plan.num_chunks >= 2
    assert plan.definition["workload"]["trace"].startswith("<1500 requests")
    plan = services.dayplan_run_here(plan=plan)
    assert plan.status == "done", plan.error
    a, price = plan.answer, plan.snapshot["gpu"]["spec"]["price_per_hour"]
    assert a["requests"] == 1500 and a["cost"] == pytest.approx(a["gpu_hours"] * price)
    assert a["saving"] == pytest.approx(0.0) and a["peak_replicas"] == 1  # a fixed fleet is its own peak
