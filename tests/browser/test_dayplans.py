"""Issue 36 item 5 in the browser: the day plan form shows every problem at once, then a plan runs on a real
worker chunk after chunk while its page shows the bar, and opens its answer (words, both charts drawn, the
hours, the downloads) when the last chunk is stored."""

from __future__ import annotations

import json

from playwright.sync_api import expect

C_ENGINE = {"num_gpu_blocks": 4000, "block_size": 16, "max_num_seqs": 128, "max_num_batched_tokens": 2048,
            "enable_prefix_caching": True, "enable_chunked_prefill": True,
            "step_time_model": {"base_s": 0.012, "per_token_s": 2.1e-05, "per_req_s": 0.0001}}


def _fill(page, *, policy: str, rates: str) -> None:
    page.get_by_label("Model", exact=True).select_option("")
    page.get_by_label("GPU", exact=True).select_option("")
    page.get_by_label("Engine configuration").fill(json.dumps(C_ENGINE))
    page.get_by_label("Requests per hour").fill(rates)
    page.get_by_label("Prompt length, mean").fill("256")
    page.get_by_label("Prompt length, std").fill("64")
    page.get_by_label("Output length, mean").fill("128")
    page.get_by_label("Output length, std").fill("32")
    page.get_by_label("Autoscaling policy").fill(policy)
    page.get_by_label("Cold start", exact=True).fill("45")
    page.get_by_label("Price per GPU-hour").fill("2")
    page.get_by_label("Chunk length").fill("1800")
    page.get_by_label("Chunk overlap").fill("300")


def test_a_day_plan_from_the_form_to_its_answer(signed_in_page, user, worker_factory, sender_on_redis, screenshot):
    worker = worker_factory(concurrency=1)
    page = signed_in_page
    page.goto("/replicas/")
    page.get_by_role("link", name="Plan a day").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Plan for a day, not for a peak")
    _fill(page, policy='{"kind": "hpa", "min_replicas": 5, "max_replicas": 2}', rates="1800, lots")
    page.get_by_label("Chunk length").fill("1801")
    page.get_by_role("button", name="Plan the day").click()
    errors = page.get_by_role("list", name="Fields to fix")
    expect(errors).to_contain_text("numbers separated by commas")  # the form's own check
    expect(errors).to_contain_text("below min_replicas 5")  # the policy's, in the same answer
    expect(errors).to_contain_text("whole number of the policy's syncs")  # the chunks'
    screenshot(page, "dayplan-form-errors")

    _fill(page, policy='{"kind": "hpa", "metric": "running", "target": 8, "max_replicas": 4}', rates="1800")
    page.get_by_role("button", name="Plan the day").click()
    expect(page.get_by_role("progressbar", name="Day plan progress")).to_be_visible()
    answer = page.locator("#dayplan-answer")
    expect(answer).to_be_visible(timeout=120_000)  # the page reloads once the plan is answered
    expect(answer).to_contain_text("GPU-hours ($")
    expect(answer).to_contain_text("of 1,800 requests met TTFT <= 2 s and TPOT <= 50 ms")
    for fig in ("#fig-fleet", "#fig-hours"):
        expect(page.locator(f"{fig} .main-svg").first).to_be_attached()
    expect(page.locator("#fig-fleet")).to_contain_text("Time (hours from the start)")
    expect(page.locator("#fig-fleet")).to_contain_text("Router queue (requests)")
    expect(page.get_by_role("progressbar", name="Day plan progress")).to_have_attribute("aria-valuenow", "100")
    expect(page.locator("table.points tbody tr").first).to_contain_text("1,800")  # hour 0: every arrival
    screenshot(page, "dayplan-answer")
    with page.expect_download() as download:
        page.get_by_role("link", name="hours as CSV").click()
    assert download.value.suggested_filename.endswith(".csv")
    assert "Traceback" not in worker.tail()
