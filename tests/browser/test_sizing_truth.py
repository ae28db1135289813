"""The sizing answer never contradicts itself: a sliding-window model's sections agree with its cards."""

from __future__ import annotations

import math

import pytest
from playwright.sync_api import expect


def _slug(name: str) -> str:
    from gpuprofiles.models import GpuProfile, ModelProfile

    model = ModelProfile.objects.filter(name=name).first()
    return model.slug if model else GpuProfile.objects.get(name=name).slug


@pytest.mark.parametrize("kv_dtype", ["auto", "fp8"])
def test_sliding_window_model_fragmentation_agrees_with_the_cards(page, kv_dtype, screenshot):
    """Gemma 3 27B (sliding-window layers) on one H100 at 128K: naive fits floor(concurrency), not 0."""
    page.goto(f"/?model={_slug('Gemma 3 27B')}&gpu={_slug('H100 SXM5 80GB')}&tensor_parallel_size=1"
              f"&kv_cache_dtype={kv_dtype}&max_model_len=131072&lengths=lognormal:2048,1536")
    expect(page.locator("#summary")).to_be_visible()
    concurrency = float(page.locator("#kpi-concurrency").inner_text().replace(",", ""))
    assert concurrency >= 1, "the cards say at least one 128K request fits"
    naive = int(page.locator("#frag-naive").inner_text().replace(",", ""))
    paged = int(page.locator("#frag-paged").inner_text().replace(",", ""))
    assert naive == math.floor(concurrency), (naive, concurrency)
    assert paged >= naive
    page.wait_for_function("document.getElementById('fig-fragmentation') && "
                           "document.getElementById('fig-fragmentation').data !== undefined")
    fig = page.evaluate("() => { const g = document.getElementById('fig-fragmentation');"
                        " return {y: g.data[0].y, title: g.layout.title.text}; }")
    assert fig["y"][:2] == [naive, paged], "the chart draws the section's numbers"
    assert "∞" not in fig["title"] and f"{paged / naive:,.1f}x" in fig["title"]
    screenshot(page, f"sizing-sliding-window-{kv_dtype}")
