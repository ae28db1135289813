"""Every page of the app at a desktop's 1400 px and a phone's 390 px: screenshots for review; at both widths
no serious or critical axe-core violation (``tests/browser/axe.py``) and no value outside its visible box,
no table wider than its box unless it truly cannot fit and then scrolls by keyboard with a hint, no number
split over two lines, no chart title cut and no chart text under 4.5:1 (``tests/browser/layout.py``), every
chart with axis titles and tick labels and no two of its labels overlapping (``tests/browser/charts.py``);
on the phone no sideways scroll, a compact menu that shows every link, no chart toolbar over titles, the
answer on the first screen after asking.

Screenshots (for a person's review: no assertion reads them) are taken only when ``KVP_SCREENSHOTS=1`` asks, to
``artifacts/screenshots/<page>-1400.png`` and ``<page>-390.png`` (see docs/browser-tests.md).
"""

from __future__ import annotations

import re
import time

from playwright.sync_api import expect

from tests.browser.axe import axe_source, axe_violations
from tests.browser.charts import chart_label_problems
from tests.browser.conftest import SCREENSHOTS, _assert_clean, _new_page, screenshots_wanted, session_cookie
from tests.browser.layout import layout_problems

DESKTOP = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}


def _slug(cls_name: str, name: str) -> str:
    from gpuprofiles.models import GpuProfile, ModelProfile

    cls = ModelProfile if cls_name == "model" else GpuProfile
    return cls.objects.filter(name=name, owner__isnull=True).first().slug


def _plain_pages() -> dict[str, str]:
    """Every page a person reaches, signed in, that shows no stored result, by its screenshot name (the lists of
    sweeps, reports, searches, day plans and tokens are among :func:`_result_pages`: they list the fixtures')."""
    llama, h100 = _slug("model", "Llama 3.1 8B"), _slug("gpu", "H100 SXM5 80GB")
    answer = f"/?model={llama}&gpu={h100}&tensor_parallel_size=1"
    return {
        "sizing": "/", "sizing-answer": answer,
        "sizing-speculative": f"{answer}&speculative_method=eagle&num_speculative_tokens=3",
        "compare": "/compare/", "replicas": "/replicas/", "replicas-answer": "/replicas/?rate=20",
        "replicas-disaggregated": "/replicas/?rate=10&prefill_instances=1&decode_instances=2&link_gbps=25",
        "sweep-new": "/sweeps/new/", "calibrations": "/calibrations/", "catalog": "/catalog/",
        "catalog-models": "/catalog/models/", "catalog-gpus": "/catalog/gpus/",
        "catalog-model": f"/catalog/models/{llama}/", "catalog-gpu": f"/catalog/gpus/{h100}/",
        "import": "/catalog/models/import/", "gpu-new": "/catalog/gpus/new/", "mine": "/catalog/mine/",
        "api-docs": "/api/docs/",
        # pages with errors
        "sizing-error": "/?gpu_memory_utilization=2&tensor_parallel_size=3&max_model_len=-5",
        "replicas-error": "/replicas/?rate=-1&ttft_ms=0&num_requests=5",
    }


def _result_pages(reports: dict) -> dict[str, str]:
    """Every page of a stored result (``reports``: the fixtures' objects) and every list of them, signed in, by its
    screenshot name, and the confirmations destructive actions ask for."""
    return {
        "sweeps": "/sweeps/", "reports": "/reports/", "search-new": "/searches/", "dayplan-new": "/plans/day/",
        "account": "/accounts/",
        "sweep": f"/sweeps/{reports['report'].sweep_id}/", "report": f"/reports/{reports['report'].slug}/",
        "report-point": f"/reports/{reports['report'].slug}/?point=0",
        "report-replicas": f"/reports/{reports['replicas'].slug}/", "report-cliff": f"/reports/{reports['cliff'].slug}/",
        "report-disaggregated": f"/reports/{reports['disaggregated'].slug}/",
        "report-speculative": f"/reports/{reports['speculative'].slug}/",
        "search-progress": f"/searches/{reports['queued_search'].pk}/",
        "search-report": f"/searches/r/{reports['search'].slug}/",
        "search-report-xpyd": f"/searches/r/{reports['xpyd_search'].slug}/",
        "dayplan-progress": f"/plans/day/{reports['queued_day_plan'].pk}/",
        "dayplan": f"/plans/day/{reports['day_plan'].pk}/",
        "report-delete": f"/reports/{reports['report'].slug}/delete/",
        "token-revoke": f"/accounts/tokens/{reports['token'].pk}/revoke/",
    }


#: The pages whose charts issue 22 found labels overlapping on: each must draw a chart at both widths.
CHART_PAGES = {"sizing", "compare", "replicas-answer", "report", "report-point", "report-replicas", "report-cliff",
               "search-report"}

#: The pages seen signed out (a shared report is opened by people without an account).
SIGNED_OUT = {"sign-in": "/accounts/login/", "sign-up": "/accounts/signup/"}

#: The tables that truly cannot fit a phone (one row of up to a dozen figures per simulated point, per GPU
#: compared, per catalog entry): they scroll inside their box, by keyboard too, with a hint. Every other table
#: fits its box at 390 px, and every table fits at 1400 px.
SCROLL_ON_A_PHONE = {"Points", "Every replica count simulated", "Disaggregated against aggregated, same GPUs",
                     "Every deployment tried", "Aggregated against disaggregated prefill/decode", "GPU comparison",
                     "Models", "GPUs", "Hour by hour"}


_CUT = """() => {
  const cut = [];
  for (const el of document.querySelectorAll('td.num, .kpi .value, .summary, .answer')) {
    if (el.scrollWidth > el.clientWidth + 1) cut.push(el.textContent.trim().slice(0, 40));
    const card = el.closest('.kpi');
    if (card && el.getBoundingClientRect().right > card.getBoundingClientRect().right + 1)
      cut.push('spills: ' + el.textContent.trim());
  }
  for (const wrap of document.querySelectorAll('#result .table-wrap:not(.sticky)')) {
    if (wrap.scrollWidth > wrap.clientWidth + 1) cut.push('table wider than its box: ' + wrap.scrollWidth);
  }
  return cut;
}"""


def _check_phone(page, name: str) -> None:
    width = page.evaluate("document.scrollingElement.scrollWidth")
    wide = page.evaluate("""() => [...document.querySelectorAll('body *')].filter(e =>
        e.getBoundingClientRect().right > window.innerWidth + 1 && !e.parentElement.closest('.table-wrap, .figure'))
        .slice(0, 3).map(e => e.tagName + '.' + e.className + ' ' + (e.textContent || '').trim().slice(0, 30))""")
    assert width <= PHONE["width"], f"{name}: the page scrolls sideways ({width} px): {wide}"
    menu = page.locator(".site-header").bounding_box()["height"]
    assert menu <= 0.15 * PHONE["height"], f"{name}: the menu takes {menu:.0f} px of the first screen"
    assert page.evaluate(_CUT) == [], f"{name}: values cut"
    if page.locator(".figure .main-svg").count():
        assert page.locator(".modebar-container .modebar").count() == 0, f"{name}: chart toolbar on a phone"


#: Words a person should never read: a plural left to the reader ("batch(es)", "GPU(s)") or a count of one
#: with a plural noun ("1 GPUs").
_CLUMSY = re.compile(r"\w\((?:e?s)\)|(?<![\d.,])\b1 (?:GPUs|replicas|requests(?!/)|batches|simulations|points|shapes)\b")


def _check_words(page, name: str) -> None:
    found = _CLUMSY.findall(page.locator("#main").inner_text())
    assert not found, f"{name}: {found}"


def _check_layout_and_axe(page, name: str, viewport: dict, axe: str) -> list[str]:
    """What a person would find cut, split or unreachable on this page, and axe's serious or critical findings."""
    found, scrolling = layout_problems(page)
    allowed = SCROLL_ON_A_PHONE if viewport is PHONE else set()
    found += [f"table “{t}” does not fit its box at {viewport['width']} px" for t in scrolling if t not in allowed]
    found += [f"axe: {v}" for v in axe_violations(page, axe)]
    return [f"{name} at {viewport['width']} px: {f}" for f in found]


def _shoot(browser, live_server, pages: dict[str, str], cookies: list) -> int:
    """Load every page at both widths and check it; returns how many charts were drawn (both widths together)."""
    axe = axe_source()
    failures: list[str] = []
    charts = 0
    for viewport in (DESKTOP, PHONE):
        context, page, problems = _new_page(browser, live_server, cookies=cookies, viewport=viewport)
        # axe-core sent once per context, run in every page it loads (axe_results then injects nothing)
        context.add_init_script(script=axe)
        try:
            for name, url in pages.items():
                response = page.goto(url)
                assert response.ok, f"{name}: {url} answered {response.status}"
                drawn = page.locator("[data-figure]").count()
                if drawn:
                    page.wait_for_function("[...document.querySelectorAll('[data-figure]')]"
                                           ".every(f => f.querySelector('.main-svg'))")
                drawn_at = time.monotonic()
                assert drawn or name not in CHART_PAGES, f"{name} at {viewport['width']} px draws no chart"
                if screenshots_wanted():
                    page.screenshot(path=str(SCREENSHOTS / f"{name}-{viewport['width']}.png"), full_page=True)
                if viewport is PHONE:
                    _check_phone(page, name)
                else:
                    _check_words(page, name)
                failures += _check_layout_and_axe(page, name, viewport, axe)
                if drawn:  # after the checks above, which give Plotly the time of its redraw (charts.REDRAW_S)
                    count, found = chart_label_problems(page, drawn_at)
                    charts += count
                    failures += [f"{name} at {viewport['width']} px: {f}" for f in found]
            _assert_clean(page, problems)
        finally:
            context.close()
    assert not failures, "\n".join(failures)
    return charts


# Every page at both widths, in two tests that xdist can give to its two workers: the pages that show no stored
# result (no fixture but the catalog and a user), and those of the results (the fixtures run the sweeps, searches
# and day plan they show). Together: every page a person reaches, signed in and out.


def test_every_page_without_a_stored_result_at_both_widths(browser, live_server, catalog, user):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert _shoot(browser, live_server, _plain_pages(), [session_cookie(live_server, user)]) >= 10
    _shoot(browser, live_server, SIGNED_OUT, [])


def test_every_page_of_a_stored_result_at_both_widths(browser, live_server, catalog, user, finished_report,
                                                      replicas_report, cliff_report, disaggregated_report,
                                                      speculative_report, search_report, xpyd_search_report,
                                                      queued_search, day_plan, queued_day_plan):
    from accounts.services import api_token_create

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    token, _ = api_token_create(user=user, name="notebook")
    pages = _result_pages({"report": finished_report, "replicas": replicas_report, "cliff": cliff_report,
                           "disaggregated": disaggregated_report, "speculative": speculative_report,
                           "search": search_report, "xpyd_search": xpyd_search_report, "queued_search": queued_search,
                           "day_plan": day_plan, "queued_day_plan": queued_day_plan, "token": token})
    assert _shoot(browser, live_server, pages, [session_cookie(live_server, user)]) >= 10
    _shoot(browser, live_server, {"report-signed-out": pages["report"],
                                  "search-report-signed-out": pages["search-report"]}, [])


def test_phone_sees_the_answer_first_after_asking(browser, live_server, catalog, user):
    context, page, problems = _new_page(browser, live_server, cookies=[session_cookie(live_server, user)],
                                        viewport=PHONE)
    try:
        page.goto("/")
        page.get_by_label("Max model length").fill("32768")
        page.get_by_role("button", name="Size it").click()
        summary = page.locator("#summary")
        expect(summary).to_be_visible()
        box = summary.bounding_box()
        assert box["y"] + box["height"] <= PHONE["height"], "the answer is on the first screen after asking"
        kv = page.locator("#kpi-kv-tokens").bounding_box()
        assert kv["y"] < PHONE["height"], "the first figure is on the first screen"
        _check_phone(page, "sizing-answer")
        _assert_clean(page, problems)
    finally:
        context.close()


#: Columns of each points table that a phone shows whole before scrolling it sideways.
_VISIBLE_COLUMNS = """() => [...document.querySelectorAll('.table-wrap table.points')].map(t => {
  const box = t.closest('.table-wrap').getBoundingClientRect();
  return [...t.querySelectorAll('thead th')].filter(th => th.getBoundingClientRect().right <= box.right + 1).length;
})"""


def test_report_tables_show_more_than_three_columns_on_a_phone(browser, live_server, catalog, user, finished_report,
                                                               replicas_report, search_report):
    """Issue 22 item 6: a report's table showed 3 columns at 390 px; its headings now wrap, values do not."""
    context, page, problems = _new_page(browser, live_server, viewport=PHONE)
    try:
        for path in (f"/reports/{finished_report.slug}/", f"/reports/{replicas_report.slug}/",
                     f"/searches/r/{search_report.slug}/"):
            page.goto(path)
            visible = page.evaluate(_VISIBLE_COLUMNS)
            assert visible and min(visible) >= 4, f"{path}: columns shown whole at 390 px: {visible}"
            cut = page.evaluate("""() => [...document.querySelectorAll('table.points td.num')]
                .filter(td => td.scrollWidth > td.clientWidth + 1).map(td => td.textContent.trim())""")
            assert cut == [], f"{path}: values cut: {cut}"
            # the chosen row is coloured whole, its sticky first cell too
            colours = page.evaluate("""() => [...document.querySelectorAll('table.points tr.chosen')].map(tr =>
                [...new Set([...tr.children].map(c => getComputedStyle(c).backgroundColor))])""")
            assert all(len(c) == 1 for c in colours), f"{path}: a chosen row in two colours: {colours}"
        _assert_clean(page, problems)
    finally:
        context.close()


def test_a_table_too_wide_for_a_phone_scrolls_by_keyboard_with_a_hint(browser, live_server, catalog, user,
                                                                      replicas_report):
    """Issue 33 items 1 and 7: a wide table's box could not be scrolled by keyboard and gave no cue (4 of 10
    columns in view); now Tab reaches the box, the arrow keys scroll it, and a hint says how many columns."""
    context, page, problems = _new_page(browser, live_server, viewport=PHONE)
    try:
        page.goto(f"/reports/{replicas_report.slug}/")
        wrap = page.locator(".table-wrap.scrolls").filter(has=page.locator("table.points")).first
        expect(wrap).to_have_attribute("tabindex", "0")
        expect(wrap).to_have_attribute("aria-label", "Points (scrolls sideways)")
        columns = page.locator("table.points thead th").count()
        hint = wrap.locator("xpath=preceding-sibling::p[1]")
        expect(hint).to_have_text(f"All {columns} columns: scroll the table sideways →")
        for _ in range(40):  # by keyboard alone: Tab until the box has the focus
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.classList.contains('scrolls')"):
                break
        else:
            raise AssertionError("Tab never reaches the table's box")
        ring = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert ring != "none", "the focused box shows a ring"
        assert wrap.evaluate("e => e.scrollLeft") == 0
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        page.wait_for_function("document.activeElement.scrollLeft > 0")
        _assert_clean(page, problems)
    finally:
        context.close()
