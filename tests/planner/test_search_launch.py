"""A finished search's answer carries what to run: ``launch.vllm_serve`` and ``launch.kubernetes``, in the API's
JSON, the report's JSON download and the report page (with copy buttons); the report's statuses per row."""

from __future__ import annotations

import csv
import io
import re
import shlex
from html import unescape

import pytest
import yaml
from rest_framework.test import APIClient

from tests.planner.test_search_api import _body, _run_all
from tests.simulator.test_launch import _check_flags, _validate


@pytest.mark.django_db
def test_the_answer_carries_its_launch_everywhere(django_user_model):
    c = APIClient()
    c.force_authenticate(django_user_model.objects.create_user("ada", password="pw-ada-12345"))
    s = _run_all(c.post("/api/searches/", _body(), format="json").json()["id"])
    detail = c.get(f"/api/searches/{s.pk}/").json()
    best, launch = detail["result"]["best"], detail["result"]["launch"]
    args = shlex.split(launch["vllm_serve"])
    assert args[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]  # the catalog profile's Hugging Face id
    _check_flags(args)
    opts = dict(zip(args[3::2], args[4::2]))
    assert opts["--max-num-seqs"] == str(best["candidate"]["max_num_seqs"])
    assert opts["--max-num-batched-tokens"] == str(best["sizing"]["max_num_batched_tokens"])
    assert opts["--gpu-memory-utilization"] == "0.9"
    docs = list(yaml.safe_load_all(launch["kubernetes"]))
    _validate(docs)
    assert docs[0]["spec"]["replicas"] == best["replicas"]
    gpus = str(best["candidate"]["gpus_per_replica"])
    assert docs[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == gpus
    anon = APIClient()
    assert anon.get(f"/searches/r/{s.slug}/download.json").json()["result"]["launch"] == launch
    html = anon.get(f"/searches/r/{s.slug}/").content.decode()
    shown = unescape(re.search(r'<pre id="launch-cmd"[^>]*>(.*?)</pre>', html, re.S)[1])
    assert shown == launch["vllm_serve"]
    assert unescape(re.search(r'<pre id="launch-k8s"[^>]*>(.*?)</pre>', html, re.S)[1]) == launch["kubernetes"]
    assert 'data-copy="launch-cmd"' in html and "copy_launch.js" in html
    # the Status column: one "answer" (the answer's own count), each other row by its own figures
    rows = list(csv.DictReader(io.StringIO(anon.get(f"/api/searches/reports/{s.slug}/?format=csv").content.decode())))
    tried = [r for r in rows if r["replicas"]]
    assert sum(r["status"] == "answer" for r in rows) == 1
    for r in tried:
        assert (r["status"] in ("answer", "meets")) == (r["meets"] == "True"), r
        if r["status"] == "meets":
            assert "misses" not in r["reason"] and "cheapest" not in r["reason"]
    labels = [k for k in rows[0] if k.startswith(("TPOT", "ITL"))]
    assert {"TPOT p90 (s)", "ITL p90 (s)"} <= set(labels)


@pytest.mark.django_db
@pytest.mark.parametrize("target, field", [({"metric": "tbt", "percentile": "p90", "max_s": 0.05}, "slo.metric"),
                                           ({"metric": "itl", "percentile": "p100", "max_s": 0.05}, "slo.percentile"),
                                           ({"metric": "itl", "percentile": "p0", "max_s": 0.05}, "slo.percentile")])
def test_an_unknown_metric_or_a_percentile_outside_0_100_is_a_400_naming_the_field(django_user_model, target, field):
    c = APIClient()
    c.force_authenticate(django_user_model.objects.create_user("bo", password="pw-bo-12345"))
    r = c.post("/api/searches/", {**_body(), "slo": {"targets": [target]}}, format="json")
    assert r.status_code == 400 and field in r.json()["errors"], r.json()


@pytest.mark.django_db
def test_tpot_and_any_percentile_are_accepted(django_user_model):
    c = APIClient()
    c.force_authenticate(django_user_model.objects.create_user("cy", password="pw-cy-12345"))
    slo = {"targets": [{"metric": "tpot", "percentile": "p95", "max_s": 0.05},
                       {"metric": "itl", "percentile": "p99.9", "max_s": 0.5}]}
    s = _run_all(c.post("/api/searches/", {**_body(), "slo": slo}, format="json").json()["id"])
    best = c.get(f"/api/searches/{s.pk}/").json()["result"]["best"]
    trial = next(t for t in best["trials"] if t["num_instances"] == best["replicas"])
    assert set(trial["values"]) == {"TPOT p95", "ITL p99.9"}
    assert trial["values"]["TPOT p95"] == trial["figures"]["TPOT p95"] <= 0.05
    assert {"TTFT p90", "TPOT p90", "ITL p90", "E2E p90", "ITL p99.9"} <= set(trial["figures"])
