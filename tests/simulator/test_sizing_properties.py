"""Property tests (Hypothesis): monotonicity of the sizing engine."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.base.specs import DeploymentSpec, GpuSpec, ModelSpec
from simulator.sizing.closed_form import blocks_for_tokens, kv_bytes_per_token, last_block_waste, plan

KV_HEADS = st.sampled_from([1, 2, 4, 8, 16, 32])


@st.composite
def models(draw):
    kv = draw(KV_HEADS)
    heads = kv * draw(st.sampled_from([1, 2, 4, 8]))
    head_dim = draw(st.sampled_from([64, 128, 256]))
    return ModelSpec(name="m", num_layers=draw(st.integers(1, 96)), hidden_size=heads * head_dim,
                     num_attention_heads=heads, num_kv_heads=kv, head_dim=head_dim,
                     vocab_size=draw(st.integers(1000, 260000)), intermediate_size=draw(st.integers(256, 60000)),
                     max_position_embeddings=131072)


knobs = st.fixed_dictionaries({
    "block_size": st.sampled_from([16, 32, 64, 128]),
    "max_model_len": st.integers(1, 131072),
    "kv_cache_dtype": st.sampled_from(["auto", "fp16", "fp8", "int4", "fp32"]),
})


@settings(max_examples=60, deadline=None)
@given(models(), knobs, st.floats(0.1, 300), st.floats(0.0, 300))
def test_more_kv_memory_never_fewer_blocks(model, kw, a, extra):
    gpu = GpuSpec(name="g", memory_gib=80)
    lo = plan(model, gpu, DeploymentSpec(**kw, available_kv_gib=a))
    hi = plan(model, gpu, DeploymentSpec(**kw, available_kv_gib=a + extra))
    assert hi.num_gpu_blocks >= lo.num_gpu_blocks
    assert hi.kv_cache_tokens >= lo.kv_cache_tokens
    assert hi.max_concurrency >= lo.max_concurrency


@settings(max_examples=60, deadline=None)
@given(models(), knobs, st.floats(10, 200), st.floats(0.0, 100), st.floats(0.05, 1.0), st.floats(0.0, 1.0),
       st.sampled_from([2048, 8192]), st.sampled_from([256, 1024]))
def test_bigger_gpu_or_higher_utilization_never_fewer_blocks(model, kw, mem, extra, u, du, mnbt, seqs):
    # at fixed batch limits: vLLM's defaults grow with the GPU (next test)
    dep = DeploymentSpec(**kw, gpu_memory_utilization=u, max_num_batched_tokens=mnbt, max_num_seqs=seqs)
    a = plan(model, GpuSpec(name="g", memory_gib=mem), dep)
    b = plan(model, GpuSpec(name="g", memory_gib=mem + extra), dep)
    c = plan(model, GpuSpec(name="g", memory_gib=mem), dep.with_(gpu_memory_utilization=min(1.0, u + du)))
    assert b.num_gpu_blocks >= a.num_gpu_blocks
    assert c.num_gpu_blocks >= a.num_gpu_blocks


def test_vllm_default_batch_limits_step_up_at_70_gib_and_can_cost_blocks():
    """vLLM's serving defaults are 8,192 tokens / 1,024 sequences on GPUs of 70 GiB or more (not A100),
    2,048 / 256 below: their larger activation reserve can leave a 70 GiB GPU fewer KV blocks than a
    69 GiB one (the case Hypothesis found for a 1-layer model with a wide MLP)."""
    model = ModelSpec(name="m", num_layers=1, hidden_size=64, num_attention_heads=1, num_kv_heads=1, head_dim=64,
                      vocab_size=1000, intermediate_size=14500, max_position_embeddings=131072)
    dep = DeploymentSpec(block_size=16, max_model_len=1, gpu_memory_utilization=0.5)
    small, big = (plan(model, GpuSpec(name="g", memory_gib=m), dep) for m in (69.0, 70.0))
    assert (small.max_num_batched_tokens, small.max_num_seqs) == (2048, 256)
    assert (big.max_num_batched_tokens, big.max_num_seqs) == (8192, 1024)
    assert big.num_gpu_blocks < small.num_gpu_blocks
    pinned = dep.with_(max_num_batched_tokens=2048, max_num_seqs=256)
    assert plan(model, GpuSpec(name="g", memory_gib=70.0), pinned).num_gpu_blocks > small.num_gpu_blocks


@settings(max_examples=60, deadline=None)
@given(models(), st.sampled_from([1, 2, 4, 8, 16, 32, 64]), st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
def test_higher_tp_never_more_kv_per_gpu(model, tp1, tp2):
    lo, hi = sorted((tp1, tp2))
    for tp in (lo, hi):
        if model.num_attention_heads % tp:
            return
    a = kv_bytes_per_token(model, "bf16", lo, per_gpu=True)
    b = kv_bytes_per_token(model, "bf16", hi, per_gpu=True)
    assert b <= a
    assert b >= kv_bytes_per_token(model, "bf16") / hi  # never below an even split


@settings(max_examples=60, deadline=None)
@given(models(), knobs, st.floats(1, 200))
def test_longer_context_never_more_concurrency_and_smaller_kv_dtype_never_fewer_tokens(model, kw, a):
    gpu = GpuSpec(name="g", memory_gib=80)
    base = plan(model, gpu, DeploymentSpec(**kw, available_kv_gib=a))
    longer = plan(model, gpu, DeploymentSpec(**{**kw, "max_model_len": min(131072, kw["max_model_len"] * 2)},
                                             available_kv_gib=a))
    assert longer.max_concurrency <= base.max_concurrency
    assert longer.min_blocks_unservable >= base.min_blocks_unservable
    k16 = plan(model, gpu, DeploymentSpec(**{**kw, "kv_cache_dtype": "fp16"}, available_kv_gib=a))
    k8 = plan(model, gpu, DeploymentSpec(**{**kw, "kv_cache_dtype": "fp8"}, available_kv_gib=a))
    assert k8.kv_cache_tokens >= k16.kv_cache_tokens


@given(st.integers(1, 10**7), st.sampled_from([1, 8, 16, 32, 128]))
def test_blocks_cover_tokens_with_less_than_one_block_waste(tokens, b):
    n = blocks_for_tokens(tokens, b)
    w = last_block_waste(tokens, b)
    assert n * b == tokens + w
    assert 0 <= w < b
