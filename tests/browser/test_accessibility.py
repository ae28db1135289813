"""The pages test_mobile.py does not reach with a plain link, checked the same way at 1400 and 390 px: the
forms after a submit with errors (sweep, search, sign-in, import, new GPU profile), a calibration's page
and a profile's deletion: no serious or critical axe-core violation, nothing cut, no table wider than its box.
"""

from __future__ import annotations

from dataclasses import asdict

import pytest
from playwright.sync_api import expect

from tests.browser.axe import axe_source, axe_violations
from tests.browser.conftest import _assert_clean, _new_page, session_cookie
from tests.browser.layout import layout_problems
from tests.gpuprofiles.factories import make_gpu

WIDTHS = [{"width": 1400, "height": 900}, {"width": 390, "height": 844}]


@pytest.fixture
def calibration(user, catalog):
    from gpuprofiles.models import GpuProfile, ModelProfile
    from planner.calibration.models import CalibrationProfile
    from simulator.clock.cost_model import RooflineCoefficients

    means = {"ttft_s": 0.21, "itl_s": 0.012, "e2e_s": 3.1}
    return CalibrationProfile.objects.create(
        owner=user, name="lab H100", model=ModelProfile.objects.get(slug="llama-3-1-8b", owner=None),
        gpu=GpuProfile.objects.get(slug="h100-sxm5-80gb", owner=None), source_format="csv",
        measurement={"requests": 300}, coefficients={**asdict(RooflineCoefficients()), "mfu": 0.41},
        fit={"measured": means, "predicted_before": {k: v * 1.3 for k, v in means.items()},
             "predicted": {k: v * 1.02 for k, v in means.items()}, "error_before_pct": {k: 30.0 for k in means},
             "error_pct": {k: 2.0 for k in means}, "fitted": {"mfu": 0.41}, "simulated_requests": 300,
             "evaluations": 14})


def _submit_with_errors(page, path: str, fills: dict[str, str], button: str) -> None:
    """Fill the fields (by id) with wrong values and submit: the page comes back with its errors."""
    page.goto(path)
    for field_id, value in fills.items():
        page.locator(f"#{field_id}").fill(value)
    page.get_by_role("button", name=button, exact=True).click()
    expect(page.locator(".errorlist, .error-summary").first).to_be_visible()


@pytest.mark.parametrize("viewport", WIDTHS, ids=["1400", "390"])
def test_error_pages_and_the_rest_pass_axe_and_the_layout_rules(browser, live_server, catalog, user, calibration,
                                                                viewport):
    axe = axe_source()
    mine = make_gpu(user, name="Bench GPU")
    context, page, problems = _new_page(browser, live_server, cookies=[session_cookie(live_server, user)],
                                        viewport=viewport)
    context.add_init_script(script=axe)  # sent once per context, run in every page it loads
    failures = []

    def check(name: str) -> None:
        found, scrolling = layout_problems(page)
        found += [f"table “{t}” does not fit its box" for t in scrolling]
        found += [f"axe: {v}" for v in axe_violations(page, axe)]
        failures.extend(f"{name} at {viewport['width']} px: {f}" for f in found)

    try:
        _submit_with_errors(page, "/sweeps/new/", {"id_num_gpu_blocks": "-5"}, "Start sweep")
        check("sweep-new with errors")
        _submit_with_errors(page, "/searches/", {"id_rate": "-1"}, "Search")
        check("search-new with errors")
        _submit_with_errors(page, "/catalog/models/import/", {"id_config_text": "{not json"}, "Import")
        check("import with errors")
        _submit_with_errors(page, "/catalog/gpus/new/", {"id_name": ""}, "Save")
        check("gpu-new with errors")
        page.goto(f"/calibrations/{calibration.pk}/")
        page.wait_for_function("document.querySelector('#fig-calibration .main-svg')")
        check("calibration")
        page.goto("/calibrations/")
        check("calibrations with one")
        page.goto(f"/catalog/gpus/{mine.slug}/delete/")
        check("gpu-delete")
        _assert_clean(page, problems)
    finally:
        context.close()
    signed_out, page, problems = _new_page(browser, live_server, viewport=viewport)
    try:
        _submit_with_errors(page, "/accounts/login/", {"id_username": "nobody", "id_password": "wrong-password-1"}, "Sign in")
        check("sign-in with errors")
        _assert_clean(page, problems)
    finally:
        signed_out.close()
    assert not failures, "\n".join(failures)
