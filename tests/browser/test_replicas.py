"""Replicas for this rate: from the sizing answer to the fewest replicas meeting latency targets."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from gpuprofiles.models import GpuProfile, ModelProfile


def _slug(model, name: str) -> str:
    return model.objects.get(is_catalog=True, name=name).slug


def test_from_the_sizing_answer_to_the_replicas_answer(page, screenshot):
    page.goto("/")
    expect(page.locator("#summary")).to_contain_text("Llama 3.1 8B")
    page.get_by_role("link", name="How many replicas for your traffic? →").click()

    # The deployment is carried over; the traffic and the targets have defaults; nothing ran yet.
    expect(page).to_have_url(re.compile(r"/replicas/\?"))
    expect(page.get_by_label("Model", exact=True)).to_have_value(_slug(ModelProfile, "Llama 3.1 8B"))
    expect(page.get_by_label("GPU", exact=True)).to_have_value(_slug(GpuProfile, "H100 SXM5 80GB"))
    expect(page.get_by_label("GPUs per replica (TP)")).to_have_value("1")
    expect(page.get_by_label("Requests simulated")).to_have_value("300")
    expect(page.locator("#replicas-answer")).to_have_count(0)
    expect(page.get_by_role("navigation", name="Main").locator('[aria-current="page"]')).to_have_text("Replicas")

    page.get_by_label("Request rate (requests/s)").fill("20")
    page.get_by_role("button", name="Find replicas").click()

    answer = page.locator("#replicas-answer")
    expect(answer).to_have_text(re.compile(r"^\d+ replicas? of 1× H100 SXM5 80GB meets? TTFT p90 ≤ 500 ms and "
                                           r"ITL p90 ≤ 50 ms at 20 requests/s$"))
    n = int(answer.inner_text().split()[0])
    expect(page.locator("#kpi-replicas")).to_have_text(str(n))
    expect(page.locator("#kpi-cost")).to_contain_text("$")
    table = page.get_by_role("table", name="Every replica count simulated")
    chosen = table.get_by_role("row").filter(has=page.get_by_role("rowheader", name=str(n), exact=True))
    expect(chosen).to_contain_text("✓ yes")
    expect(page.locator("#fig-replicas .main-svg").first).to_be_attached()
    expect(page.locator("#fig-replicas")).to_contain_text("Replicas (instances)")
    screenshot(page, "replicas")


def test_replicas_form_shows_a_field_error(page, screenshot):
    page.goto("/replicas/")
    page.get_by_label("Request rate (requests/s)").fill("0")
    page.get_by_label("Most replicas to try").fill("100")
    page.get_by_role("button", name="Find replicas").click()
    expect(page.locator("#id_rate_error")).to_contain_text("more than 0 requests per second")
    expect(page.locator("#id_max_instances_error")).to_contain_text("64")
    expect(page.get_by_label("Request rate (requests/s)")).to_have_attribute(
        "aria-describedby", re.compile(r"\bid_rate_error\b"))
    expect(page.locator("#replicas-answer")).to_have_count(0)
    screenshot(page, "replicas-field-error")


def test_replicas_form_works_without_javascript(browser, live_server, catalog):
    context = browser.new_context(java_script_enabled=False, base_url=live_server.url)
    try:
        page = context.new_page()
        page.goto("/replicas/")
        page.get_by_label("Request rate (requests/s)").fill("5")
        page.get_by_role("button", name="Find replicas").click()
        expect(page.locator("#replicas-answer")).to_contain_text("at 5 requests/s")
        expect(page.locator("#fig-replicas")).to_contain_text("(needs JavaScript")
    finally:
        context.close()


def test_replicas_form_refuses_a_prompt_longer_than_the_model(page, screenshot):
    """Issue 33 item 3: 200,000 tokens on Llama 3.1 8B's 131,072 positions is refused, as sizing refuses it."""
    page.goto("/replicas/")
    page.get_by_label("Request rate (requests/s)").fill("5")
    page.get_by_label("Prompt length, mean (tokens)").fill("200000")
    page.get_by_label("Prompt length, std (tokens)").fill("0")
    page.get_by_role("button", name="Find replicas").click()
    error = page.locator("#id_prompt_mean_error")
    expect(error).to_contain_text("131,072 positions")
    expect(error).to_contain_text("prompt + output")
    expect(page.locator("#replicas-answer")).to_have_count(0)
    expect(page.get_by_text("try more replicas")).to_have_count(0)
    screenshot(page, "replicas-prompt-too-long")


def test_a_search_priced_over_the_bound_shows_its_progress_then_the_answer(page, settings, monkeypatch):
    """Issue 37: a visitor (not signed in) whose search is priced over KVP_INLINE_MAX_SECONDS lands on a
    progress page that polls the job and opens the answer when the worker is done (here the chunk runs from the
    test, what the worker's task calls)."""
    from planner.runs import services
    from planner.runs.models import Run

    settings.KVP_INLINE_MAX_SECONDS = 0
    monkeypatch.setattr(services.RUNS, "enqueue", lambda *_a, **_k: None)  # no broker: the test runs it
    page.goto("/replicas/?model=llama-3-1-8b&gpu=h100-sxm5-80gb&rate=20&num_requests=60&max_instances=2")
    expect(page).to_have_url(re.compile(r"/replicas/runs/\d+/\?token=[\w-]+$"))
    box = page.locator("#run-progress")
    expect(box.locator('[data-field="status"]')).to_have_text("Queued")
    expect(page.get_by_role("progressbar", name="Replicas search progress")).to_be_visible()
    expect(page.locator("#replicas-answer")).to_have_count(0)
    run = Run.objects.get()
    assert services.chunk_run(run_id=run.pk) == "done"
    expect(page.locator("#replicas-answer")).to_have_text(re.compile(r"replicas? of 1× H100 SXM5 80GB"),
                                                          timeout=15_000)
    expect(page.locator("#run-progress")).to_have_count(0)
