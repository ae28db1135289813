"""Issue 22 items the flows did not pin down: a cliff search's progress on a real worker (its bound never
changes mid-run, its count never goes down), a running sweep's results so far, and the replicas page's
advice once latency has stopped falling."""

from __future__ import annotations

import re
import time

from playwright.sync_api import expect

CLIFF = {
    "name": "Cliff watched in the browser", "mode": "cliff", "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
    "workload": {"spec": {"n": 60, "prompt": "normal:256,32", "output": "normal:512,64",
                          "arrival": {"kind": "poisson", "rate": 20.0, "unit": "s"}}, "seed": 0},
    "cliff": {"param": "num_gpu_blocks", "metric": "preemptions_per_request", "lo": 60, "hi": 4000,
              "resolution": 100, "threshold": 0.02},
}


def test_cliff_search_progress_never_changes_its_bound_on_a_real_worker(signed_in_page, user, worker_factory,
                                                                        sender_on_redis):
    from planner.models import Report
    from planner.sweeps import services

    worker_factory(concurrency=1)
    sweep = services.sweep_create(owner=user, definition=CLIFF)
    page = signed_in_page
    page.goto(f"/sweeps/{sweep.pk}/")
    status = page.locator('[data-field="status"]')
    bounds, counts = set(), []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            state = status.inner_text(timeout=2_000)
            shown = int(page.locator('[data-field="points_shown"]').inner_text(timeout=2_000))
            bound = page.locator('[data-field="points_total"]').all_inner_texts()
        except Exception:  # noqa: BLE001 - the page is reloading; look again
            continue
        counts.append(shown)
        if state == "Done":
            break
        bounds.update(bound)
        # a cliff search has no "points left" to count down: no time-left estimate is promised
        assert page.locator('[data-field="eta"]').count() == 0
        page.wait_for_timeout(200)
    assert counts and counts == sorted(counts), f"the count went backwards: {counts}"
    assert len(bounds) == 1, f"the most simulations changed while it ran (or was never shown): {bounds}"
    expect(status).to_have_text("Done")
    evaluations = Report.objects.get(sweep_id=sweep.pk).snapshot["cliff_result"]["evaluations"]
    expect(page.locator("#sweep-progress .progress-text")).to_contain_text(f"{evaluations} simulations")
    expect(page.locator('[data-field="points_total"]')).to_have_count(0)  # done: no "of at most" beside it
    assert evaluations <= int(bounds.pop()), "more simulations than the bound shown while it ran"


def test_a_running_sweep_shows_its_results_so_far(signed_in_page, user, monkeypatch, settings, screenshot):
    from planner.sweeps import services

    settings.KVP_SWEEP_CHUNK_POINTS = 1  # one point per batch
    monkeypatch.setattr(services, "sweep_enqueue", lambda sweep_id: None)
    sweep = services.sweep_create(owner=user, definition={
        "name": "Half a sweep", "engine": {"num_gpu_blocks": 2000},
        "workload": {"spec": {"n": 60, "prompt": "normal:256,64", "output": "normal:128,32",
                              "arrival": {"kind": "poisson", "rate": 2.0, "unit": "step"}}, "seed": 0},
        "axes": [{"param": "num_gpu_blocks", "values": [300, 600, 1200, 2400]}]})
    assert sweep.num_chunks >= 2
    assert services.chunk_run(sweep_id=sweep.pk, index=0) == "done"  # the first batch only: still running
    page = signed_in_page
    page.goto(f"/sweeps/{sweep.pk}/")
    expect(page.get_by_role("heading", name="Results so far")).to_be_visible()
    expect(page.locator("#fig-sweep .main-svg").first).to_be_attached()
    shown = int(page.locator('[data-field="points_shown"]').inner_text())
    total = int(page.locator('[data-field="points_total"]').inner_text())
    value = int(page.get_by_role("progressbar", name="Sweep progress").get_attribute("aria-valuenow"))
    assert 0 < shown < total == 4 and abs(shown - value * total / 100) <= 1, (shown, total, value)
    drawn = page.evaluate("() => document.getElementById('fig-sweep').data[0].x.length")
    assert drawn == shown, "the chart draws the finished points and only those"
    screenshot(page, "sweep-results-so-far")


def test_replicas_page_says_more_replicas_will_not_help_once_latency_has_flattened(page):
    # An ITL target no GPU meets: adding replicas leaves ITL where it is, so the page must not say "try more".
    page.goto("/replicas/?rate=2&itl_ms=1&max_instances=4")
    reason = page.locator("#replicas-reason")
    expect(reason).to_contain_text("stopped falling")
    expect(reason).not_to_contain_text("Try more replicas")
    text = page.locator("main").inner_text()
    assert re.search(r"ITL p90 is [\d,.]+ ms \(target ≤ 1 ms\)", reason.inner_text()), reason.inner_text()
    assert not re.search(r"\d s\b", text.replace("requests/s", "")), "a latency in seconds beside ones in ms"
