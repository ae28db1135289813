"""Messy catalog cells parse into a number, an unverified flag and the verbatim text (no database)."""

import pytest

from gpuprofiles.catalog import lowest_price, parse_cell, slug_for


@pytest.mark.parametrize("text, value, unverified", [
    ("~835 (unverified)", 835.0, True),
    ("79.18-79.25 (vLLM/torch total; R12, R36-R44)", 79.18, False),  # a range gives its lower bound
    ("350-400 (configurable)", 350.0, False),
    ("500-560 (unverified)", 500.0, True),
    ("1.555 (datasheet; unverified here)", 1.555, True),
    ("49140 (weak: test fixture)", 49140.0, True),
    ("~39.4 GiB (inferred from vLLM budget, R34)", 39.4, True),
    ("0.936 (memory)", 0.936, True),
    ("7.7 (AIC yaml) / 8.0 (NVIDIA)", 7.7, False),
    ("125 (datasheet; 250 with sparsity)", 125.0, False),
    ("989", 989.0, False),
    ("", None, False),
    ("n/a (no FP8)", None, False),
    ("not published by AWS", None, False),
    ("no BF16 (FP16 65 TFLOPS mixed precision)", None, False),
])
def test_cells(text, value, unverified):
    cell = parse_cell(text)
    assert (cell.value, cell.unverified, cell.text) == (value, unverified, text)


def test_lowest_listed_price_is_the_rule():
    # gpus.csv, A100 SXM4 80GB price cell (Modal $2.4984; RunPod $2.45)
    text = ("Modal A100-80GB $2.4984 (techbytes.app GPU cloud pricing roundup (May 2026, quoting provider list "
            "prices)); RunPod A100 SXM $2.45 (deploybase RunPod on-demand listing (Mar 2026; third-party aggregator))")
    assert lowest_price(text) == 2.45
    assert lowest_price("$2.00-2.25/h (awesomeagents roundup, 2026)") == 2.00
    assert lowest_price("") is None


def test_slugs_keep_version_dots_apart():
    assert slug_for("Llama 3.1 70B") == "llama-3-1-70b"
    assert slug_for("B200 (HGX, 180GB)") == "b200"
