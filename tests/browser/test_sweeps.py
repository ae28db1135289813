"""Sweeps and reports: run a KV-blocks sweep on a real Celery worker, watch it, share its report."""

from __future__ import annotations

import csv
import io
import re
import time

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import REPORT_BLOCKS as BLOCKS  # the same sweep as the finished_report fixture

SWEEP_TIMEOUT_S = 90


def _start_kv_sweep(page, name: str) -> None:
    page.goto("/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Sweeps").click()
    page.get_by_role("link", name="New sweep").click()
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Mode", exact=True).select_option("grid")
    # The form starts from Llama 3.1 8B on one H100; this sweep is engine-only (KV blocks given).
    page.get_by_label("Model", exact=True).select_option("")
    page.get_by_label("GPU", exact=True).select_option("")
    page.get_by_label("KV blocks", exact=True).fill("2000")
    page.get_by_label("Requests", exact=True).fill("150")
    page.get_by_label("Prompt length (tokens)").fill("normal:256,64")
    page.get_by_label("Output length (tokens)").fill("normal:128,32")
    page.get_by_label("Arrival", exact=True).fill("poisson:2")
    page.get_by_label("Arrival unit", exact=True).select_option("step")
    page.get_by_label("Axis 1", exact=True).select_option("num_gpu_blocks")
    page.get_by_label("Axis 1 values").fill(", ".join(map(str, BLOCKS)))
    page.get_by_role("button", name="Start sweep").click()


#: The progress bar's value and what the page shows beside it, read at once (``bar.evaluate``).
_PROGRESS_SNAPSHOT = """bar => {
  const doc = bar.ownerDocument, field = name => doc.querySelector(`[data-field="${name}"]`);
  return {value: bar.getAttribute('aria-valuenow'), shown: field('points_shown').innerText,
          total: field('points_total').innerText,
          eta: [...doc.querySelectorAll('[data-field="eta"]')].map(e => e.innerText),
          partial: doc.querySelectorAll('#fig-sweep').length};
}"""


@pytest.fixture
def report_url(signed_in_page, worker_factory, sender_on_redis, settings, screenshot):
    """Run a KV-blocks sweep through the pages on a real worker; the report's permalink."""
    settings.KVP_SWEEP_CHUNK_POINTS = 1  # one point per task: the bar moves in steps
    worker_factory(concurrency=1)
    page = signed_in_page
    _start_kv_sweep(page, "KV cliff in the browser")

    expect(page).to_have_url(re.compile(r"/sweeps/\d+/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("KV cliff in the browser")
    bar = page.get_by_role("progressbar", name="Sweep progress")
    expect(bar).to_be_visible()
    screenshot(page, "sweep-progress")

    # Watch the bar (the page polls the JSON status, reloads when a point finishes and once at the end):
    # the count beside the bar is the bar's own and never goes down; no estimate before a point is done.
    seen, counts = [], []
    deadline = time.monotonic() + SWEEP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:  # one read of one document: separate reads could straddle a reload (a bar at 0 % beside 5 of 5)
            snap = bar.evaluate(_PROGRESS_SNAPSHOT, timeout=2_000)
            value, shown, total = int(snap["value"]), int(snap["shown"]), int(snap["total"])
            eta, partial = snap["eta"], snap["partial"]
        except Exception:  # noqa: BLE001 - the page is reloading; look again
            continue
        assert total == len(BLOCKS), "the total never changes"
        assert abs(shown - value * total / 100) <= 1, f"{shown} of {total} points beside a bar at {value}%"
        counts.append(shown)
        if eta and eta[0].startswith("about "):
            assert shown > 0, "no estimate before a point is done"
        if 0 < shown < total and partial:
            try:  # results so far, drawn while the sweep runs (the page may be reloading)
                screenshot(page, "sweep-partial-results")
            except Exception:  # noqa: BLE001
                pass
        if not seen or seen[-1] != value:
            seen.append(value)
        if value == 100:
            break
        page.wait_for_timeout(200)
    assert seen and seen[-1] == 100, f"progress never reached 100% in {SWEEP_TIMEOUT_S} s: {seen}"
    assert seen == sorted(seen), f"progress went backwards: {seen}"
    assert counts == sorted(counts), f"the count went backwards: {counts}"
    # The estimate within 2x of the time left is measured on a longer sweep in tests/integration/test_sweep_eta.py
    # (this one is over in a few seconds, less than the page's own polling and reloads can resolve).
    expect(page.locator('[data-field="status"]')).to_have_text("Done")
    expect(page.locator('[data-field="points_shown"]')).to_have_text(str(len(BLOCKS)))
    assert page.locator(".progress > .bar").evaluate("e => e.style.width") == "100%"
    screenshot(page, "sweep-done")

    page.get_by_role("link", name="Open the report").click()
    expect(page).to_have_url(re.compile(r"/reports/[^/]+/$"))
    return page.url


def test_kv_blocks_sweep_runs_and_shows_the_cliff(signed_in_page, report_url, screenshot):
    page = signed_in_page
    expect(page.get_by_role("heading", level=1)).to_contain_text("KV cliff in the browser")
    chart = page.locator("#fig-sweep")
    expect(chart).to_have_attribute("aria-label", "Preemption cliff: KV blocks")
    expect(chart.locator(".main-svg").first).to_be_attached()
    expect(chart.locator(".gtitle")).to_contain_text("Preemption cliff")
    # One row per simulated point.
    expect(page.locator("table.points tbody tr")).to_have_count(len(BLOCKS))
    screenshot(page, "report")

    # The owner finds it again from the navigation: their reports, their sweeps.
    nav = page.get_by_role("navigation", name="Main")
    nav.get_by_role("link", name="Reports").click()
    expect(page.get_by_role("link", name="KV cliff in the browser", exact=True)).to_be_visible()
    expect(page.locator("table code")).to_contain_text(report_url)
    screenshot(page, "reports")
    nav.get_by_role("link", name="Sweeps").click()
    row = page.get_by_role("row", name=re.compile("KV cliff in the browser"))
    expect(row).to_contain_text(f"{len(BLOCKS)} / {len(BLOCKS)}")
    expect(row).to_contain_text("Done")
    screenshot(page, "sweeps")


def test_report_permalink_opens_signed_out_and_downloads_csv(finished_report, page, screenshot):
    page.goto(f"/reports/{finished_report.slug}/")
    expect(page.get_by_role("link", name="Sign in", exact=True)).to_be_visible()  # nobody is signed in
    expect(page.get_by_role("heading", level=1)).to_contain_text("KV cliff in the browser")
    expect(page.locator("#fig-sweep .main-svg").first).to_be_attached()
    expect(page.get_by_role("button", name="Delete report")).to_have_count(0)
    screenshot(page, "report-signed-out")

    with page.expect_download(timeout=10_000) as info:
        page.get_by_role("link", name="CSV").click()
    download = info.value
    assert download.suggested_filename.endswith(".csv")
    with open(download.path(), encoding="utf-8") as fh:
        rows = list(csv.DictReader(io.StringIO(fh.read())))
    # Long format: one row per point and metric, with the swept parameter and the unit.
    assert list(rows[0]) == ["point", "num_gpu_blocks", "metric", "value", "unit"]
    by_point = {}
    for row in rows:
        by_point.setdefault(int(row["point"]), {})[row["metric"]] = row
    assert sorted(by_point) == list(range(len(BLOCKS)))
    assert sorted(int(p["preemptions_per_request"]["num_gpu_blocks"]) for p in by_point.values()) == BLOCKS
    preempt = {
        int(p["preemptions_per_request"]["num_gpu_blocks"]): float(p["preemptions_per_request"]["value"])
        for p in by_point.values()
    }
    assert preempt[BLOCKS[0]] > preempt[BLOCKS[-1]]  # the cliff: too few blocks preempt


def test_sweep_form_shows_a_field_error_for_an_invalid_value(signed_in_page, screenshot):
    page = signed_in_page
    # No console allowance: the invalid form comes back as a page (200) with the error at the field.
    page.goto("/sweeps/new/")
    page.get_by_label("KV blocks", exact=True).fill("2000")
    page.locator("#id_axis1_values").fill("100, lots")
    page.get_by_role("button", name="Start sweep").click()

    box = page.locator(".field.has-error")
    expect(box).to_have_count(1)
    expect(box.get_by_role("alert")).to_contain_text("not a number")
    values = page.get_by_label("Axis 1 values")
    expect(values).to_have_value("100, lots")
    expect(values).to_have_attribute("aria-invalid", "true")
    # the error is read out with the field: its aria-describedby names the error list
    assert "id_axis1_values_error" in values.get_attribute("aria-describedby").split()
    screenshot(page, "sweep-field-error")


def test_sweep_form_shows_every_error_at_once_in_words_with_a_summary(signed_in_page, screenshot):
    page = signed_in_page
    page.goto("/sweeps/new/")
    # Only the chosen mode's section shows; the default arrivals are per second (latency in seconds).
    grid, cliff = page.locator('[data-mode-section="grid"]'), page.locator('[data-mode-section="cliff"]')
    expect(grid).to_be_visible()
    expect(cliff).to_be_hidden()
    expect(page.get_by_label("Arrival unit", exact=True)).to_have_value("s")
    page.get_by_label("Mode", exact=True).select_option("cliff")
    expect(grid).to_be_hidden()
    expect(cliff).to_be_visible()
    page.get_by_label("Mode", exact=True).select_option("grid")

    page.get_by_label("GPUs (tensor parallel size)").fill("0")
    page.get_by_label("Prompt length (tokens)").fill("normal:512")
    page.locator("#id_axis1_values").fill("100, lots")
    page.get_by_role("button", name="Start sweep").click()

    summary = page.locator("#error-summary")
    expect(summary).to_be_focused()
    expect(summary.get_by_role("heading")).to_have_text("3 things to fix before the sweep can start")
    links = summary.get_by_role("link")
    expect(links).to_have_count(3)
    hrefs = [a.get_attribute("href") for a in links.all()]
    assert hrefs == ["#id_tensor_parallel_size", "#id_prompt", "#id_axis1_values"], hrefs
    expect(links.nth(0)).to_have_text("GPUs (tensor parallel size)")
    expect(page.locator(".field.has-error")).to_have_count(3)
    expect(summary).to_contain_text("“normal” needs 2 numbers")
    text = page.locator("main").inner_text()
    for internal in ("workload.spec", "deployment.", "argument(s)", "axes[0]"):
        assert internal not in text, f"an internal name in the page: {internal}"
    links.nth(1).click()
    expect(page.locator("#id_prompt")).to_be_focused()
    screenshot(page, "sweep-form-errors")
