"""The sizing page with a failed start-up log, quantized weights, LoRA and a chosen vLLM version (issue 18)."""

from __future__ import annotations

import re

import pytest

from tests.planner.test_sizing_page import field_errors, summary

pytestmark = pytest.mark.django_db

FAILED_LOG = """INFO 03-01 10:00:00 [gpu_model_runner.py:1] Model loading took 14.99 GiB
INFO 03-01 10:00:05 [gpu_worker.py:2] Available KV cache memory: -2.31 GiB
"""


def cell(html: str, cell_id: str) -> str:
    m = re.search(rf'id="{cell_id}">(.*?)</td>', html, re.S)
    return m.group(1).strip() if m else ""


def test_pasted_log_with_negative_kv_memory_says_does_not_fit_and_by_how_much(client):
    r = client.get("/", {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "vllm_log": FAILED_LOG})
    assert r.status_code == 200
    html = r.content.decode()
    assert "does not fit" in summary(html) and "short by 2.31 GiB" in summary(html)
    assert cell(html, "kv-shortfall") == "2.31 GiB"
    assert any("short by 2.31 GiB" in m for m in field_errors(html, "gpu_memory_utilization"))


def test_quantized_checkpoint_shows_its_format_and_keeps_a_bf16_kv_cache(client):
    html = client.get("/", {"model": "qwen3-8b-awq", "gpu": "h100-sxm5-80gb", "max_model_len": "32768"}
                      ).content.decode()
    assert cell(html, "quantization") == "awq w4a16, group 128"
    assert "KV cache stays fp16" in html


def test_lora_slots_and_vllm_rule_are_in_the_breakdown(client):
    html = client.get("/", {"model": "qwen3-8b", "gpu": "h100-sxm5-80gb", "max_model_len": "32768",
                            "max_loras": "4", "max_lora_rank": "64", "vllm_version": "0.10.1"}).content.decode()
    assert cell(html, "lora-gib").endswith("GiB") and float(cell(html, "lora-gib").split()[0]) > 0.3
    assert cell(html, "vllm-rule").startswith("vLLM 0.10.1 rules")


@pytest.mark.parametrize(("query", "field", "fragment"), [
    ({"vllm_version": "latest"}, "vllm_version", "Give a version such as"),
    ({"quantization": "hqq"}, "quantization", "is not a quantization method the planner knows"),
])
def test_bad_values_are_named_at_their_field(client, query, field, fragment):
    html = client.get("/", {"model": "qwen3-8b", "gpu": "h100-sxm5-80gb", **query}).content.decode()
    assert any(fragment in m for m in field_errors(html, field)), field_errors(html, field)
