"""Sweeps of TP x PP x DP deployments with expert parallelism on or off (issue 34): each point a DP group.

Qwen3-30B-A3B (128 routed experts, the catalog's) on H100s; a few hundred requests.
"""

import csv
import io
import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from planner.models import Report, Sweep
from planner.sweeps import definition as defn
from planner.sweeps import services
from planner.sweeps.runner import simulate_points, workload_of

pytestmark = pytest.mark.django_db

WORKLOAD = {"spec": {"n": 120, "prompt": "normal:1024,256", "output": "normal:64,16",
                     "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 1}
MOE = {"model": "qwen3-30b-a3b", "gpu": "h100-sxm5-80gb", "workload": WORKLOAD}


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="pw-123456789")


@pytest.fixture
def api(alice):
    c = APIClient()
    c.force_authenticate(alice)
    return c


def run(raw):
    _, snap, points = defn.validate(raw, owner=None)
    return points, [simulate_points(workload_of(p["workload"], snap["workload"]), [p], record_steps=True)[0]
                    for p in points]


def errors_of(raw):
    with pytest.raises(defn.DefinitionError) as exc:
        defn.validate(raw, owner=None)
    return exc.value.errors


def test_a_dp_axis_simulates_each_point_as_its_dp_group_and_dp_1_is_the_plain_engine():
    points, results = run({**MOE, "axes": [{"param": "data_parallel_size", "values": [1, 2]},
                                           {"param": "enable_expert_parallel", "values": [False, True]}]})
    plain_points, plain = run({**MOE, "axes": [{"param": "max_num_seqs", "values": [256]}]})
    by = {(p["params"]["data_parallel_size"], p["params"]["enable_expert_parallel"]): r
          for p, r in zip(points, results)}
    # DP 1, EP off (and EP on at TP x DP = 1, which vLLM runs without EP): today's engine, its figures unchanged
    for key in ((1, False), (1, True)):
        assert "data_parallel" not in by[key] and "deployment_shape" not in by[key]["metrics"]
        assert by[key]["metrics"] == plain[0]["metrics"] and by[key]["totals"] == plain[0]["totals"]
    for ep, shape in ((False, "DP 2"), (True, "DP 2 + EP 2")):
        r = by[(2, ep)]
        m, ranks = r["metrics"], r["data_parallel"]["ranks"]
        assert m["deployment_shape"] == shape and m["data_parallel_size"] == 2 and m["dp_lockstep"] is True
        assert r["meta"]["num_gpus"] == 2 and r["meta"]["data_parallel"]["shape"] == shape
        assert [x["rank"] for x in ranks] == [0, 1] and sum(x["requests"] for x in ranks) == 120 == m["finished"]
        assert all(x["requests"] > 40 for x in ranks), ranks  # vLLM's balancing spreads the traffic
        assert m["kv_cache_tokens_per_deployment"] == 2 * m["kv_cache_tokens"]
        assert m["dp_dummy_steps"] == sum(x["dummy_steps"] for x in ranks) and m["dp_group_steps"] > 0
        assert max(x["peak_kv_usage"] for x in ranks) == pytest.approx(m["peak_kv_usage"])
    # two ranks under the same traffic answer sooner than one engine
    assert by[(2, True)]["metrics"]["ttft_p90_s"] < by[(1, False)]["metrics"]["ttft_p90_s"]
    assert by[(2, False)]["metrics"]["duration_s"] != by[(2, True)]["metrics"]["duration_s"]  # the EP clock differs
    assert plain_points[0]["meta"] == next(p["meta"] for p in points if p["params"]["data_parallel_size"] == 1
                                           and not p["params"]["enable_expert_parallel"])


def test_a_dense_models_dp_ranks_run_as_independent_engines():
    _, results = run({"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "workload": WORKLOAD,
                      "deployment": {"data_parallel_size": 2}, "axes": [{"param": "max_num_seqs", "values": [64]}]})
    r = results[0]
    assert r["metrics"]["deployment_shape"] == "DP 2" and r["metrics"]["dp_lockstep"] is False
    assert r["data_parallel"]["group_steps"] == 0 and r["metrics"]["dp_dummy_steps"] == 0
    assert sum(x["requests"] for x in r["data_parallel"]["ranks"]) == 120


@pytest.mark.parametrize("change, field, words", [
    ({"model": "llama-3-1-8b", "deployment": {"enable_expert_parallel": True, "tensor_parallel_size": 2}},
     "deployment.enable_expert_parallel", "applies to MoE layers only"),
    ({"deployment": {"enable_expert_parallel": True, "data_parallel_size": 256}},
     "deployment.enable_expert_parallel", "128 routed experts"),
    ({"deployment": {"data_parallel_size": 2000}}, "deployment.data_parallel_size", "1,024"),
    ({"deployment": {"data_parallel_size": 2}, "cluster": {"num_instances": 2, "routing": "least-loaded"}},
     "cluster.routing", "routed round-robin"),
    ({"deployment": {"data_parallel_size": 2, "pipeline_parallel_size": 2}}, "deployment.pipeline_parallel_size",
     "PP 1"),
    ({"deployment": {"data_parallel_size": 2}, "engine": {"speculative": {"method": "ngram",
                                                                         "num_speculative_tokens": 2,
                                                                         "acceptance_rate": 0.6}}},
     "engine.speculative", "lockstep DP group"),
    ({"deployment": {"data_parallel_size": 2}, "workload": {"spec": {"n": 20, "arrival": "poisson:2"}}},
     "workload.spec.arrival", "arrivals in seconds"),
])
def test_shapes_vllm_refuses_and_what_a_dp_group_cannot_be_combined_with_name_the_field(change, field, words):
    errs = errors_of({**MOE, "axes": [{"param": "max_num_seqs", "values": [64]}], **change})
    assert field in errs and words in " ".join(errs[field]), errs


def test_a_refused_axis_value_names_its_point_and_vllms_rule():
    errs = errors_of({**MOE, "deployment": {"enable_expert_parallel": True},
                      "axes": [{"param": "data_parallel_size", "values": [2, 200]}]})
    (where, messages), = errs.items()
    assert "data_parallel_size=200" in where and where.endswith(".enable_expert_parallel"), errs
    assert "determine_expert_map" in messages[0]


def test_the_api_runs_a_dp_sweep_and_its_report_exports_the_shape_and_the_ranks(api, alice):
    body = {**MOE, "name": "qwen3 dp", "axes": [{"param": "data_parallel_size", "values": [1, 2]}],
            "deployment": {"enable_expert_parallel": True, "tensor_parallel_size": 1}}
    r = api.post("/api/sweeps/", body, format="json")
    assert r.status_code == 202, r.json()
    sweep = Sweep.objects.get(pk=r.json()["id"])
    for ch in sweep.chunks.all():
        services.chunk_run(sweep_id=sweep.pk, index=ch.index)
    points = api.get(f"/api/sweeps/{sweep.pk}/results/").json()["points"]
    assert [p["metrics"].get("deployment_shape") for p in points] == [None, "DP 2 + EP 2"]
    report = Report.objects.get(sweep=sweep)
    c = Client()
    rows = list(csv.DictReader(io.StringIO(c.get(f"/api/reports/{report.slug}/?format=csv").content.decode())))
    assert {(r["data_parallel_size"], r["value"]) for r in rows if r["metric"] == "deployment_shape"} == {
        ("2", "DP 2 + EP 2")}
    doc = json.loads(c.get(f"/api/reports/{report.slug}/?format=json").content)
    ranks = doc["points"][1]["data_parallel"]["ranks"]
    assert len(ranks) == 2 and {"requests", "dummy_steps", "peak_kv_usage"} <= set(ranks[0])
    assert doc["inputs"]["deployment"]["enable_expert_parallel"] is True
    html = c.get(f"/reports/{report.slug}/download.html").content.decode()
    assert "<th>Deployment</th>" in html and "<td>DP 2 + EP 2</td>" in html


def test_one_simulation_of_a_dp_group_answers_with_its_ranks(api):
    r = api.post("/api/simulations/", {**MOE, "deployment": {"data_parallel_size": 2,
                                                              "enable_expert_parallel": True}}, format="json")
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["metrics"]["deployment_shape"] == "DP 2 + EP 2" and len(body["data_parallel"]["ranks"]) == 2
    assert body["meta"]["num_gpus"] == 2
    bad = api.post("/api/simulations/", {**MOE, "model": "llama-3-1-8b",
                                         "deployment": {"enable_expert_parallel": True}}, format="json")
    assert bad.status_code == 400 and "MoE layers only" in " ".join(bad.json()["errors"]["deployment.enable_expert_parallel"])


FORM = {"name": "dp form", "mode": "grid", "model": "qwen3-30b-a3b", "gpu": "h100-sxm5-80gb",
        "tensor_parallel_size": 1, "data_parallel_size": 2, "enable_expert_parallel": "on",
        "gpu_memory_utilization": 0.9, "block_size": 16, "n": 40, "prompt": "normal:100,20", "output": "normal:30,5",
        "arrival": "poisson:4", "arrival_unit": "s", "seed": 0, "axis1_param": "max_num_seqs",
        "axis1_values": "16, 64", "axis1_scale": "linear", "cliff_metric": "preemptions_per_request",
        "cliff_param": "num_gpu_blocks"}


def test_the_sweep_form_takes_dp_and_ep_and_shows_a_refused_shape_at_its_field(alice):
    c = Client()
    c.force_login(alice)
    assert 'name="data_parallel_size"' in c.get("/sweeps/new/").content.decode()
    r = c.post("/sweeps/new/", FORM)
    assert r.status_code == 302, r.content.decode()[:2000]
    sweep = Sweep.objects.get(name="dp form")
    assert sweep.definition["deployment"]["data_parallel_size"] == 2
    assert sweep.snapshot["deployment"]["enable_expert_parallel"] is True and sweep.snapshot["sizing"]["num_gpus"] == 2
    r = c.post("/sweeps/new/", {**FORM, "name": "dense", "model": "llama-3-1-8b"})
    html = r.content.decode()
    assert r.status_code == 200 and 'id="id_enable_expert_parallel_error"' in html and "MoE layers only" in html


def test_replicas_of_a_dp_group_in_a_sweep_are_that_many_groups_behind_a_round_robin_router():
    _, results = run({**MOE, "deployment": {"data_parallel_size": 2, "enable_expert_parallel": True},
                      "axes": [{"param": "num_instances", "values": [1, 2]}]})
    one, two = results
    assert [len(r["data_parallel"]["ranks"]) for r in results] == [2, 4]
    assert two["meta"]["price_per_hour"] == pytest.approx(2 * one["meta"]["price_per_hour"])
    assert two["metrics"]["num_instances"] == 2 and two["metrics"]["finished"] == 120
    assert two["metrics"]["ttft_p90_s"] < one["metrics"]["ttft_p90_s"]


REPLICAS = {**MOE, "workload": {"spec": {"n": 200, "prompt": "normal:1024,256", "output": "normal:64,16",
                                         "arrival": {"kind": "poisson", "rate": 40, "unit": "s"}}, "seed": 1},
            "deployment": {"data_parallel_size": 2, "enable_expert_parallel": True},
            "slo": {"ttft_s": 0.12}, "max_instances": 4}


def test_the_replicas_search_counts_dp_groups(api):
    r = api.post("/api/replicas/", REPLICAS, format="json")
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["deployment_shape"] == "DP 2 + EP 2" and body["gpus_per_replica"] == 2
    n = body["num_instances"]
    assert n == 2 and [t["meets"] for t in body["trials"]] == [False, True], body["trials"]
    assert "--data-parallel-size 2 --enable-expert-parallel" in body["launch"]["vllm_serve"]
    # the trial at the answer is the sweep point of that many DP groups
    _, results = run({k: v for k, v in REPLICAS.items() if k not in ("slo", "max_instances")}
                     | {"axes": [{"param": "num_instances", "values": [n]}]})
    trial = next(t for t in body["trials"] if t["num_instances"] == n)
    assert trial["ttft_s"] == pytest.approx(results[0]["metrics"]["ttft_p90_s"])
    bad = api.post("/api/replicas/", {**REPLICAS, "cluster": {"routing": "least-loaded"}}, format="json")
    assert bad.status_code == 400 and "round-robin" in " ".join(bad.json()["errors"]["cluster.routing"])


def test_the_replicas_page_counts_dp_groups_and_shows_a_refused_shape_at_its_field(client):
    query = {"model": "qwen3-30b-a3b", "gpu": "h100-sxm5-80gb", "data_parallel_size": "2",
             "enable_expert_parallel": "on", "rate": "40", "num_requests": "200", "prompt_mean": "1024",
             "prompt_std": "256", "output_mean": "64", "output_std": "16", "ttft_ms": "120", "itl_ms": "",
             "max_instances": "4"}
    r = client.get("/replicas/", query)
    html = r.content.decode()
    assert r.status_code == 200 and r.context["answer"] is not None, html[:3000]
    assert "2 replicas of 2× H100 SXM5 80GB (DP 2 + EP 2) meet TTFT p90 ≤ 120 ms" in html
    r = client.get("/replicas/", {**query, "model": "llama-3-1-8b"})
    assert "MoE layers only" in r.content.decode() and r.context["answer"] is None


DOC = Path(__file__).resolve().parents[2] / "docs" / "moe_parallelism.md"


def doc_rows(points: list[dict]) -> list[str]:
    """docs/moe_parallelism.md's table of the worked sweep, one row per point, from the API's answer."""
    rows = []
    for p in points:
        m, ranks = p["metrics"], (p.get("data_parallel") or {}).get("ranks")
        rows.append(" | ".join([
            "", m.get("deployment_shape") or "TP 1", str(p["meta"]["num_gpus"]), f"{p['meta']['price_per_hour']:.2f}",
            f"{m['kv_cache_tokens']:,}", f"{m.get('kv_cache_tokens_per_deployment') or m['kv_cache_tokens']:,}",
            str(m["preemptions"]), f"{m['ttft_p50_s'] * 1000:,.0f}", f"{m['ttft_p90_s'] * 1000:,.0f}",
            f"{m['throughput_tok_s']:,.0f}", f"{m['cost_per_m_output_tokens']:.2f}",
            " / ".join(str(r["requests"]) for r in ranks) if ranks else str(m["finished"]),
            " / ".join(str(r["dummy_steps"]) for r in ranks) if ranks else "–", ""]).strip())
    return rows


def test_the_docs_worked_sweep_is_what_the_api_answers(api):
    """docs/moe_parallelism.md, "The planner's doors": its request, posted as it is, gives its table."""
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- dp-sweep-request -->", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    r = api.post("/api/sweeps/", json.loads(block), format="json")
    assert r.status_code == 202, r.json()
    sweep = Sweep.objects.get(pk=r.json()["id"])
    for ch in sweep.chunks.all():
        services.chunk_run(sweep_id=sweep.pk, index=ch.index)
    rows = doc_rows(api.get(f"/api/sweeps/{sweep.pk}/results/").json()["points"])
    missing = [row for row in rows if row not in text]
    assert not missing, "docs/moe_parallelism.md lacks the rows\n" + "\n".join(missing)
