"""The home page's first screen (issue 33): the dozen inputs most people change, the rest behind "More options",
which opens by itself whenever one of its fields is set or wrong (so no value and no error is ever hidden), and
says which are set; on a phone the default answer is one tap away, and an answer asked for comes first.
"""

from __future__ import annotations

from playwright.sync_api import expect

PHONE = {"width": 390, "height": 844}
VISIBLE_INPUTS = """() => [...document.querySelectorAll('form[aria-labelledby=form-h] :is(input, select, textarea)')]
  .filter(e => e.type !== 'hidden' && e.checkVisibility()).map(e => e.name)"""


def test_a_dozen_inputs_first_and_more_options_closed_at_the_defaults(page):
    page.goto("/")
    shown = page.evaluate(VISIBLE_INPUTS)
    assert len(shown) == 12 and shown[:2] == ["model", "gpu"], shown
    more = page.locator("#more-options")
    expect(more).not_to_have_attribute("open", "")
    expect(page.locator("#more-options-state")).to_contain_text("all at their defaults")
    page.locator("#more-options > summary").click()
    expect(page.get_by_label("CPU offload tier (GiB)")).to_be_visible()


def test_more_options_opens_with_a_value_set_and_says_which(page):
    page.goto("/?model=llama-3-1-8b&gpu=h100-sxm5-80gb&cpu_tier_gib=64")
    expect(page.locator("#more-options")).to_have_attribute("open", "")
    expect(page.locator("#more-options-state")).to_contain_text("set: CPU offload tier (GiB)")
    expect(page.get_by_label("CPU offload tier (GiB)")).to_have_value("64")
    # closing it keeps the value, and the summary still says it is set
    page.locator("#more-options > summary").click()
    expect(page.locator("#more-options-state")).to_be_visible()
    assert page.get_by_label("CPU offload tier (GiB)").input_value() == "64"


def test_more_options_opens_on_an_error_inside(page):
    page.goto("/?model=llama-3-1-8b&gpu=h100-sxm5-80gb&max_loras=-1")
    expect(page.locator("#more-options")).to_have_attribute("open", "")
    expect(page.locator("#more-options-state")).to_contain_text("to fix: LoRA slots (max_loras)")
    expect(page.locator("#more-options .errorlist")).to_be_visible()


def test_on_a_phone_the_default_answer_is_one_tap_away(browser, live_server, catalog):
    from tests.browser.conftest import _assert_clean, _new_page

    context, page, problems = _new_page(browser, live_server, viewport=PHONE)
    try:
        page.goto("/")
        link = page.get_by_role("link", name="See the answer for these defaults")
        box = link.bounding_box()
        assert box and box["y"] + box["height"] <= PHONE["height"], "the link is on the first screen"
        link.click()
        summary = page.locator("#summary")
        box = summary.bounding_box()
        assert 0 <= box["y"] < PHONE["height"], "the answer is in view after the tap"
        _assert_clean(page, problems)
    finally:
        context.close()
