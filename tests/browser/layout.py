"""Layout checks run inside a page (issue 33 items 1 and 7): what a person would see cut, hidden or split.

- :data:`TABLE_PROBLEMS`: for every table of the page's main part, its container (the nearest box that clips
  sideways) must not be wider inside than out, unless it is a scroll box a keyboard can reach and that says it
  scrolls (``.table-wrap.scrolls``: ``tabindex="0"``, a name, and its hint, set by ``static/js/scroll_boxes.js``);
  such boxes are returned by name for the test to compare with the tables that truly cannot fit. Where the box
  does not scroll, every header and value cell's box lies inside it; no cell's own text is cut.
- :data:`SPLIT_NUMBERS`: no number of a key figure (``.kpi .value``), an answer or a table cell broken over two
  lines ("9,480,9 / 60").
- :data:`CLIPPED_TITLES`: every chart's title (Plotly's ``.gtitle``) lies inside its chart's box.
- :data:`CHART_TEXT_CONTRAST`: chart text at 4.5:1 or more against what is behind it (axe skips SVG text).
"""

from __future__ import annotations

TABLE_PROBLEMS = """() => {
  const problems = [], scrolling = [];
  const clipsX = e => ['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(e).overflowX);
  const name = t => (t.getAttribute('aria-label') || (t.caption && t.caption.textContent) ||
      (t.getAttribute('aria-labelledby') && document.getElementById(t.getAttribute('aria-labelledby'))?.textContent)
      || t.id || t.className || 'table').trim().slice(0, 60);
  for (const table of document.querySelectorAll('main table')) {
    if (table.closest('.swagger-ui') || table.offsetParent === null) continue;
    let box = table.parentElement;
    while (box && box !== document.body && !clipsX(box)) box = box.parentElement;
    if (!box || box === document.body) box = document.querySelector('main');
    const label = name(table);
    if (box.scrollWidth > box.clientWidth + 1) {
      const ok = box.matches('.table-wrap.scrolls') && box.tabIndex === 0 && box.getAttribute('aria-label')
                 && box.previousElementSibling && box.previousElementSibling.matches('.scroll-hint');
      if (!ok) problems.push(`${label}: ${box.scrollWidth} px wide in a ${box.clientWidth} px box that a keyboard cannot scroll or that gives no cue`);
      scrolling.push(label);
      continue;
    }
    const b = box.getBoundingClientRect();
    for (const cell of table.querySelectorAll('th, td')) {
      if (cell.offsetParent === null) continue;
      const r = cell.getBoundingClientRect();
      const head = cell.closest('thead');
      if (r.width === 0 || (head && getComputedStyle(head).position === 'absolute')) continue;  // a stacked list's hidden headings
      if (r.left < b.left - 1 || r.right > b.right + 1)
        problems.push(`${label}: cell "${cell.textContent.trim().slice(0, 30)}" at ${Math.round(r.left)}-${Math.round(r.right)} outside its box ${Math.round(b.left)}-${Math.round(b.right)}`);
      if (cell.scrollWidth > cell.clientWidth + 1)
        problems.push(`${label}: cell "${cell.textContent.trim().slice(0, 30)}" cut (${cell.scrollWidth} px of text in ${cell.clientWidth})`);
    }
  }
  for (const v of document.querySelectorAll('.kpi .value')) {
    const card = v.closest('.kpi').getBoundingClientRect(), r = v.getBoundingClientRect();
    if (v.scrollWidth > v.clientWidth + 1 || r.right > card.right + 1)
      problems.push(`key figure "${v.textContent.trim()}" spills out of its card`);
  }
  return {problems, scrolling};
}"""

SPLIT_NUMBERS = """() => {
  const split = [];
  const roots = document.querySelectorAll('.kpi .value, .answer, .summary, main td.num, main th.num');
  for (const root of roots) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.textContent.matchAll(/\\$?\\d[\\d,.]*\\d|\\d/g)) {
        const range = document.createRange();
        range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) split.push(`${m[0]} in "${root.textContent.trim().slice(0, 40)}"`);
      }
    }
  }
  return split;
}"""

CLIPPED_TITLES = """() => [...document.querySelectorAll('.figure')].flatMap(f => {
  const b = f.getBoundingClientRect();
  return [...f.querySelectorAll('.gtitle')].filter(t => {
    const r = t.getBoundingClientRect();
    return r.width > 0 && (r.left < b.left - 1 || r.right > b.right + 1 || r.top < b.top - 1);
  }).map(t => `${f.id}: "${t.textContent}" ${Math.round(r0(t).left)}-${Math.round(r0(t).right)} in ${Math.round(b.left)}-${Math.round(b.right)}`);
  function r0(t) { return t.getBoundingClientRect(); }
})"""


#: Text a chart draws (SVG, which axe does not check) below 4.5:1 against what is behind it: the bar it sits in
#: for text inside a bar, the chart's white paper otherwise. A heatmap's cell labels are left out: Plotly draws
#: each in black or white against its own cell's colour.
CHART_TEXT_CONTRAST = """() => {
  const rgb = s => { const m = /rgba?\\(([\\d.]+),\\s*([\\d.]+),\\s*([\\d.]+)/.exec(s || ''); return m ? [+m[1], +m[2], +m[3]] : null; };
  const lum = c => { const [r, g, b] = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
                     return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const low = [];
  for (const t of document.querySelectorAll('.figure .main-svg text')) {
    const text = t.textContent.trim();
    if (!text || t.getBBox().width === 0 || getComputedStyle(t).opacity === '0') continue;
    if (t.closest('.heatmap-label')) continue;  // Plotly picks black or white for each cell's colour
    const fg = rgb(getComputedStyle(t).fill);
    let bg = [255, 255, 255];
    if (t.classList.contains('bartext-inside')) {
      const bar = t.closest('.point') && t.closest('.point').querySelector('path');
      if (bar) bg = rgb(getComputedStyle(bar).fill) || bg;
    }
    if (fg && ratio(fg, bg) < 4.5) low.push(`${t.closest('.figure').id}: "${text.slice(0, 30)}" ${ratio(fg, bg).toFixed(2)}:1`);
  }
  return low;
}"""


def layout_problems(page) -> tuple[list[str], list[str]]:
    """``(problems, tables that scroll inside their box)`` of the page as drawn now."""
    tables = page.evaluate(TABLE_PROBLEMS)
    problems = list(tables["problems"])
    problems += [f"number split over two lines: {s}" for s in page.evaluate(SPLIT_NUMBERS)]
    problems += [f"chart title clipped: {s}" for s in page.evaluate(CLIPPED_TITLES)]
    problems += [f"chart text below 4.5:1: {s}" for s in page.evaluate(CHART_TEXT_CONTRAST)]
    return problems, tables["scrolling"]
