"""The deployment search over DP sizes and expert parallelism (issue 34): a replica is one DP group.

Qwen3-30B-A3B (the catalog's, 128 routed experts) and Llama 3.1 8B (dense) on H100s; 200 requests.
"""

from __future__ import annotations

import csv
import io

import pytest
from rest_framework.test import APIClient

from planner import tasks
from planner.search.models import Search

pytestmark = pytest.mark.django_db



def body(model="qwen3-30b-a3b", **space):
    return {"model": model,
            "workload": {"spec": {"n": 200, "prompt": "normal:1024,256", "output": "normal:64,16",
                                  "arrival": {"kind": "poisson", "rate": 40, "unit": "s"}}, "seed": 0},
            "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.15}]}, "check_seeds": 0,
            "space": {"gpus": ["h100-sxm5-80gb"], "tensor_parallel": [1], "precisions": ["bf16"], "max_replicas": 4,
                      "data_parallel": [1, 2], "expert_parallel": [False, True], **space}}


def run_all(search_id: int) -> Search:
    s = Search.objects.get(pk=search_id)
    for index in range(s.num_chunks):
        assert tasks.run_search_chunk(search_id, index) == "done"
    return Search.objects.get(pk=search_id)


def outcomes(search: Search) -> dict[str, dict]:
    return {o["candidate"]["label"]: o for o in search.result["outcomes"]}


def test_dp_groups_are_searched_as_replicas_of_tp_x_pp_x_dp_gpus(signed_in_api):
    r = signed_in_api.post("/api/searches/", body(), format="json")
    assert r.status_code == 202, r.json()
    assert r.json()["progress"]["candidates_total"] == 4  # DP 1, 2 x EP off, on
    s = run_all(r.json()["id"])
    got = outcomes(s)
    one = got["1x H100 SXM5 80GB (TP 1), bf16 weights, KV auto, max_num_seqs 256"]
    dp = got["2x H100 SXM5 80GB (TP 1 x DP 2 + EP), bf16 weights, KV auto, max_num_seqs 256"]
    assert dp["candidate"]["gpus_per_replica"] == 2 and dp["candidate"]["data_parallel"] == 2
    assert dp["candidate"]["price_per_replica"] == pytest.approx(2 * one["candidate"]["price_per_replica"])
    assert dp["trials"] and dp["status"] in ("answer", "meets") and dp["replicas"] == 1
    # one DP 2 group meets where one engine does not: two replicas of TP 1 are needed (the same GPUs)
    assert one["replicas"] == 2 and not next(t for t in one["trials"] if t["num_instances"] == 1)["meets"]
    rows = list(csv.DictReader(io.StringIO(APIClient().get(f"/api/searches/reports/{s.slug}/?format=csv")
                                            .content.decode())))
    assert {(row["data_parallel"], row["expert_parallel"]) for row in rows} >= {("1", "False"), ("2", "True")}


@pytest.mark.parametrize("model, space, field, rule", [
    ("llama-3-1-8b", {"tensor_parallel": [2], "data_parallel": [1]}, "space.expert_parallel",
     "has no experts; vLLM's expert parallelism (--enable-expert-parallel) applies to MoE layers only"),
    ("qwen3-30b-a3b", {"data_parallel": [1, 5], "expert_parallel": [False]}, "space.data_parallel",
     "DP 5 runs with no TP of the space: without expert parallelism every routed expert is split TP x DP = 1 x 5"),
    ("qwen3-30b-a3b", {"data_parallel": [256], "expert_parallel": [True]}, "space.data_parallel",
     "is more than Qwen3 30B-A3B's 128 routed experts (vLLM's determine_expert_map"),
    ("qwen3-30b-a3b", {"data_parallel": [2, 8], "max_gpus": 4}, "space.data_parallel",
     "DP 8 needs at least 8 GPUs a replica (TP x PP x DP = 1 x 8"),
    ("qwen3-30b-a3b", {"max_gpus": 0}, "space.max_gpus", "must be a whole number of GPUs from 1"),
])
def test_shapes_vllm_refuses_are_400s_naming_the_field_and_the_rule(signed_in_api, model, space, field, rule):
    r = signed_in_api.post("/api/searches/", body(model, **space), format="json")
    assert r.status_code == 400, r.json()
    assert rule in " ".join(r.json()["errors"][field]), r.json()


def test_a_mixed_space_rejects_only_the_shapes_vllm_refuses(signed_in_api):
    """TP 1 and 4 at DP 64 with EP: TP 4 x DP 64 = 256 EP ranks for 128 experts is refused, TP 1 x DP 64 runs (it
    is rejected for its GPUs: max_gpus 8), so DP 64 is not refused as a whole; max_gpus bounds the replicas."""
    r = signed_in_api.post("/api/searches/", body(tensor_parallel=[1, 4], data_parallel=[1, 2, 64],
                                                  expert_parallel=[True], max_gpus=128), format="json")
    assert r.status_code == 202, r.json()
    s = run_all(r.json()["id"])
    got = outcomes(s)
    wide = got["256x H100 SXM5 80GB (TP 4 x DP 64 + EP), bf16 weights, KV auto, max_num_seqs 256"]
    assert wide["status"] == "rejected" and "needs 256 GPUs a replica, more than the 128" in wide["reason"], wide
    assert s.result["best"] is not None


@pytest.mark.parametrize("space, field", [({"data_parallel": [0]}, "space.data_parallel"),
                                          ({"data_parallel": "2"}, "space.data_parallel"),
                                          ({"expert_parallel": ["yes"]}, "space.expert_parallel")])
def test_bad_dp_and_ep_dimensions_are_400s_naming_the_field(signed_in_api, space, field):
    r = signed_in_api.post("/api/searches/", body(**space), format="json")
    assert r.status_code == 400 and field in r.json()["errors"], r.json()


def test_the_search_form_takes_dp_sizes_and_ep(django_user_model):
    from django.test import Client

    web = Client()
    web.force_login(django_user_model.objects.create_user("pat", password="pw-pat-12345"))
    form = {"model": "qwen3-30b-a3b", "gpus": ["h100-sxm5-80gb"], "rate": "10", "duration_s": "3",
            "prompt_mean": "1024", "prompt_std": "256", "output_mean": "128", "output_std": "32", "ttft_ms": "500",
            "ttft_pct": "p90", "itl_pct": "p90", "e2e_pct": "p90", "tensor_parallel": "1", "precisions": ["bf16"],
            "max_num_seqs": "256", "max_replicas": "2", "data_parallel": "1, 2", "expert_parallel": ["off", "on"]}
    assert 'name="data_parallel"' in web.get("/searches/").content.decode()
    bad = web.post("/searches/", {**form, "data_parallel": "two"})
    assert bad.status_code == 200 and "whole numbers separated by commas" in bad.content.decode()
    ok = web.post("/searches/", form)
    assert ok.status_code == 302, ok.content.decode()[:2000]
    space = Search.objects.get(owner__username="pat").snapshot["space"]
    assert space["data_parallel"] == [1, 2] and space["expert_parallel"] == [False, True]
    assert "max_gpus" not in space  # empty: no limit


def test_the_search_form_shows_vllms_refusals_at_their_fields(django_user_model):
    from django.test import Client

    web = Client()
    web.force_login(django_user_model.objects.create_user("sam", password="pw-sam-12345"))
    form = {"model": "llama-3-1-8b", "gpus": ["h100-sxm5-80gb"], "rate": "10", "duration_s": "3",
            "prompt_mean": "1024", "prompt_std": "256", "output_mean": "128", "output_std": "32", "ttft_ms": "500",
            "ttft_pct": "p90", "itl_pct": "p90", "e2e_pct": "p90", "tensor_parallel": "1", "precisions": ["bf16"],
            "max_num_seqs": "256", "max_replicas": "2", "data_parallel": "1, 2", "expert_parallel": ["on"]}
    dense = web.post("/searches/", form)
    assert dense.status_code == 200 and "applies to MoE layers only" in " ".join(dense.context["form"].errors["expert_parallel"])
    pool = web.post("/searches/", {**form, "model": "qwen3-30b-a3b", "data_parallel": "1, 4", "max_gpus": "2"})
    assert pool.status_code == 200
    assert "DP 4 needs at least 4 GPUs a replica" in " ".join(pool.context["form"].errors["data_parallel"])
    assert not Search.objects.filter(owner__username="sam").exists()


def test_dp_group_shapes_are_pooled_and_the_report_names_each_pools_layout(signed_in_api):
    """disaggregated.pools over TP 1 at DP 1 and 2 with EP (tests/search_definitions.py dp_pools_search): the DP
    group is sized in both roles, every pair's pools carry their own TP / DP / EP, and the report's table names
    each pool's instances x TP x DP and the KV moved per token."""
    from django.test import Client

    from tests.search_definitions import dp_pools_search

    r = signed_in_api.post("/api/searches/", dp_pools_search(), format="json")
    assert r.status_code == 202, r.json()
    s = run_all(r.json()["id"])
    pools = s.result["disaggregated_pools"]
    dp = "2x H100 SXM5 80GB (TP 1 x DP 2 + EP), bf16 weights, KV auto, max_num_seqs 256"
    assert next(p for p in pools["prefill"] if p["shape"] == dp)["instances"]
    assert next(p for p in pools["decode"] if p["shape"] == dp)["instances"]
    checked = [p for p in pools["pairs"] if not p.get("left_out")]
    assert checked and all(p["num_gpus"] <= 8 for p in checked)
    for p in checked:
        for side in ("prefill", "decode"):
            assert p[side]["data_parallel"] in (1, 2) and p[side]["expert_parallel"] == (p[side]["data_parallel"] > 1)
        assert p["kv_bytes_per_token"] == 48 * 4 * 128 * 2 * 2  # one TP 1 rank's KV of a token, whatever the DP
    page = Client().get(f"/searches/r/{s.slug}/").content.decode()
    assert "instances × TP × DP" in page and "KiB per token" in page and "96.0" in page  # 98,304 B = 96 KiB


def test_the_xpyd_splits_of_a_dp_group_answer_through_the_api(signed_in_api):
    """At 80 requests/s two DP 2 + EP groups are the answer (a DP group can be the answer: its trials count
    groups), and the xPyD stage splits its groups: 1P1D of two groups, and splits of 1 group fewer."""
    definition = body(tensor_parallel=[1], data_parallel=[2], expert_parallel=[True], max_replicas=3)
    definition["workload"]["spec"]["arrival"]["rate"] = 80
    r = signed_in_api.post("/api/searches/", {**definition, "disaggregated": True}, format="json")
    assert r.status_code == 202, r.json()
    s = run_all(r.json()["id"])
    best = s.result["best"]
    assert best["status"] == "answer" and best["candidate"]["data_parallel"] == 2 and best["replicas"] == 2
    alt = s.result["disaggregated"]
    assert [row["name"] for row in alt["splits"]] == ["1P1D"]  # 2 groups: 1P1D (1 group: no split)
    assert alt["splits"][0]["num_gpus"] == 4 and alt["shape"].startswith("2x H100 SXM5 80GB (TP 1 x DP 2 + EP)")
