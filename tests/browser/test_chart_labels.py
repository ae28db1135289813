"""Issue 22: no chart's axis title overlaps its tick labels, another title or a panel title.

Every page that draws Plotly charts, at a laptop's width and a phone's (390 px), drawn by
Chromium; the boxes are read back from the rendered SVG (``getBoundingClientRect`` of each
axis title, tick label, subplot title and chart title) and any two that intersect by more
than a pixel are an overlap.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

# Each chart's labels that intersect: [{chart, a, b}] (texts of the two labels and their kinds).
OVERLAPS = """() => {
  const out = [];
  const box = el => el.getBoundingClientRect();
  const hit = (p, q) => Math.min(p.right, q.right) - Math.max(p.left, q.left) > 1
                       && Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top) > 1;
  for (const fig of document.querySelectorAll('.figure')) {
    const svg = fig.querySelectorAll('.main-svg');
    const q = sel => [...fig.querySelectorAll(sel)].filter(e => e.textContent.trim() && box(e).width > 0);
    const titles = q('g[class^="g-x"][class$="title"] text, g[class^="g-y"][class$="title"] text')
      .map(e => ({kind: 'axis title', el: e}));
    const others = [
      ...q('g[class$="tick"] text').map(e => ({kind: 'tick label', el: e})),
      ...q('g.annotation text').map(e => ({kind: 'panel title', el: e})),
      ...q('.g-gtitle text').map(e => ({kind: 'chart title', el: e})),
    ];
    titles.forEach((t, i) => {
      for (const o of [...titles.slice(i + 1), ...others]) {
        if (hit(box(t.el), box(o.el))) {
          out.push({chart: fig.id, a: `${t.kind} "${t.el.textContent}"`, b: `${o.kind} "${o.el.textContent}"`});
        }
      }
    });
  }
  return out;
}"""
COUNTS = """() => [...document.querySelectorAll('.figure')].map(f => ({
  id: f.id, titles: f.querySelectorAll('g[class^="g-x"][class$="title"] text, g[class^="g-y"][class$="title"] text').length,
  ticks: f.querySelectorAll('g[class$="tick"] text').length}))"""

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1400, "height": 900}


def _pages(finished_report, replicas_report, cliff_report, search_report) -> list[str]:
    return ["/", "/compare/", "/replicas/?rate=20", f"/reports/{finished_report.slug}/",
            f"/reports/{finished_report.slug}/?point=0", f"/reports/{replicas_report.slug}/",
            f"/reports/{cliff_report.slug}/", f"/searches/r/{search_report.slug}/"]


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_no_axis_title_overlaps_a_label(signed_in_page, finished_report, replicas_report, cliff_report,
                                        search_report, viewport):
    page = signed_in_page
    page.set_viewport_size(viewport)
    found, charts = [], 0
    for path in _pages(finished_report, replicas_report, cliff_report, search_report):
        page.goto(path)
        figs = page.locator(".figure")
        expect(figs.first).to_be_attached()
        for fig_id in figs.evaluate_all("els => els.map(e => e.id)"):
            expect(page.locator(f"#{fig_id} .main-svg").first).to_be_attached()
        page.wait_for_timeout(300)  # Plotly's redraw after its first layout pass
        counts = page.evaluate(COUNTS)
        assert all(c["titles"] and c["ticks"] for c in counts), f"{path}: a chart without axis titles: {counts}"
        charts += len(counts)
        found += [{"page": path, **o} for o in page.evaluate(OVERLAPS)]
    assert charts >= 10
    assert not found, "labels overlap:\n" + "\n".join(map(str, found))
