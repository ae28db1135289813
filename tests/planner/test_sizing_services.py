"""Sizing services and figure builders, without the database or a request."""

from __future__ import annotations

import json

import pytest

from planner.sizing import figures, services
from simulator.base.specs import GpuSpec, ModelSpec
from simulator.sizing.closed_form import paged_vs_naive

LLAMA_8B = ModelSpec(name="Llama 3.1 8B", num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8,
                     vocab_size=128256, intermediate_size=14336, max_position_embeddings=131072,
                     num_parameters=8030261248)
LLAMA_70B = ModelSpec(name="Llama 3.1 70B", num_layers=80, hidden_size=8192, num_attention_heads=64,
                      num_kv_heads=8, vocab_size=128256, intermediate_size=28672, max_position_embeddings=131072,
                      num_parameters=70553706496)
H100 = GpuSpec(name="H100 SXM5 80GB", memory_gib=79.18, price_per_hour=3.78)
A100 = GpuSpec(name="A100 SXM4 80GB", memory_gib=79.15)


def plan(model=LLAMA_8B, gpu=H100, **knobs):
    return services.plan_deployment(model=model, gpu=gpu, knobs=knobs)


def test_seed_001_llama_70b_kv_bytes_per_token():
    """Seed 001: KV per token = 2 x 80 x 8 x 128 x 2 = 327,680 bytes; 32K tokens = 10.24 GB (decimal)."""
    o = plan(LLAMA_70B, tensor_parallel_size=4, max_model_len=32768)
    assert o.result.kv_bytes_per_token == 327_680
    assert o.result.kv_bytes_per_request == 327_680 * 32768  # 10.74e9 bytes; the seed rounds 320 KB x 32K
    assert o.summary.startswith("Llama 3.1 70B on 4x H100 SXM5 80GB at TP 4: ")
    assert o.summary.endswith("requests of 32K tokens at once.")


def test_seed_001_fragmentation_example():
    """Seed 001: requests of 1K, 2K, 1K with 32K pre-allocated each: 96K reserved, 4K used, 96% waste."""
    frag = paged_vs_naive([1024, 2048, 1024], num_blocks=96 * 1024 // 16, block_size=16, max_model_len=32768)
    assert frag.naive_requests == 3
    assert 1 - frag.naive_utilization == pytest.approx(0.958, abs=0.001)  # "Waste: 96%!"
    assert frag.paged_requests == 72  # the same 96K tokens hold 24 x (1K + 2K + 1K) paged
    fig = figures.build_fragmentation_figure(frag, max_model_len=32768, lengths="1K, 2K, 1K")
    assert fig["data"][0]["y"] == [3, 72]
    assert "24.0x" in fig["layout"]["title"]["text"]
    assert "requests" in fig["layout"]["yaxis"]["title"]["text"]


def test_fragmentation_service_const_lengths():
    o = plan(max_model_len=32768)
    frag = services.fragmentation(o, lengths="const:1024")
    usable = o.result.num_gpu_blocks - 1
    assert frag.naive_requests == usable * 16 // 32768
    assert frag.paged_requests == usable // 64
    assert frag.paged_gain == pytest.approx(frag.paged_requests / frag.naive_requests)
    assert frag.paged_gain > 30  # 32x fewer slots per request, less the floors


@pytest.mark.parametrize("text", ["empirical:/etc/passwd", "nope:1", "normal:1", "uniform:5,1"])
def test_fragmentation_bad_lengths_are_field_errors(text):
    with pytest.raises(services.PlanInputError) as exc:
        services.fragmentation(plan(), lengths=text)
    assert list(exc.value.errors) == ["lengths"]


@pytest.mark.parametrize(
    ("knobs", "field"),
    [
        ({"tensor_parallel_size": 3}, "tensor_parallel_size"),
        ({"pipeline_parallel_size": 100}, "pipeline_parallel_size"),
        ({"max_model_len": 131073}, "max_model_len"),
        ({"num_gpus": 3, "tensor_parallel_size": 2}, "num_gpus"),
        ({"weights_gib": 80}, "weights_gib"),
        ({"vllm_log": "no figures here"}, "vllm_log"),
        ({"kv_cache_dtype": "fp7"}, "kv_cache_dtype"),
    ],
)
def test_input_errors_name_the_field(knobs, field):
    with pytest.raises(services.PlanInputError) as exc:
        plan(**knobs)
    assert field in exc.value.errors


def test_not_fitting_is_an_outcome_with_a_field_error():
    o = plan(LLAMA_70B)
    assert not o.fits and list(o.field_errors) == ["model"]
    o = plan(gpu_memory_utilization=0.2)
    assert list(o.field_errors) == ["gpu_memory_utilization"]
    o = plan(gpu_memory_utilization=0.25)
    assert list(o.field_errors) == ["max_model_len"]


def test_typed_calibration_wins_over_the_log():
    o = plan(vllm_log="Model loading took 15.5 GiB\nAvailable KV cache memory: 20.0 GiB", available_kv_gib=19.25)
    assert o.deployment.weights_gib == 15.5 and o.deployment.available_kv_gib == 19.25
    assert o.result.num_gpu_blocks == int(19.25 * 2**30 // (2 * 2**20))


def test_concurrency_curve_matches_the_plan_at_max_model_len():
    o = plan(max_model_len=32768)
    curve = services.concurrency_curve(o)
    xs, ys = curve["context_tokens"], curve["max_concurrency"]
    assert xs == sorted(xs) and xs[-1] == 131072 and 32768 in xs
    assert ys[xs.index(32768)] == pytest.approx(o.result.max_concurrency)
    assert all(a >= b for a, b in zip(ys, ys[1:]))  # more tokens per request, fewer requests


def test_memory_segments_add_up_to_the_gpu():
    o = plan()
    segs = dict(services.memory_segments(o))
    assert list(segs) == ["Weights", "Activation", "Overhead", "KV cache", "Free"]
    assert sum(segs.values()) == pytest.approx(79.18)


def test_memory_figure():
    fig = figures.build_memory_figure(plan())
    # the legend says each part's size: "Weights (14.99 GiB)"
    assert [t["name"].split(" (")[0] for t in fig["data"]] == ["Weights", "Activation", "Overhead", "KV cache",
                                                               "Free"]
    assert all(t["name"].endswith(" GiB)") for t in fig["data"])
    assert fig["layout"]["barmode"] == "stack"
    assert fig["layout"]["xaxis"]["title"]["text"] == "Memory per GPU (GiB)"
    assert all("GiB" in t["hovertemplate"] for t in fig["data"])
    assert fig["layout"]["height"] <= 420
    json.dumps(fig)  # JSON-safe


def test_concurrency_figure():
    o = plan(max_model_len=32768)
    fig = figures.build_concurrency_figure(services.concurrency_curve(o))
    assert fig["layout"]["xaxis"]["type"] == "log"
    assert "tokens" in fig["layout"]["xaxis"]["title"]["text"]
    assert "requests" in fig["layout"]["yaxis"]["title"]["text"]
    assert fig["data"][1]["x"] == [32768]
    assert "requests" in fig["data"][0]["hovertemplate"]


def test_compare_figure_with_prices_and_a_failing_gpu():
    rows = services.compare_gpus(model=LLAMA_8B, gpus=[H100, A100, GpuSpec(name="Tiny", memory_gib=8)],
                                 knobs={"max_model_len": 8192})
    assert [r.outcome is not None for r in rows] == [True, True, True]
    assert rows[2].outcome.fits is False
    fig = figures.build_compare_figure(rows)
    bars, price = fig["data"]
    # horizontal bars: one row per deployment, in the table's order
    assert bars["y"] == ["1x H100 SXM5 80GB", "1x A100 SXM4 80GB", "1x Tiny"] and bars["orientation"] == "h"
    # where the model does not fit: no bar, no price, the words instead
    assert bars["x"][2] is None and bars["x"][0] > 0 and bars["x"][1] > 0
    assert price["x"] == [3.78, None, None]
    # (the first two annotations are the panel titles; then the words on both panels, and "no price")
    notes = [(a["y"], a.get("yref"), a["text"]) for a in fig["layout"]["annotations"][2:]]
    assert notes == [("1x Tiny", "y", "does not fit"), ("1x Tiny", "y2", "does not fit"),
                     ("1x A100 SXM4 80GB", "y2", "no price")]
    assert fig["layout"]["xaxis"]["title"]["text"] == "tokens"  # under the panel titled "KV cache"
    assert fig["layout"]["xaxis2"]["title"]["text"] == "USD per hour"  # under "Price"


def test_short_tokens():
    assert services.short_tokens(131072) == "128K"
    assert services.short_tokens(1 << 20) == "1M"
    assert services.short_tokens(16000) == "16,000"
