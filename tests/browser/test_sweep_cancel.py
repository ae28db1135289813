"""Cancel a sweep on a real worker: its finished points stay, with their table and chart, and it can be
edited and run again or run again as it was (issue 33 item 6: "7 of 40" used to become "Cancelled: 0 of 40")."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from planner.models import Sweep
from planner.sweeps import services
from tests.browser.axe import axe_source, axe_violations
from tests.browser.layout import layout_problems
from tests.integration.test_sweep_cancel import SEQS, cancel_definition


def test_cancel_keeps_and_shows_the_finished_points_and_offers_to_run_again(
        signed_in_page, user, worker_factory, sender_on_redis, settings, screenshot):
    settings.KVP_SWEEP_CHUNK_POINTS = len(SEQS)  # one batch: its points finish one after another
    worker_factory(concurrency=1)
    # twice the integration test's requests: the page sees a count, then the click must reach the worker before the
    # batch's last, quicker points finish (on an idle machine 3,000 requests a point let all 8 finish: 8 < 8)
    sweep = services.sweep_create(owner=user, definition=cancel_definition(n=6000))
    page = signed_in_page
    page.goto(f"/sweeps/{sweep.pk}/")
    shown = page.locator('[data-field="points_shown"]')
    expect(shown).to_have_text(re.compile(r"^[3-7]$"), timeout=120_000)  # a few points of the batch simulated
    page.get_by_role("button", name="Cancel sweep").click()

    progress = page.locator("#sweep-progress .progress-text")
    expect(progress).to_contain_text(re.compile(rf"Cancelled: \d+ of {len(SEQS)} points finished"), timeout=20_000)
    expect(progress).not_to_contain_text("stopping", timeout=20_000)
    page.reload()
    finished = int(page.locator('[data-field="points_shown"]').inner_text())
    assert 2 <= finished < len(SEQS), finished  # never "0 of 8"
    assert finished == Sweep.objects.get(pk=sweep.pk).points_done
    expect(page.get_by_role("heading", name=f"The {finished} finished points")).to_be_visible()
    table = page.get_by_role("table", name="Every finished point")
    expect(table.locator("tbody tr")).to_have_count(finished)
    expect(page.locator(".main-svg").first).to_be_attached()  # their chart
    expect(page.get_by_role("button", name="Cancel sweep")).to_have_count(0)
    found, _ = layout_problems(page)
    assert not found + axe_violations(page, axe_source()), found
    screenshot(page, "sweep-cancelled")

    # Edit and run again: the form holds the sweep's definition
    page.get_by_role("link", name="Edit and run again").click()
    expect(page).to_have_url(re.compile(rf"/sweeps/new/\?from={sweep.pk}$"))
    expect(page.get_by_label("Name", exact=True)).to_have_value("cancel me (again)")
    expect(page.get_by_label("Model", exact=True)).to_have_value("")
    expect(page.get_by_label("KV blocks", exact=True)).to_have_value("3000")
    expect(page.get_by_label("Requests", exact=True)).to_have_value("6000")
    expect(page.get_by_label("Prompt length (tokens)")).to_have_value("normal:512,128")
    expect(page.get_by_label("Arrival", exact=True)).to_have_value("poisson:4")
    expect(page.get_by_label("Arrival unit", exact=True)).to_have_value("step")
    expect(page.get_by_label("Axis 1", exact=True)).to_have_value("max_num_seqs")
    expect(page.get_by_label("Axis 1 values")).to_have_value(", ".join(map(str, SEQS)))
    screenshot(page, "sweep-edit-again")

    # Run again: a new sweep of every point
    page.go_back()
    page.get_by_role("button", name="Run again").click()
    expect(page).not_to_have_url(re.compile(rf"/sweeps/{sweep.pk}/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("cancel me (again)")
    expect(page.locator('[data-field="points_total"]')).to_have_text(str(len(SEQS)))
    again = Sweep.objects.exclude(pk=sweep.pk).get(owner=user)
    services.sweep_cancel(sweep=again, user=user)  # (the worker stops at the end of the test)
