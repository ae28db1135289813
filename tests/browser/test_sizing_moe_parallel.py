"""Sizing an MoE model under data parallelism with expert parallelism, in the browser (docs/moe_parallelism.md)."""

from __future__ import annotations

import re

from playwright.sync_api import expect


def test_data_parallel_with_expert_parallel_from_more_options(page):
    page.goto("/?model=deepseek-v3&gpu=h200-sxm-141gb&max_model_len=32768")
    page.locator("#more-options > summary").click()
    page.get_by_label("Data parallel size (DP)").fill("8")
    page.get_by_label("Expert parallelism (EP)").check()
    page.get_by_label("Tensor parallel size (TP)").fill("1")
    page.locator("form[aria-labelledby=form-h] button[type=submit]").first.click()
    expect(page.locator("#summary")).to_contain_text("DeepSeek-V3 on 8x H200 SXM 141GB at DP 8 + EP 8: ")
    expect(page.locator("#shape-comparison")).to_have_text(
        re.compile(r"^DP 8 \+ EP 8 holds \d+\.\dx the KV tokens of TP 8 for DeepSeek-V3 on 8 x H200 SXM 141GB"))
    expect(page.locator("#kpi-kv-tokens + .unit")).to_contain_text("8 DP ranks of")
    # the field stays set after the answer: "More options" opens by itself and names it
    expect(page.locator("#more-options-state")).to_contain_text("Data parallel size (DP)")
