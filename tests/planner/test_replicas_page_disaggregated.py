"""The replicas page's disaggregated comparison: xPyD against as many aggregated replicas, same GPUs.

Proved: with prefill and decode instances the page adds a table of two rows whose GPU counts and costs
are equal and whose figures are those of the two simulations (the xPyD row has a KV transfer time and
pool utilisations, the aggregated one none); a missing count or a zero-bandwidth link is an error on
its field, and the page never answers with a 500.
"""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db

BASE = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "rate": "10", "num_requests": "60",
        "prompt_mean": "1024", "prompt_std": "128", "output_mean": "64", "output_std": "16", "routing": "least-loaded",
        "max_instances": "4"}


def field_errors(html: str, field: str) -> list[str]:
    m = re.search(rf'<ul class="errorlist" id="id_{field}_error"[^>]*>(.*?)</ul>', html, re.S)
    return re.findall(r"<li>(.*?)</li>", m.group(1), re.S) if m else []


def test_comparison_table_has_equal_gpus_and_cost(client):
    r = client.get("/replicas/", {**BASE, "prefill_instances": "1", "decode_instances": "2", "link_gbps": "25"})
    assert r.status_code == 200
    rows = r.context["disaggregated"]
    assert [row["name"] for row in rows] == ["aggregated ×3", "1P2D"]
    agg, dis = rows
    assert agg["gpus"] == dis["gpus"] == 3 and agg["price_per_hour"] == pytest.approx(dis["price_per_hour"])
    assert agg["finished"] == dis["finished"] == 60
    assert agg["transfer_p90_s"] is None and dis["transfer_p90_s"] > 0
    assert 0 < dis["prefill_utilisation"] <= 1 and 0 < dis["decode_utilisation"] <= 1
    # the KV transfer is part of the client's TTFT: the xPyD TTFT is above its transfer time
    assert dis["ttft_p50_s"] > dis["transfer_p90_s"] * 0.5
    html = r.content.decode()
    assert 'id="disagg-table"' in html and "1P2D" in html


def test_no_comparison_without_the_counts(client):
    r = client.get("/replicas/", BASE)
    assert r.status_code == 200 and r.context["disaggregated"] is None
    assert 'id="disagg-table"' not in r.content.decode()


@pytest.mark.parametrize("extra,field", [
    ({"prefill_instances": "1"}, "decode_instances"),
    ({"decode_instances": "2"}, "prefill_instances"),
    ({"prefill_instances": "0", "decode_instances": "2"}, "prefill_instances"),
    ({"prefill_instances": "1", "decode_instances": "65"}, "decode_instances"),
    ({"prefill_instances": "1", "decode_instances": "2", "link_gbps": "0"}, "link_gbps"),
])
def test_bad_counts_are_errors_on_their_field(client, extra, field):
    r = client.get("/replicas/", {**BASE, **extra})
    assert r.status_code == 200
    assert field_errors(r.content.decode(), field), r.content.decode()[:2000]
