"""Issue 34 item 5 on the page: the search report's pools section (prefill and decode pools of their own TP /
DP / EP, DP-group shapes pooled too) at a desktop's 1400 px and a phone's 390 px: its words readable, the page
never scrolling sideways (the wide table scrolls inside its own box, by keyboard, with its hint), no value cut
and every numeric column labelled with its unit."""

from __future__ import annotations

import pytest

from tests.browser.conftest import _assert_clean, _new_page, session_cookie
from tests.browser.layout import layout_problems
from tests.search_definitions import dp_pools_search

VIEWPORTS = {"desktop": {"width": 1400, "height": 900}, "phone": {"width": 390, "height": 844}}

#: The pools table's column heads as read on the page (its units in .unit spans) and their cells' readers.
HEADS = """() => [...document.querySelectorAll('#pools-h ~ .table-wrap table')].map(t => ({
  caption: t.caption ? t.caption.textContent.trim() : '',
  heads: [...t.querySelectorAll('thead th')].map(th => ({text: th.innerText.replace(/\\s+/g, ' ').trim(),
          num: th.classList.contains('num'), unit: th.querySelector('.unit') ? th.querySelector('.unit').textContent.trim() : ''})),
  rows: [...t.querySelectorAll('tbody tr')].map(tr => [...tr.children].map(c => c.innerText.trim()))}))"""


@pytest.fixture
def dp_pools_report(user, monkeypatch):
    from planner.search import services

    monkeypatch.setattr(services, "search_enqueue", lambda search_id: None)
    search = services.search_run_here(search=services.search_create(owner=user, definition=dp_pools_search(
        name="Qwen3-30B-A3B: pools of DP groups")))
    assert search.status == search.Status.DONE, search.error
    assert search.result["disaggregated_pools"]["pairs"], search.result["disaggregated_pools"]
    return search


@pytest.mark.parametrize("viewport", sorted(VIEWPORTS))
def test_the_pools_section_reads_at_both_widths(browser, live_server, catalog, user, dp_pools_report, viewport,
                                                screenshot):
    size = VIEWPORTS[viewport]
    context, page, problems = _new_page(browser, live_server, [session_cookie(live_server, user)], size)
    try:
        page.goto(f"/searches/r/{dp_pools_report.slug}/")
        section = page.locator("section[aria-labelledby='pools-h']")
        section.scroll_into_view_if_needed()
        assert section.is_visible()
        # the page itself never scrolls sideways; a table too wide for the phone scrolls in its own box
        assert page.evaluate("document.scrollingElement.scrollWidth") <= size["width"]
        found, scrolling = layout_problems(page)
        assert found == [], found
        if viewport == "desktop":
            assert "Pairs of pools checked" not in scrolling, "the pools table fits 1400 px"
        # readable: the verdict and the help are at least 12 px, wrapped inside the page
        for sel in ("#pools-verdict", "section[aria-labelledby='pools-h'] p.help"):
            box = page.locator(sel).bounding_box()
            px = float(page.locator(sel).evaluate("e => parseFloat(getComputedStyle(e).fontSize)"))
            assert px >= 12 and box["x"] >= 0 and box["x"] + box["width"] <= size["width"] + 1, (sel, px, box)
        pairs, sized = page.evaluate(HEADS)
        assert pairs["caption"] == "Pairs of pools checked"
        heads = pairs["heads"]
        # every numeric column says its unit; the text columns are the pair's name and its SLO verdict
        assert [h["text"] for h in heads if h["num"] and not h["unit"]] == [], heads
        assert {h["text"] for h in heads if not h["num"]} == {"Prefill + decode pools", "SLO"}
        units = {h["text"].removesuffix(" " + h["unit"]): h["unit"] for h in heads}
        assert units["Prefill pool"] == units["Decode pool"] == "instances × TP × DP"
        assert units["KV moved"] == "KiB per token" and units["Total"] == "GPUs" and units["Cost"] == "USD/h"
        assert units["TTFT p90"] == units["ITL p90"] == "ms"
        # the rows show each pool's own layout; the DP-group shape is pooled (sized in both roles)
        names = [h["text"] for h in heads]
        cells = [dict(zip(names, r)) for r in pairs["rows"] if len(r) == len(heads)]
        assert cells, pairs["rows"]
        for r in cells:
            for side in ("Prefill pool instances × TP × DP", "Decode pool instances × TP × DP"):
                assert r[side][0].isdigit() and " × TP 1" in r[side], r
            assert float(r["KV moved KiB per token"]) > 0, r
        assert any("DP 2 + EP" in r[0] and r[1] for r in sized["rows"]), sized["rows"]
        screenshot(page, f"search-pools-{size['width']}")
        _assert_clean(page, problems)
    finally:
        context.close()
