"""The replicas page (``/replicas/``): a GET form, the fewest replicas in words, every count tried, never a 500."""

from __future__ import annotations

import json
import re

import pytest
from django.http import QueryDict

from planner.sizing.forms import ReplicasForm

pytestmark = pytest.mark.django_db

LLAMA_H100 = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"}


def field_errors(html: str, field: str) -> list[str]:
    m = re.search(rf'<ul class="errorlist" id="id_{field}_error"[^>]*>(.*?)</ul>', html, re.S)
    return re.findall(r"<li>(.*?)</li>", m.group(1), re.S) if m else []


def answer_text(html: str) -> str:
    m = re.search(r'id="replicas-answer">(.*?)</p>', html, re.S)
    return m.group(1) if m else ""


def test_without_a_rate_the_form_is_prefilled_and_nothing_runs(client):
    r = client.get("/replicas/", {"model": "llama-3-1-70b", "tensor_parallel_size": "4"})
    assert r.status_code == 200
    html = r.content.decode()
    assert r.context["answer"] is None and not r.context["submitted"]
    assert re.search(r'<form method="get" action="/replicas/"', html)
    assert re.search(r'<option value="llama-3-1-70b" selected>', html)
    assert re.search(r'name="tensor_parallel_size" value="4"', html)
    assert re.search(r'name="num_requests" value="300"', html)
    assert "fig-replicas" not in html and "plotly-cartesian.min.js" not in html
    assert r.context["nav"] == "replicas"


def test_defaults_give_the_fewest_replicas_in_words_with_every_count_tried(client):
    r = client.get("/replicas/", {**LLAMA_H100, "rate": "20"})
    assert r.status_code == 200
    html = r.content.decode()
    a = r.context["answer"]
    n = a["num_instances"]
    assert n is not None
    assert re.fullmatch(rf"{n} replicas? of 1× H100 SXM5 80GB meets? TTFT p90 ≤ 500 ms and ITL p90 ≤ 50 ms "
                        r"at 20 requests/s", answer_text(html)), answer_text(html)
    # the ✓ row is the answer, the row before it (if any) fails
    rows = {row["n"]: row for row in a["rows"]}
    assert rows[n]["meets"] and (n == 1 or not rows[n - 1]["meets"])
    assert html.count("✓ yes") >= 1 and re.search(r'<tr class="chosen">\s*<th scope="row" class="num">'
                                                   rf'{n}</th>', html)
    for header in ("Replicas", "TTFT p90", "ITL p90", "Meets targets", "Prefix-cache hit rate",
                   "Request imbalance"):
        assert header in html
    assert '<span class="unit">ms</span>' in html
    # the catalog prices the H100: cost per hour = replicas x price
    assert a["cost_per_hour"] == pytest.approx(n * a["price_per_gpu_hour"])
    assert 'id="kpi-cost"' in html
    fig = json.loads(re.search(r'id="fig-replicas-data"[^>]*>(.*?)</script>', html, re.S).group(1))
    assert fig["layout"]["yaxis"]["title"]["text"] == "TTFT p90 (ms)"
    assert {s["y0"] for s in fig["layout"]["shapes"] if s.get("line", {}).get("dash") == "dash"} >= {500, 50}


def test_none_up_to_the_maximum_says_so(client):
    r = client.get("/replicas/", {**LLAMA_H100, "rate": "200", "max_instances": "2"})
    html = r.content.decode()
    assert r.status_code == 200
    assert answer_text(html).startswith("No replica count up to 2 meets TTFT p90")
    assert 'id="replicas-reason"' in html and "✓ yes" not in html


@pytest.mark.parametrize("change, field, text", [
    ({"rate": "0"}, "rate", "more than 0 requests per second"),
    ({"rate": "fast"}, "rate", "Enter a number"),
    ({"num_requests": "5000"}, "num_requests", "2000"),
    ({"max_instances": "65"}, "max_instances", "64"),
    ({"ttft_ms": "", "itl_ms": ""}, "ttft_ms", "Give a TTFT target"),
    ({"percentile": "p75"}, "percentile", "valid choice"),
    ({"routing": "weighted", "routing_weights": ""}, "routing_weights", "scorers"),
    ({"routing": "weighted", "routing_weights": "telepathy:3"}, "routing_weights", "telepathy"),
    ({"prefix_fraction": "0.5"}, "prefix_length", "prefix length"),
    ({"tensor_parallel_size": "3"}, "tensor_parallel_size", ""),
])
def test_bad_values_come_back_at_their_field(client, change, field, text):
    r = client.get("/replicas/", {**LLAMA_H100, "rate": "20", **change})
    assert r.status_code == 200
    assert r.context["answer"] is None
    errs = field_errors(r.content.decode(), field)
    assert errs and text in " ".join(errs), (field, errs, r.context["form"].errors)


@pytest.mark.parametrize("query", [
    "rate=%00&model=%ff", "rate=1e999", "rate=nan", "rate=20&gpu=&model=", "rate=20&max_instances=-1",
    "rate=20&rate=30&prompt_mean=1.5", "rate=20&prefix_length=999999999999", "rate=20&num_requests=10&output_std=x",
    "rate=" + "9" * 400, "rate=20&routing=weighted&routing_weights=" + "a:" * 90,
])
def test_garbage_query_strings_never_give_a_500(client, query):
    r = client.get(f"/replicas/?{query}")
    assert r.status_code == 200


def test_unmapped_definition_errors_go_to_the_top_of_the_form():
    form, submitted = ReplicasForm.from_query(QueryDict("rate=20"))
    assert submitted and form.is_valid()
    form.add_definition_errors({"slo.itl_s": ["must be a number of seconds > 0"],
                                "engine.num_gpu_blocks": ["too few"], "non_field_errors": ["no good"]})
    assert form.errors["itl_ms"] == ["Must be a number of seconds > 0"]
    assert form.non_field_errors() == ["engine.num_gpu_blocks: too few", "no good"]


def test_to_request_is_what_the_replicas_api_takes():
    form, _ = ReplicasForm.from_query(QueryDict("rate=12.5&prefix_length=512&routing=weighted&"
                                                "routing_weights=prefix-affinity:3, queue-depth:1&ttft_ms=250"))
    assert form.is_valid(), form.errors
    req = form.to_request()
    assert req["workload"]["spec"]["arrival"] == {"kind": "poisson", "rate": 12.5, "unit": "s"}
    assert req["workload"]["spec"]["prefixes"] == [{"length": 512, "fraction": 1.0}]
    assert req["cluster"] == {"routing": "weighted:prefix-affinity:3,queue-depth:1"}
    assert req["slo"] == {"percentile": "p90", "ttft_s": 0.25, "itl_s": 0.05}
    assert req["max_instances"] == 16 and req["workload"]["spec"]["n"] == 300


def test_the_sizing_answer_links_here_with_the_deployment(client):
    html = client.get("/", {**LLAMA_H100, "tensor_parallel_size": "2"}).content.decode()
    m = re.search(r'id="replicas-link" href="([^"]+)">How many replicas for your traffic\? →</a>', html)
    assert m, "link missing"
    href = m.group(1).replace("&amp;", "&")
    assert href.startswith("/replicas/?") and "model=llama-3-1-8b" in href and "gpu=h100-sxm5-80gb" in href \
        and "tensor_parallel_size=2" in href and "rate=" not in href
