"""The calibration upload takes seconds (a fit replays the measurements through the simulator up to 20 times):
once submitted, its form says what it is doing and how long that takes, and cannot be sent twice (issue 33
item 8: "the 13 s upload shows no sign of working")."""

from __future__ import annotations

from playwright.sync_api import expect


def test_the_upload_says_it_is_working(signed_in_page, tmp_path):
    page = signed_in_page
    page.goto("/calibrations/")
    form = page.locator("form[data-busy]")
    status = form.locator("[role=status]")
    expect(status).to_be_hidden()
    # hold the page where the submit leaves it (the fit's answer would replace it): a listener added after
    # the page's own cancels the navigation once the page's has run
    page.evaluate("document.querySelector('form[data-busy]').addEventListener('submit', e => e.preventDefault())")
    measured = tmp_path / "bench.json"
    measured.write_text('{"not": "a measurement"}')
    page.locator("#id_name").fill("lab")
    page.locator("#id_file").set_input_files(str(measured))
    page.get_by_role("button", name="Fit the clock").click()
    expect(status).to_be_visible()
    expect(status).to_contain_text("10 to 30 seconds")
    expect(page.get_by_role("button", name="Fit the clock")).to_be_disabled()
    expect(form).to_have_attribute("aria-busy", "true")
