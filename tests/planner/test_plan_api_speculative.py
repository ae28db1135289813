"""POST /api/plan/ with speculative decoding: the drafter's weights and KV come out of the budget.

The EAGLE head of Llama-3.1-8B is one decoder layer of the target's shape (plus ``fc``, sharing the
embedding and LM head): 218M + 33.6M parameters, 0.469 GiB in bf16, and 4,096 bytes of KV per token
(1 layer x 2 x 8 KV heads x 128 x 2 bytes) beside the target's 131,072.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from planner.api.sizing import PlanCreateApi
from tests.planner.test_plan_api import LLAMA_8B_CONFIG

pytestmark = pytest.mark.django_db

URL = "/api/plan/"
BASE = {"model": {"config": LLAMA_8B_CONFIG, "num_parameters": 8030261248},
        "gpu": {"memory_gib": 79.65, "name": "H100"}, "max_model_len": 8192}


@pytest.fixture(autouse=True)
def _no_throttle(monkeypatch):
    monkeypatch.setattr(PlanCreateApi, "throttle_classes", [])


def post(body):
    return APIClient().post(URL, body, format="json")


def test_eagle_head_memory_comes_out_of_the_kv_cache():
    plain = post(BASE).json()
    r = post({**BASE, "speculative": {"method": "eagle", "num_speculative_tokens": 3}})
    assert r.status_code == 200, r.json()
    d = r.json()
    sp = d["speculative"]
    assert "speculative" not in plain
    assert sp["num_gpu_blocks_without_draft"] == plain["num_gpu_blocks"]
    assert sp["num_gpu_blocks"] == d["num_gpu_blocks"] < plain["num_gpu_blocks"]
    assert sp["draft_kv_bytes_per_token_per_gpu"] == 4096.0
    assert sp["draft_weights_gib"] == pytest.approx((218_112_000 + 33_554_432) * 2 / 2**30, rel=0.01)
    assert d["bytes_per_block_per_gpu"] == plain["bytes_per_block_per_gpu"] + 16 * 4096
    assert d["memory_gib"]["weights"] == pytest.approx(plain["memory_gib"]["weights"] + sp["draft_weights_gib"])
    # the blocks are what the smaller budget buys at the larger page
    kv_b = (plain["memory_gib"]["kv"] - sp["draft_weights_gib"]) * 2**30
    assert d["num_gpu_blocks"] == int(kv_b // d["bytes_per_block_per_gpu"])


def test_ngram_takes_no_memory_and_k0_is_off():
    plain = post(BASE).json()
    ng = post({**BASE, "speculative": {"method": "ngram", "num_speculative_tokens": 4}}).json()
    assert ng["num_gpu_blocks"] == plain["num_gpu_blocks"]
    assert ng["speculative"]["draft_weights_gib"] == 0 and ng["speculative"]["num_lookahead_tokens"] == 0
    off = post({**BASE, "speculative": {"method": "eagle", "num_speculative_tokens": 0}}).json()
    assert off == plain


def test_draft_model():
    small = dict(LLAMA_8B_CONFIG, hidden_size=2048, num_hidden_layers=16, intermediate_size=8192,
                 num_attention_heads=32, num_key_value_heads=8)
    r = post({**BASE, "speculative": {"method": "draft_model", "num_speculative_tokens": 4,
                                      "draft_model": {"config": small, "name": "Llama 3.2 1B"}}})
    assert r.status_code == 200, r.json()
    sp = r.json()["speculative"]
    assert sp["draft"] == "Llama 3.2 1B"
    assert sp["draft_kv_bytes_per_token_per_gpu"] == 16 * 2 * 8 * 64 * 2
    assert 2.0 < sp["draft_weights_gib"] < 3.0


@pytest.mark.parametrize("spec, field", [
    ({"method": "eagle", "num_speculative_tokens": -1}, "speculative.num_speculative_tokens"),
    ({"method": "eagle", "num_speculative_tokens": 100}, "speculative.num_speculative_tokens"),
    ({"method": "medusa", "num_speculative_tokens": 3}, "speculative.method"),
    ({"method": "draft_model", "num_speculative_tokens": 3}, "speculative.draft_model"),
    ({"method": "eagle", "num_speculative_tokens": 3, "draft_model": {"config": LLAMA_8B_CONFIG}},
     "speculative.draft_model"),
    ({"method": "draft_model", "num_speculative_tokens": 3, "draft_model": {"config": LLAMA_8B_CONFIG}},
     "speculative.draft_model"),
    ({"method": "draft_model", "num_speculative_tokens": 3,
      "draft_model": {"config": dict(LLAMA_8B_CONFIG, num_hidden_layers=2, vocab_size=32000)}},
     "speculative.draft_model"),
    ({"method": "draft_model", "num_speculative_tokens": 3, "draft_model": "no-such-model"},
     "speculative.draft_model"),
    ("eagle", "speculative.non_field_errors"),
])
def test_bad_input_is_a_4xx_naming_the_field(spec, field):
    r = post({**BASE, "speculative": spec})
    assert r.status_code in (400, 404), r.json()
    errors = r.json()["errors"]
    assert field in errors, errors
    assert all(isinstance(m, str) and m for m in errors[field])
