"""A search report never contradicts itself on latency (issue 22 loose end): TTFT/ITL in ms everywhere, in
its messages as in its tables, and a figure in a sentence printed as the table beside it prints it.

Before: the search's messages switched to seconds above 1 s ("1.23 s") while the table was in ms, and the
xPyD verdict said "7.6 ms" where its table showed "8" (two roundings of one value). Now both go through
``simulator.base.readable`` (the sweeps' table cells use the same rule).
"""

from __future__ import annotations

import csv
import io
import re
from html import unescape
from html.parser import HTMLParser

import pytest
from rest_framework.test import APIClient

from planner import tasks
from planner.search.models import Search
from planner.sweeps.views import _cell
from simulator.search.space import format_seconds
from tests.search_definitions import xpyd_search


def test_latency_messages_stay_in_ms_above_a_second():
    assert format_seconds(1.2345) == "1,234 ms"  # was "1.23 s"
    assert format_seconds(0.0076) == "7.6 ms"
    assert format_seconds(0.2124) == "212 ms"
    assert format_seconds(float("inf")) == "never"
    assert _cell(7.6) == "7.6" and _cell(1234.5) == "1,234"  # the sweeps' tables: the same rule


class _Tables(HTMLParser):
    """Rows of the tables of a page: ``{table_id_or_label: [[cell text, ...], ...]}``."""

    def __init__(self):
        super().__init__()
        self.tables, self._rows, self._cell = {}, None, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._rows = self.tables.setdefault(dict(attrs).get("aria-labelledby"), [])
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._rows[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._rows = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _xpyd_search(django_user_model) -> Search:
    """A finished search with ``disaggregated`` (its answer and the answer's xPyD splits)."""
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("units", password="pw-units-12345"))
    s = Search.objects.get(pk=client.post("/api/searches/", xpyd_search(), format="json").json()["id"])
    for i in range(s.num_chunks):
        assert tasks.run_search_chunk(s.pk, i) == "done"
    s.refresh_from_db()
    return s


@pytest.mark.django_db
def test_the_xpyd_sentence_and_table_print_one_value_alike(django_user_model):
    s = _xpyd_search(django_user_model)
    html = APIClient().get(f"/searches/r/{s.slug}/").content.decode()
    parsed = _Tables()
    parsed.feed(html)
    head, *rows = parsed.tables["xpyd-h"]
    cols = {h.removesuffix("ms").strip(): i for i, h in enumerate(head)}
    table = {r[0].removeprefix("aggregated x").isdigit() and "aggregated" or r[0]: r for r in rows}
    verdict = unescape(re.search(r'id="xpyd-verdict">(.*?)</p>', html, re.S)[1])
    verdict = re.sub(r"<[^>]+>", "", verdict)
    # "TTFT p90 is 61.2 ms for 1P3D against 7.6 ms aggregated": each figure is its row's cell, digit for digit
    m = re.search(r"(TTFT p90|ITL p90) is ([\d.,]+) ms for (\S+) against ([\d.,]+) ms aggregated", verdict)
    figures = re.findall(r"(TTFT p90|ITL p90) ([\d.,]+) ms", verdict)
    assert m or figures, verdict
    # a trade-off clause ("; 1P1D is better on ITL p90 ...") is checked below when the verdict has one (since ITL
    # is every token gap, this search's aggregated answer is better on both figures and the verdict has none)
    if m:
        lab, split_v, name, agg_v = m.groups()
        assert table[name][cols[lab]] == split_v and table["aggregated"][cols[lab]] == agg_v, (verdict, table)
    # "; 1P1D is better on ITL p90 (7.46 ms against 10.4 ms)": the loser's figure, then the winner's
    for loser, lab, lv, wv in re.findall(r"; (\S+) is better on (TTFT p90|ITL p90) \(([\d.,]+) ms against ([\d.,]+) ms\)",
                                         verdict):
        winner = "aggregated" if loser != "aggregated" else m[3]
        assert (table[loser][cols[lab]], table[winner][cols[lab]]) == (lv, wv), (verdict, table)
    for lab, v in figures:  # "(…: TTFT p90 212 ms, ITL p90 7.6 ms)": printed as some row of the table prints it
        assert v in {r[cols[lab]] for r in rows}, (lab, v, rows)
    # no latency in seconds anywhere in the page's sentences or tables
    text = re.sub(r"<[^>]+>", " ", html)
    assert not re.search(r"\d s\b[^/]", unescape(text).replace("requests/s", "")), "a latency in seconds"


@pytest.mark.django_db
def test_the_csv_has_a_row_per_xpyd_split_in_the_same_columns_and_units(django_user_model):
    s = _xpyd_search(django_user_model)
    text = APIClient().get(f"/searches/r/{s.slug}/download.csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    alt = s.result["disaggregated"]
    agg = [r for r in rows if r["serving"] == "aggregated"]
    split = [r for r in rows if r["serving"] == "xPyD"]
    assert len(agg) + len(split) == len(rows) and agg and all(r["status"] != "split" for r in agg)
    assert [r["candidate"] for r in split] == [x["name"] for x in alt["splits"]]
    c = s.result["best"]["candidate"]
    for r, x in zip(split, alt["splits"]):
        assert (r["status"], r["gpu"], r["tensor_parallel"]) == ("split", c["gpu"], str(c["tensor_parallel"]))
        assert (int(r["prefill_instances"]), int(r["decode_instances"])) == (x["prefill_instances"],
                                                                             x["decode_instances"])
        assert int(r["replicas"]) == x["prefill_instances"] + x["decode_instances"]
        assert float(r["cost_per_hour_usd"]) == pytest.approx(x["cost_per_hour"], rel=1e-5)
        assert r["meets"] == str(x["meets"]) and r["reason"]
        for lab, v in x["values"].items():  # seconds, as the aggregated rows' columns
            assert float(r[f"{lab} (s)"]) == pytest.approx(v, rel=1e-5)
        assert float(r["kv_transfer_p90_s"]) == pytest.approx(x["transfer_p90_s"], rel=1e-5)
        assert float(r["cost_per_million_output_tokens_usd"]) == pytest.approx(
            x["cost_per_hour"] / (x["output_tokens_per_s"] * 3600) * 1e6, rel=1e-5)
    # the answer's own row and its split at the same GPUs cost the same (one unit, one column)
    answer = next(r for r in agg if r["status"] == "answer" and int(r["replicas"]) == s.result["best"]["replicas"])
    same = next(r for r in split if int(r["replicas"]) == s.result["best"]["replicas"])
    assert float(answer["cost_per_hour_usd"]) == pytest.approx(float(same["cost_per_hour_usd"]))
