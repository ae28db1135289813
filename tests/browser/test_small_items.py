"""Smaller things a demanding user notices: plurals, the smallest TP that fits, dead ends, units, sharing."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.browser.test_mobile import _slug


def test_sizing_compare_and_model_pages_say_what_to_do_next(page, screenshot):
    llama8, h100 = _slug("model", "Llama 3.1 8B"), _slug("gpu", "H100 SXM5 80GB")
    page.goto(f"/?model={llama8}&gpu={h100}&tensor_parallel_size=1")
    expect(page.locator(".kpi", has_text="per hour")).to_contain_text("(1 GPU)")

    # Llama 405B does not fit one H100: the page names the smallest TP that does, and it does.
    page.goto(f"/?model={_slug('model', 'Llama 3.1 405B')}&gpu={h100}&tensor_parallel_size=1")
    hint = page.locator("#smallest-tp")
    expect(hint).to_contain_text("The smallest tensor-parallel size that fits is TP ")
    tp = int(re.search(r"TP (\d+)", hint.inner_text()).group(1))
    assert tp in (8, 16)
    hint.get_by_role("link").click()
    expect(page.locator("#summary")).not_to_have_class(re.compile(r"\bbad\b"))
    expect(page.get_by_label("Tensor parallel size (TP)")).to_have_value(str(tp))
    screenshot(page, "sizing-smallest-tp")

    # Compare: the GPU checklist is not a small scrolling box, and KV cache per dollar = tokens / price.
    page.goto(f"/compare/?model={llama8}")
    box = page.locator(".compare-form .choices").first
    assert box.evaluate("e => e.scrollHeight <= e.clientHeight + 1"), "the GPU checklist scrolls inside a box"
    rows = page.locator("table[aria-label='GPU comparison'] tbody tr:not(.no-fit)")
    assert rows.count() >= 2
    for i in range(rows.count()):
        cells = rows.nth(i).locator("td").all_inner_texts()
        tokens, price, per_dollar = cells[0], cells[4], cells[5]
        if price.startswith("$"):
            expected = float(tokens.replace(",", "")) / float(price[1:].replace(",", ""))
            assert abs(float(per_dollar.replace(",", "")) - expected) <= 1, (tokens, price, per_dollar)
    screenshot(page, "compare-per-dollar")

    # A model's page leads on to sizing it, and shows its KV bytes per token.
    page.goto(f"/catalog/models/{llama8}/")
    expect(page.locator("#kv-bytes-per-token")).to_contain_text("131,072 bytes in bf16")
    page.locator("#size-this-model").click()
    expect(page.locator("#summary")).to_contain_text("Llama 3.1 8B")


def test_signed_out_report_offers_copy_link_and_run_again(page, finished_report):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(f"/reports/{finished_report.slug}/")
    page.get_by_role("button", name="Copy link").click()
    expect(page.locator("#copy-status")).to_have_text("Link copied.")
    assert page.evaluate("navigator.clipboard.readText()").endswith(f"/reports/{finished_report.slug}/")
    again = page.get_by_role("link", name="Sign in to run this again")
    expect(again).to_have_attribute("href", re.compile(r"/accounts/login/\?next=/reports/"))
