"""Issue 22: a report gives each latency in one unit, the same in its table, its advice, its charts and the
search's pages (ms for TTFT and ITL, as the replicas page and the latency targets do); the downloads keep
seconds and say so in their unit column."""

from __future__ import annotations

import csv
import io
import re

import pytest
from playwright.sync_api import expect


def _table(page) -> tuple[list[str], list[list[str]]]:
    """The points table as read on the page: column titles with their units ("TTFT p90 ms"), and rows."""
    heads = page.locator("table.points thead th").evaluate_all(
        "els => els.map(e => e.innerText.replace(/\\s+/g, ' ').trim())")
    rows = page.locator("table.points tbody tr").evaluate_all(
        "trs => trs.map(tr => [...tr.children].map(c => c.innerText.trim()))")
    return heads, rows


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def test_replicas_report_gives_latency_in_ms_in_table_advice_and_chart(page, replicas_report, screenshot):
    slug = replicas_report.slug
    page.goto(f"/reports/{slug}/")
    heads, rows = _table(page)
    ttft_col = heads.index("TTFT p90 ms")
    itl_col = heads.index("ITL p90 ms")
    rate_col, n_col = heads.index("Request rate requests/s"), heads.index("Replicas instances")
    assert not [h for h in heads if h.startswith(("TTFT", "ITL")) and not h.endswith((" ms", " steps"))], heads

    advice = page.locator('.advice li[data-code="replicas"]').all_inner_texts()
    assert len(advice) == 2, advice  # one sentence per request rate
    for text in advice:
        m = re.search(r"At ([\d.]+) requests/s, (\d+) replicas? (?:is|are) the fewest that meet .*"
                      r"\(TTFT p90 ([\d,.]+) ms, ITL p90 ([\d,.]+) ms\)", text)
        assert m, text
        rate, n, ttft_ms, itl_ms = float(m[1]), m[2], _num(m[3]), _num(m[4])
        row = next(r for r in rows if _num(r[rate_col]) == rate and r[n_col] == n)
        # the same quantity, the same unit: equal up to each one's rounding (3 significant digits, whole ms)
        assert _num(row[ttft_col]) == pytest.approx(ttft_ms, abs=max(1.0, 0.01 * ttft_ms)), (row, text)
        assert _num(row[itl_col]) == pytest.approx(itl_ms, abs=max(0.1, 0.01 * itl_ms)), (row, text)

    # The chart draws the same milliseconds, and its axes say so.
    page.wait_for_function("document.getElementById('fig-replicas') && document.getElementById('fig-replicas').data")
    fig = page.evaluate("""() => { const g = document.getElementById('fig-replicas');
        return {data: g.data.map(t => ({name: t.name, x: t.x, y: t.y})),
                titles: [g.layout.yaxis.title.text, g.layout.yaxis2.title.text]}; }""")
    assert fig["titles"] == ["TTFT p90 (ms)", "ITL p90 (ms)"]
    drawn = {(t["name"], x): y for t in fig["data"] if t["y"] and t["name"].startswith("TTFT p90")
             for x, y in zip(t["x"], t["y"]) if y is not None}
    for row in rows:
        key = next(k for k in drawn if k[1] == int(row[n_col]) and f"{_num(row[rate_col]):g} requests/s" in k[0])
        assert drawn[key] == pytest.approx(_num(row[ttft_col]), rel=0.01), (key, row)

    # The sweep figure's TTFT panel is in ms too (not seconds beside a table in ms).
    sweep = page.evaluate("""() => { const g = document.getElementById('fig-sweep');
        return g ? g.layout.yaxis2.title.text : null; }""")
    assert sweep == "ms", sweep

    # The CSV keeps seconds and names the unit of every latency.
    body = page.request.get(f"/reports/{slug}/download.csv").text()
    units = {r["metric"]: r["unit"] for r in csv.DictReader(io.StringIO(body))}
    for metric in ("ttft_p90_s", "itl_p90_s", "ttft_p99_s", "e2e_p99_s"):
        assert units[metric] == "s", (metric, units[metric])
    assert all(units[m] for m in units if m.endswith("_s")), "a latency without its unit"
    expect(page.locator("#fig-replicas .main-svg").first).to_be_attached()
    screenshot(page, "report-units")
