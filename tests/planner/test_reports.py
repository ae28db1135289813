"""Reports: public permalinks, immutable snapshots, downloads, owner-only delete."""

import csv
import io
import json
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from gpuprofiles.models import GpuProfile, ModelProfile
from planner.models import Report
from planner.sweeps import services

pytestmark = pytest.mark.django_db

DEF = {"engine": {"num_gpu_blocks": 600, "max_num_seqs": 16},
       "workload": {"spec": {"n": 20, "prompt": "normal:100,20", "output": "normal:30,5"}, "seed": 1},
       "axes": [{"param": "num_gpu_blocks", "values": [40, 80, 160, 320, 600]}]}


def run_all(sweep):
    for ch in sweep.chunks.all():
        services.chunk_run(sweep_id=sweep.pk, index=ch.index)
    return Report.objects.get(sweep=sweep)


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="pw-123456789")


@pytest.fixture
def report(alice):
    return run_all(services.sweep_create(owner=alice, definition=DEF))


def test_slug_is_unguessable_and_the_page_is_public(report):
    assert len(report.slug) >= 22  # 128 random bits, URL-safe
    r = Client().get(f"/reports/{report.slug}/")
    assert r.status_code == 200
    html = r.content.decode()
    assert report.title in html and "fig-sweep" in html and "Download" in html
    assert Client().get("/reports/not-a-real-slug-000000/").status_code == 404


def test_api_read_is_public_with_csv_and_json(report):
    c = Client()
    body = c.get(f"/api/reports/{report.slug}/").json()
    assert body["report"]["slug"] == report.slug and len(body["points"]) == 5
    r = c.get(f"/api/reports/{report.slug}/?format=csv")
    assert r["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.content.decode())))
    metrics = {row["metric"] for row in rows}
    assert {"preemptions_per_request", "ttft_p99_steps", "mean_kv_usage"} <= metrics
    assert len(rows) == 5 * len(report.snapshot["points"][0]["metrics"])  # one row per point and metric
    assert {row["num_gpu_blocks"] for row in rows} == {"40", "80", "160", "320", "600"}
    doc = json.loads(c.get(f"/api/reports/{report.slug}/?format=json").content)
    assert doc["inputs"]["engine"]["max_num_seqs"] == 16 and len(doc["points"]) == 5
    assert c.get(f"/api/reports/{report.slug}/?format=xml").status_code == 400


def test_standalone_html_works_offline(report):
    r = Client().get(f"/reports/{report.slug}/download.html")
    html = r.content.decode()
    assert r.status_code == 200 and "attachment" in r["Content-Disposition"]
    assert "Plotly.newPlot" in html and len(html) > 1_000_000  # Plotly (its cartesian bundle) is inlined
    assert "<script src=" not in html and "<link" not in html  # nothing fetched from the network
    # the points table reads like the report page's: human headers with their units
    assert '<th>Preemptions per request<span class="unit">events/request</span></th>' in html
    assert "<th>preemptions_per_request" not in html
    for fmt in ("csv", "json"):
        assert Client().get(f"/reports/{report.slug}/download.{fmt}").status_code == 200


def test_only_the_owner_deletes(report, alice):
    bob = get_user_model().objects.create_user("bob", password="pw-123456789")
    c = Client()
    c.force_login(bob)
    assert c.post(f"/reports/{report.slug}/delete/").status_code == 403
    from rest_framework.test import APIClient

    api = APIClient()
    assert api.delete(f"/api/reports/{report.slug}/").status_code in (401, 403)
    api.force_authenticate(bob)
    assert api.delete(f"/api/reports/{report.slug}/").status_code == 403
    assert Report.objects.filter(pk=report.pk).exists()
    api.force_authenticate(alice)
    assert api.delete(f"/api/reports/{report.slug}/").status_code == 204
    assert not Report.objects.filter(pk=report.pk).exists()


def test_report_list_page_shows_only_mine(report, alice):
    bob = get_user_model().objects.create_user("bob", password="pw-123456789")
    c = Client()
    c.force_login(alice)
    assert report.slug in c.get("/reports/").content.decode()
    c.force_login(bob)
    assert report.slug not in c.get("/reports/").content.decode()
    assert Client().get("/reports/").status_code == 302  # sign in first


def test_snapshot_is_immutable_when_profiles_change_or_vanish(alice):
    cat_gpu = GpuProfile.objects.filter(name__startswith="H100 SXM").first()
    mine = GpuProfile.objects.create(slug="alice-h100", name="Alice's H100", owner=alice, memory_gib=79.18,
                                     price_per_hour=2.5)
    model = ModelProfile.objects.get(name="Llama 3.1 8B")
    sweep = services.sweep_create(owner=alice, definition={
        "model": model.slug, "gpu": mine.slug, "deployment": {"gpu_memory_utilization": 0.9},
        "workload": {"spec": {"n": 20}, "seed": 0},
        "axes": [{"param": "max_num_seqs", "values": [8, 16]}]})
    report = run_all(sweep)
    before = json.dumps(report.snapshot, sort_keys=True)
    page_before = Client().get(f"/reports/{report.slug}/").content.decode()
    assert "Alice&#x27;s H100" in page_before or "Alice's H100" in page_before
    mine.name, mine.memory_gib, mine.price_per_hour = "Renamed", 40.0, 99.0
    mine.save()
    mine.delete()
    report.refresh_from_db()
    assert json.dumps(report.snapshot, sort_keys=True) == before
    assert report.snapshot["inputs"]["gpu"]["spec"]["price_per_hour"] == 2.5
    assert report.snapshot["points"][0]["meta"]["price_per_hour"] == 2.5
    page_after = Client().get(f"/reports/{report.slug}/").content.decode()
    assert "Renamed" not in page_after and Client().get(f"/reports/{report.slug}/").status_code == 200
    assert cat_gpu is not None


def test_every_finished_sweep_has_a_report_with_advice(report):
    assert isinstance(report.snapshot["advice"], list)
    assert report.snapshot["advice"]  # the base (600 blocks) leaves most of the cache idle
    for a in report.snapshot["advice"]:
        assert a["numbers"] and any(ch.isdigit() for ch in a["text"])


def test_report_page_renders_a_200_point_sweep_quickly(alice, settings):
    """Not a timing assertion for CI; it records the figure quoted in docs/sweeps.md."""
    settings.KVP_SWEEP_CHUNK_POINTS = 50
    sweep = services.sweep_create(owner=alice, definition={
        "engine": {"num_gpu_blocks": 600, "max_num_seqs": 16},
        "workload": {"spec": {"n": 10, "prompt": "normal:60,10", "output": "normal:20,5"}, "seed": 1},
        "axes": [{"param": "num_gpu_blocks", "start": 20, "stop": 2000, "steps": 20},
                 {"param": "max_num_seqs", "values": list(range(1, 11))}]})
    report = run_all(sweep)
    assert len(report.snapshot["points"]) == 200
    c = Client()
    c.get(f"/reports/{report.slug}/")
    t = time.perf_counter()
    r = c.get(f"/reports/{report.slug}/")
    elapsed = time.perf_counter() - t
    assert r.status_code == 200 and "fig-heat-preempt" in r.content.decode()
    print(f"report page, 200 points: {elapsed * 1000:.0f} ms, {len(r.content) / 1024:.0f} KiB")


def test_a_replicas_sweep_report_shows_the_answer_the_targets_and_the_latency_figure(alice):
    """A sweep over replicas with latency targets: the report names the fewest replicas (advice "replicas"),
    states the targets, draws latency against replicas and tables TTFT/ITL at the targets' percentile."""
    definition = {
        "engine": {"num_gpu_blocks": 3000, "step_time_model": {"base_s": 0.01, "per_token_s": 2e-5}},
        "workload": {"spec": {"n": 120, "prompt": {"kind": "constant", "value": 300},
                              "output": {"kind": "constant", "value": 60},
                              "arrival": {"kind": "poisson", "rate": 12.0, "unit": "s"}}, "seed": 2},
        "cluster": {"routing": "least-loaded"},
        "slo": {"ttft_s": 0.25, "itl_s": 0.05},
        "axes": [{"param": "num_instances", "values": [1, 2, 4]}],
    }
    report = run_all(services.sweep_create(owner=alice, definition=definition))
    html = Client().get(f"/reports/{report.slug}/").content.decode()
    assert 'data-code="replicas"' in html
    assert "the fewest that meet TTFT p90 ≤ 250 ms and ITL p90 ≤ 50 ms" in html
    assert "TTFT p90 ≤ 250 ms and ITL p90 ≤ 50 ms</dd>" in html and "behind a least-loaded router" in html
    assert 'id="fig-replicas-data"' in html
    assert "ITL p90" in html and "Request imbalance" in html  # table columns
    assert "num_instances" not in html.split('id="points-h"')[1].split("</table>")[0]  # human headers only
