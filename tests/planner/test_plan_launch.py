"""``POST /api/plan/`` answers with ``launch``: the sized knobs on vLLM's command line, the replicas in the manifests."""

from __future__ import annotations

import shlex

import pytest
import yaml
from rest_framework.test import APIClient

from tests.simulator.test_launch import _check_flags, _validate

pytestmark = pytest.mark.django_db


def test_a_plan_that_fits_says_what_to_run():
    r = APIClient().post("/api/plan/", {"model": "llama-3-1-70b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 4,
                                        "num_gpus": 8, "kv_cache_dtype": "fp8", "max_model_len": 8192,
                                        "gpu_memory_utilization": 0.92, "cpu_tier_gib": 64}, format="json")
    assert r.status_code == 200, r.content
    d = r.json()
    args = shlex.split(d["launch"]["vllm_serve"])
    _check_flags(args)
    assert args[2] == "meta-llama/Llama-3.1-70B"
    opts = dict(zip(args[3::2], args[4::2]))
    assert opts["--tensor-parallel-size"] == "4" and opts["--kv-cache-dtype"] == "fp8"
    assert opts["--max-model-len"] == "8192" and opts["--gpu-memory-utilization"] == "0.92"
    assert opts["--max-num-seqs"] == str(d["max_num_seqs"])
    assert opts["--max-num-batched-tokens"] == str(d["max_num_batched_tokens"])
    assert f'"num_cpu_blocks":{d["cpu_tier_blocks"]}' in opts["--kv-transfer-config"]
    docs = list(yaml.safe_load_all(d["launch"]["kubernetes"]))
    _validate(docs)
    assert docs[0]["spec"]["replicas"] == d["replicas"] == 2


def test_a_plan_that_does_not_fit_has_nothing_to_run():
    r = APIClient().post("/api/plan/", {"model": "llama-3-1-70b", "gpu": "l4"}, format="json")
    assert r.status_code == 200 and r.json()["fits"] is False and r.json()["launch"] is None


def test_the_replicas_answer_says_what_to_run(django_user_model):
    from tests.planner.test_replicas_api import _body

    c = APIClient()
    c.force_authenticate(django_user_model.objects.create_user("rex", password="pw-rex-12345"))
    r = c.post("/api/replicas/", _body(20), format="json")
    assert r.status_code == 200, r.content
    d = r.json()
    args = shlex.split(d["launch"]["vllm_serve"])
    _check_flags(args)
    assert args[2] == "meta-llama/Llama-3.1-8B"
    docs = list(yaml.safe_load_all(d["launch"]["kubernetes"]))
    _validate(docs)
    assert docs[0]["spec"]["replicas"] == d["num_instances"] >= 1


def test_the_sizing_and_replicas_pages_show_what_to_run_with_copy_buttons(django_user_model):
    import re
    from html import unescape

    c = APIClient()
    page = c.get("/", {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 1})
    html = page.content.decode()
    api = c.post("/api/plan/", {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"}, format="json").json()
    cmd = unescape(re.search(r'<pre id="launch-cmd"[^>]*>(.*?)</pre>', html, re.S)[1])
    assert cmd == api["launch"]["vllm_serve"], (cmd, api["launch"]["vllm_serve"])
    assert 'data-copy="launch-k8s"' in html and "copy_launch.js" in html
    c.force_authenticate(django_user_model.objects.create_user("pia", password="pw-pia-12345"))
    q = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "rate": 20, "requests": 240, "prompt_mean": 2000,
         "prompt_std": 400, "output_mean": 300, "output_std": 60, "ttft_ms": 500, "itl_ms": 50, "max_instances": 16}
    html = c.get("/replicas/", q).content.decode()
    assert '<pre id="launch-cmd"' in html, html[:3000]
    k8s = yaml.safe_load_all(unescape(re.search(r'<pre id="launch-k8s"[^>]*>(.*?)</pre>', html, re.S)[1]))
    dep = next(k8s)
    shown = re.search(r'id="kpi-replicas">(\d+)<', html)[1]
    assert dep["spec"]["replicas"] == int(shown)


def test_manage_py_plan_and_search_print_what_to_run(django_user_model, tmp_path, capsys):
    import json

    from django.core.management import call_command

    from tests.planner.test_search_api import _body

    call_command("plan", "--model", "llama-3-1-8b", "--gpu", "h100-sxm5-80gb", "--summary", "--launch")
    out = capsys.readouterr().out
    assert "\nvllm serve meta-llama/Llama-3.1-8B " in out and 'kind: "Deployment"' in out
    call_command("plan", "--model", "llama-3-1-8b", "--gpu", "h100-sxm5-80gb")
    assert json.loads(capsys.readouterr().out)["launch"]["vllm_serve"].startswith("vllm serve ")
    django_user_model.objects.create_user("lu", password="pw-lu-12345")
    path = tmp_path / "search.json"
    path.write_text(json.dumps(_body()))
    call_command("search", str(path), "--user", "lu", "--inline", "--launch")
    out = capsys.readouterr().out
    cmd = next(line for line in out.splitlines() if line.startswith("vllm serve "))
    _check_flags(shlex.split(cmd))
    assert 'kind: "Service"' in out
