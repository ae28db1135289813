"""The sizing page (home) and the GPU comparison: GET forms, answers with units, errors at the field."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db


def field_errors(html: str, field: str) -> list[str]:
    m = re.search(rf'<ul class="errorlist" id="id_{field}_error"[^>]*>(.*?)</ul>', html, re.S)
    return re.findall(r"<li>(.*?)</li>", m.group(1), re.S) if m else []


def summary(html: str) -> str:
    m = re.search(r'id="summary">(.*?)</p>', html, re.S)
    return m.group(1) if m else ""


def test_home_without_query_shows_the_default_plan(client):
    r = client.get("/")
    assert r.status_code == 200
    html = r.content.decode()
    assert r.context["nav"] == "sizing"
    assert summary(html).startswith("Llama 3.1 8B on 1x H100 SXM5 80GB at TP 1: ")
    assert "requests of 128K tokens at once" in summary(html)
    # the form is a plain GET form (works without JavaScript, results are links)
    assert re.search(r'<form method="get" action="/"', html)
    for unit in ("bytes", "GiB", "blocks", "tokens", "requests"):
        assert unit in html
    for fig in ("memory", "concurrency", "fragmentation"):
        assert f'id="fig-{fig}-data"' in html


def test_home_golden_llama_8b_calibrated_r11(client):
    """R11 (vLLM 0.10.1.1 log, Llama 3.1 8B fp16, gmu 0.9): pasting its two lines gives vLLM's 157,648 tokens
    within 1% and 1.20x concurrency at 131,072 tokens (row R11 of vllm_startup_logs.csv)."""
    log = ("INFO [gpu_model_runner.py] Model loading took 14.9889 GiB and 3.1 seconds\n"
           "INFO [gpu_worker.py] Available KV cache memory: 19.25 GiB\n")
    r = client.get("/", {"model": "llama-3-1-8b", "gpu": "a100-sxm4-40gb", "dtype": "fp16",
                         "max_model_len": "131072", "max_num_batched_tokens": "2048", "vllm_log": log})
    outcome = r.context["outcome"]
    assert outcome.calibration == {"weights_gib": 14.9889, "available_kv_gib": 19.25}
    assert abs(outcome.result.kv_cache_tokens - 157648) / 157648 < 0.01
    assert outcome.result.max_concurrency == pytest.approx(1.20, abs=0.01)
    assert f"{outcome.result.kv_cache_tokens:,}" in summary(r.content.decode())


def test_70b_on_4_h100_summary(client):
    r = client.get("/", {"model": "llama-3-1-70b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": "4"})
    s = summary(r.content.decode())
    assert re.match(r"Llama 3.1 70B on 4x H100 SXM5 80GB at TP 4: [\d,]+ tokens of KV cache, room for about "
                    r"[\d.,]+ requests of 128K tokens at once\.", s), s


@pytest.mark.parametrize(
    ("query", "field", "fragment"),
    [
        ({"tensor_parallel_size": "3"}, "tensor_parallel_size", "does not divide num_attention_heads 32"),
        ({"gpu_memory_utilization": "0"}, "gpu_memory_utilization", "more than 0 and at most 1"),
        ({"gpu_memory_utilization": "1.5"}, "gpu_memory_utilization", "more than 0 and at most 1"),
        ({"max_model_len": "200000"}, "max_model_len", "beyond Llama 3.1 8B&#x27;s 131,072 positions"),
        ({"max_model_len": "999999999"}, "max_model_len", "less than or equal to 10000000"),
        ({"tensor_parallel_size": "100000"}, "tensor_parallel_size", "less than or equal to 512"),
        ({"num_gpus": "3", "tensor_parallel_size": "2"}, "num_gpus", "multiple of 2"),
        ({"model": "llama-3-1-70b"}, "model", "Does not fit: weights need"),
        ({"gpu_memory_utilization": "0.2"}, "gpu_memory_utilization", "no memory left for the KV cache"),
        ({"gpu_memory_utilization": "0.25"}, "max_model_len", "needs 8,192 blocks"),
        ({"available_kv_gib": "500"}, "available_kv_gib", "more than the GPU"),
        ({"vllm_log": "nothing useful"}, "vllm_log", "found neither"),
        ({"lengths": "empirical:/etc/passwd"}, "lengths", "read a file"),
        ({"lengths": "normal:abc"}, "lengths", "not a number"),
        ({"cpu_tier_gib": "1e12"}, "cpu_tier_gib", "less than or equal to"),
        ({"model": "nope"}, "model", "Select a valid choice"),
    ],
)
def test_errors_appear_at_the_field_never_a_500(client, query, field, fragment):
    r = client.get("/", query)
    assert r.status_code == 200
    msgs = field_errors(r.content.decode(), field)
    assert any(fragment in m for m in msgs), (field, msgs)


def test_a_plan_that_does_not_fit_still_shows_the_memory_chart(client):
    r = client.get("/", {"model": "llama-3-1-70b"})
    html = r.content.decode()
    assert 'class="summary bad"' in html and "does not fit" in summary(html)
    assert 'id="fig-memory-data"' in html


def test_cpu_tier_answer_in_blocks_and_tokens(client):
    r = client.get("/", {"cpu_tier_gib": "64"})
    html = r.content.decode()
    assert "32,768 blocks = 524,288 tokens" in html


def test_query_count(client):
    client.get("/")  # warm caches (content types, etc.)
    with CaptureQueriesContext(connection) as ctx:
        r = client.get("/", {"model": "llama-3-1-70b", "tensor_parallel_size": "4"})
    assert r.status_code == 200
    assert len(ctx.captured_queries) <= 3  # models, GPUs (+ session when signed in)


def test_own_model_profiles_are_offered_to_their_owner_only(client, django_user_model):
    from gpuprofiles.models import ModelProfile

    owner = django_user_model.objects.create_user("ada", password="pw-123456789")
    base = ModelProfile.objects.get(slug="llama-3-1-8b")
    mine = ModelProfile.objects.get(pk=base.pk)
    mine.pk = None
    mine.slug, mine.name, mine.is_catalog, mine.owner = "ada-llama", "Ada's Llama", False, owner
    mine.save()
    assert "ada-llama" not in client.get("/").content.decode()
    client.force_login(owner)
    r = client.get("/", {"model": "ada-llama"})
    assert summary(r.content.decode()).startswith("Ada&#x27;s Llama on 1x H100")


def test_compare_page_defaults_and_prices(client):
    r = client.get("/compare/")
    assert r.status_code == 200
    rows = r.context["rows"]
    assert 2 <= len(rows) <= 4
    names = [row.gpu.name for row in rows]
    assert any(n.startswith("H100 SXM") for n in names)
    html = r.content.decode()
    assert "$3.78" in html  # H100 SXM's catalog price per GPU-hour, one GPU
    fig = json.loads(re.search(r'id="fig-compare-data"[^>]*>(.*?)</script>', html, re.S).group(1))
    assert fig["layout"]["xaxis"]["title"]["text"] == "tokens"


@pytest.mark.parametrize("gpus", [["h100-sxm5-80gb"], ["h100-sxm5-80gb", "a10", "l4", "t4", "l40s"]])
def test_compare_needs_2_to_4_gpus(client, gpus):
    r = client.get("/compare/", {"gpus": gpus})
    assert any("Pick 2 to 4 GPUs" in m for m in field_errors(r.content.decode(), "gpus"))


def test_compare_link_from_home_keeps_the_knobs(client):
    r = client.get("/", {"model": "qwen3-8b", "tensor_parallel_size": "2"})
    q = r.context["compare_query"]
    assert "model=qwen3-8b" in q and "tensor_parallel_size=2" in q and "gpus=h100-sxm5-80gb" in q
    r = client.get("/compare/?" + q)
    assert r.status_code == 200 and r.context["rows"]


def test_compare_row_where_the_model_does_not_fit_shows_no_figures(client):
    """Llama 3.1 8B's 15 GiB of weights do not fit a T4: its row says so and shows no tokens or concurrency."""
    r = client.get("/compare/", {"model": "llama-3-1-8b", "gpus": ["h100-sxm5-80gb", "t4"]})
    html = r.content.decode()
    rows = re.findall(r"<tr[^>]*>\s*<th scope=\"row\">(.*?)</tr>", html, re.S)
    assert len(rows) == 2
    h100, t4 = rows
    assert "H100 SXM5 80GB" in h100 and "Does not fit" not in h100
    assert re.search(r'<td class="num">[\d,]{6,}</td>', h100)  # its KV cache tokens
    assert "T4" in t4 and "Does not fit" in t4 and "weights need" in t4
    assert '<td class="num">' not in t4  # no token, concurrency, block or price figures
    fig = json.loads(re.search(r'id="fig-compare-data"[^>]*>(.*?)</script>', html, re.S).group(1))
    assert fig["data"][0]["x"][1] is None  # no bar for the T4
    assert [a["text"] for a in fig["layout"]["annotations"]].count("does not fit") == 2  # one per panel


def test_replicas_page_sees_when_latency_has_flattened():
    from planner.sizing.views import latency_flattened

    def trial(n, ttft, itl):
        return {"num_instances": n, "ttft_s": ttft, "itl_s": itl}

    assert latency_flattened([trial(1, 2.0, 0.05), trial(2, 1.95, 0.049)])
    assert not latency_flattened([trial(1, 2.0, 0.05), trial(2, 1.0, 0.049)])
    assert not latency_flattened([trial(1, 2.0, 0.05)])
