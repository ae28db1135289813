"""Issue 22: no chart's axis title overlaps its tick labels, another title or a panel title.

Read back from the SVG Chromium drew (``getBoundingClientRect`` of each axis title, tick label, subplot
title and chart title): any two that intersect by more than a pixel are an overlap. ``test_mobile.py`` runs
:func:`chart_label_problems` on every page with charts, at 1400 and 390 px, in the visit it makes for its
other checks (before, tests/browser/test_chart_labels.py loaded eight of those pages again at the same two
widths for this check alone).
"""

from __future__ import annotations

import time

#: Plotly redraws after its first layout pass: labels are read no sooner than this after the charts appeared.
REDRAW_S = 0.3

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


def chart_label_problems(page, drawn_at: float) -> tuple[int, list[str]]:
    """``(charts on the page, problems)``: a chart without axis titles or tick labels, or two labels that
    overlap. ``drawn_at``: ``time.monotonic()`` when every chart's SVG was there (see :data:`REDRAW_S`)."""
    left = REDRAW_S - (time.monotonic() - drawn_at)
    if left > 0:
        page.wait_for_timeout(left * 1000)
    counts = page.evaluate(COUNTS)
    problems = [f"a chart without axis titles or tick labels: {c}" for c in counts if not (c["titles"] and c["ticks"])]
    problems += [f"labels overlap: {o}" for o in page.evaluate(OVERLAPS)]
    return len(counts), problems
