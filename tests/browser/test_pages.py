"""Every main page, as a person on a laptop sees it: one layout and navigation, labelled fields whose
descriptions exist, drop-downs whose options are not cut off, nothing wider than the screen, charts
that fit, Plotly only where a chart is drawn.

The flows (test_sizing.py, test_sweeps.py, ...) check what the pages do; this checks how each looks.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

# A laptop screen (the flows' screenshots use a taller window; the width is what matters here).
LAPTOP = {"width": 1366, "height": 768}
NAV_LINKS = ("Sizing", "Replicas", "Sweeps", "Search", "Day plans", "Reports", "Catalog", "API docs")

# (screenshot name or None when a flow already takes one, path, draws figures)
SIGNED_IN_PAGES = [
    (None, "/", True),
    ("sizing-no-figures", "/?gpu_memory_utilization=2", False),
    (None, "/compare/", True),
    ("replicas-form", "/replicas/", False),
    (None, "/replicas/?rate=20", True),
    ("sweep-new", "/sweeps/new/", False),
    (None, "/sweeps/", False),
    (None, "/sweeps/{sweep}/", False),
    (None, "/reports/", False),
    (None, "/reports/{report}/", True),
    ("report-replicas", "/reports/{replicas_report}/", True),
    (None, "/searches/", False),
    (None, "/searches/r/{search}/", True),
    ("dayplan-form", "/plans/day/", False),
    (None, "/catalog/", False),
    (None, "/catalog/models/", False),
    ("catalog-gpus", "/catalog/gpus/", False),
    ("catalog-model", "/catalog/models/deepseek-v3/", False),
    (None, "/catalog/gpus/h100-sxm5-80gb/", False),
    (None, "/catalog/models/import/", False),
    ("catalog-gpu-new", "/catalog/gpus/new/", False),
    ("catalog-mine", "/catalog/mine/", False),
    (None, "/accounts/", False),
    (None, "/api/docs/", False),
]
SIGNED_OUT_PAGES = [
    ("sign-in", "/accounts/login/", False),
    ("sign-up", "/accounts/signup/", False),
    (None, "/reports/{report}/", True),
    (None, "/replicas/?rate=20", True),
]

# ids named by aria-describedby that are not in the page, as "element: id"
MISSING_DESCRIPTIONS = """() => [...document.querySelectorAll('[aria-describedby]')].flatMap(el =>
    el.getAttribute('aria-describedby').split(/\\s+/).filter(id => id && !document.getElementById(id))
      .map(id => `${el.tagName.toLowerCase()}#${el.id || '?'}: ${id}`))"""
# form controls a person fills in that have no label (Swagger UI's own controls aside)
UNLABELLED = """() => [...document.querySelectorAll('main input, main select, main textarea')]
    .filter(el => !['hidden', 'submit', 'button'].includes(el.type) && !el.closest('.swagger-ui'))
    .filter(el => el.labels.length === 0 && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby'))
    .map(el => el.name || el.id)"""
# the page's own width against the window's: a page that scrolls sideways is wider than its viewport
WIDTHS = "() => ({scroll: document.scrollingElement.scrollWidth, client: document.scrollingElement.clientWidth, inner: innerWidth})"
# <select>s whose widest option is cut off: the text's width against the room inside the box
# (its width less padding and the arrow), measured with the select's own font; hidden ones (the sweep
# form's other mode) are not drawn
CUT_OFF_SELECTS = """() => [...document.querySelectorAll('main select')]
    .filter(s => !s.closest('.swagger-ui') && s.offsetParent !== null).map(sel => {
    const cs = getComputedStyle(sel), ctx = document.createElement('canvas').getContext('2d');
    ctx.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
    const room = sel.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 20;
    const texts = [...sel.options].map(o => o.text);
    const widest = texts.reduce((a, t) => ctx.measureText(t).width > ctx.measureText(a).width ? t : a, '');
    return {name: sel.name, room: Math.round(room), widest: Math.round(ctx.measureText(widest).width), text: widest};
  }).filter(s => s.widest > s.room)"""
# each drawn chart's box and its SVG, in CSS pixels
FIGURE_BOXES = """() => [...document.querySelectorAll('.figure')].map(f => {
    const svg = f.querySelector('.main-svg'); const b = f.getBoundingClientRect();
    return {id: f.id, right: b.right, width: b.width, height: b.height,
            svgWidth: svg ? svg.getBoundingClientRect().width : null,
            svgHeight: svg ? svg.getBoundingClientRect().height : null};
  })"""


def _check(page, path: str, *, figures: bool) -> int:
    """Check one page; returns how many elements carry aria-describedby (so the caller knows some did)."""
    scripts = []
    on_request = lambda request: scripts.append(request.url)  # noqa: E731 - a one-line listener
    page.on("request", on_request)
    try:
        page.goto(path)
        page.wait_for_load_state("load")
        expect(page.locator("#main")).to_be_visible()

        nav = page.get_by_role("navigation", name="Main")
        for name in NAV_LINKS:
            expect(nav.get_by_role("link", name=name, exact=True)).to_be_visible()

        if figures:
            for fig_id in page.locator(".figure").evaluate_all("els => els.map(e => e.id)"):
                expect(page.locator(f"#{fig_id} .main-svg").first).to_be_attached()
        else:
            expect(page.locator(".figure")).to_have_count(0)
        loads_plotly = any(url.endswith("/plotly-cartesian.min.js") for url in scripts)
        assert loads_plotly == figures, f"{path}: Plotly loaded={loads_plotly}, page draws figures={figures}"

        assert page.evaluate(MISSING_DESCRIPTIONS) == [], f"{path}: aria-describedby names ids not in the page"
        assert page.evaluate(UNLABELLED) == [], f"{path}: form fields without a label"
        assert page.evaluate(CUT_OFF_SELECTS) == [], f"{path}: options cut off in their <select>"

        w = page.evaluate(WIDTHS)
        assert w["scroll"] <= w["inner"], f"{path}: the page scrolls sideways at {LAPTOP['width']} px: {w}"
        assert w["scroll"] <= w["client"], f"{path}: content wider than the window: {w}"

        for box in page.evaluate(FIGURE_BOXES):
            assert box["right"] <= w["client"] + 0.5, f"{path}: chart {box['id']} sticks out: {box}"
            assert box["svgWidth"] is not None and box["svgWidth"] <= box["width"] + 0.5, (path, box)
            assert box["height"] <= LAPTOP["height"], f"{path}: chart {box['id']} is taller than the screen"
            # the box is as high as the chart (borders aside): no empty band under it
            assert abs(box["height"] - 2 - box["svgHeight"]) <= 2, f"{path}: empty band around {box}"
        return page.locator("[aria-describedby]").count()
    finally:
        page.remove_listener("request", on_request)


def _path(template: str, finished_report, replicas_report=None, search_report=None) -> str:
    return template.format(report=finished_report.slug, sweep=finished_report.sweep_id,
                           replicas_report=replicas_report.slug if replicas_report else "",
                           search=search_report.slug if search_report else "")


def test_every_main_page_signed_in(signed_in_page, finished_report, replicas_report, search_report, screenshot):
    page = signed_in_page
    page.set_viewport_size(LAPTOP)
    described = 0
    for name, template, figures in SIGNED_IN_PAGES:
        described += _check(page, _path(template, finished_report, replicas_report, search_report), figures=figures)
        if name:
            screenshot(page, name)
    # the forms (sizing, compare, sweep, catalog filters and profiles, import, token) describe their fields
    assert described > 50


def test_every_main_page_signed_out(page, finished_report, screenshot):
    page.set_viewport_size(LAPTOP)
    for name, template, figures in SIGNED_OUT_PAGES:
        _check(page, _path(template, finished_report), figures=figures)
        if name:
            screenshot(page, name)


def test_the_current_section_is_marked_in_the_navigation(signed_in_page, finished_report):
    page = signed_in_page
    for path, section in (("/", "Sizing"), ("/compare/", "Sizing"), ("/replicas/", "Replicas"), ("/sweeps/new/", "Sweeps"),
                          (f"/reports/{finished_report.slug}/", "Reports"), ("/catalog/gpus/", "Catalog"),
                          ("/api/docs/", "API docs")):
        page.goto(path)
        current = page.get_by_role("navigation", name="Main").locator('[aria-current="page"]')
        expect(current).to_have_count(1)
        expect(current).to_have_text(section)


@pytest.mark.parametrize("path", ["/", "/replicas/", "/sweeps/new/", "/catalog/models/", "/plans/day/"])
def test_every_help_text_is_tied_to_its_field(signed_in_page, path):
    """Help under a field is read out with it: the input's aria-describedby names the help's id."""
    page = signed_in_page
    page.goto(path)
    helps = page.locator("main .field > .help[id]")
    assert helps.count() >= 3
    for help_id in helps.evaluate_all("els => els.map(e => e.id)"):
        field_id = re.sub(r"_helptext$", "", help_id)
        control = page.locator(f"#{field_id}")
        if control.count() == 0:  # a group of checkboxes: the fieldset carries it
            control = page.locator(f'fieldset[aria-describedby="{help_id}"]')
        expect(control).to_have_count(1)
        assert help_id in (control.get_attribute("aria-describedby") or "").split(), help_id


def test_navigation_by_keyboard_with_a_visible_focus_ring(page):
    page.goto("/catalog/")
    focus = "() => { const e = document.activeElement, s = getComputedStyle(e);" \
            " return {text: e.innerText.trim(), ring: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0}; }"
    seen = []
    for _ in range(2 + len(NAV_LINKS)):
        page.keyboard.press("Tab")
        seen.append(page.evaluate(focus))
    assert [s["text"] for s in seen] == ["Skip to content", "KV Planner", *NAV_LINKS]
    assert all(s["ring"] for s in seen), seen
    page.keyboard.press("Enter")  # on "API docs"
    expect(page).to_have_url(re.compile(r"/api/docs/$"))
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("KV Planner API")
