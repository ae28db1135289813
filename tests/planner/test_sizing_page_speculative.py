"""The sizing page with speculative decoding: the drafter's memory is shown and comes out of the KV cache."""

from __future__ import annotations

import re

import pytest

from tests.planner.test_sizing_page import field_errors

pytestmark = pytest.mark.django_db

Q = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "max_model_len": "8192"}


def cell(html: str, id_: str) -> str:
    m = re.search(rf'id="{id_}">(.*?)</td>', html, re.S)
    return m.group(1) if m else ""


def test_eagle_head_shown_and_taken_out(client):
    plain = client.get("/", Q).context["outcome"].result
    r = client.get("/", {**Q, "speculative_method": "eagle", "num_speculative_tokens": "3"})
    html = r.content.decode()
    res = r.context["outcome"].result
    assert res.speculative["num_gpu_blocks_without_draft"] == plain.num_gpu_blocks > res.num_gpu_blocks
    assert cell(html, "draft-gib") == "0.47 GiB"
    assert cell(html, "draft-kv") == "4,096 bytes"
    assert cell(html, "draft-blocks").startswith(f"{plain.num_gpu_blocks:,} blocks (k = 3; 3 lookahead")


def test_off_shows_nothing(client):
    html = client.get("/", {**Q, "speculative_method": "eagle", "num_speculative_tokens": "0"}).content.decode()
    assert 'id="draft-gib"' not in html


@pytest.mark.parametrize("extra, field", [
    ({"speculative_method": "eagle", "num_speculative_tokens": "99"}, "num_speculative_tokens"),
    ({"speculative_method": "draft_model", "num_speculative_tokens": "3"}, "draft_model"),
    ({"speculative_method": "draft_model", "num_speculative_tokens": "3", "draft_model": "llama-3-1-70b"},
     "draft_model"),
])
def test_bad_input_at_the_field(client, extra, field):
    r = client.get("/", {**Q, **extra})
    assert r.status_code == 200
    assert field_errors(r.content.decode(), field), field
