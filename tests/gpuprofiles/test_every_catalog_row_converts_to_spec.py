"""Every catalog row converts to a simulator spec, and KV bytes per token match models.csv."""

import pytest

from gpuprofiles.models import GpuProfile, ModelProfile
from simulator.base.specs import GpuSpec, ModelSpec
from simulator.sizing.closed_form import kv_bytes_per_token

# models.csv columns kv_bytes_per_token_bf16_all_attn_layers, kv_bytes_per_token_bf16_global_layers_only and
# kv_bytes_per_token_fp8_full, copied per row (slug: (bf16 all attention layers, bf16 global only, fp8)).
KV_BYTES_FROM_MODELS_CSV = {
    "gpt-2-small": (36864, 36864, 18432),
    "llama-2-7b": (524288, 524288, 262144),
    "llama-2-13b": (819200, 819200, 409600),
    "llama-2-70b": (327680, 327680, 163840),
    "llama-3-1-8b": (131072, 131072, 65536),
    "llama-3-1-70b": (327680, 327680, 163840),
    "llama-3-1-405b": (516096, 516096, 258048),
    "llama-3-2-1b": (32768, 32768, 16384),
    "llama-3-2-3b": (114688, 114688, 57344),
    "mistral-7b-v0-3": (131072, 131072, 65536),
    "mixtral-8x7b": (131072, 131072, 65536),
    "mixtral-8x22b": (229376, 229376, 114688),
    "qwen2-5-7b": (57344, 57344, 28672),
    "qwen2-5-14b": (196608, 196608, 98304),
    "qwen2-5-32b": (262144, 262144, 131072),
    "qwen2-5-72b": (327680, 327680, 163840),
    "qwen3-8b": (147456, 147456, 73728),
    "qwen3-32b": (262144, 262144, 131072),
    "qwen3-30b-a3b": (98304, 98304, 49152),
    "qwen3-235b-a22b": (192512, 192512, 96256),
    "deepseek-v3": (70272, 70272, 35136),
    "deepseek-r1": (70272, 70272, 35136),
    "gemma-2-9b": (344064, 172032, 172032),
    "gemma-2-27b": (376832, 188416, 188416),
    "gemma-3-27b": (507904, 81920, 253952),
    "phi-3-mini-4k": (393216, 393216, 196608),
    "gpt-oss-20b": (49152, 24576, 24576),
    "gpt-oss-120b": (73728, 36864, 36864),
    "qwen3-next-80b-a3b": (24576, 24576, 12288),
    "jamba-v0-1": (16384, 16384, 8192),
}


def test_the_table_covers_every_models_csv_row(db):
    csv_slugs = set(ModelProfile.objects.filter(is_catalog=True).exclude(source_row={})
                    .values_list("slug", flat=True))
    assert csv_slugs == set(KV_BYTES_FROM_MODELS_CSV)


def test_every_model_row_converts(db):
    for profile in ModelProfile.objects.all():
        spec = profile.to_spec()
        assert isinstance(spec, ModelSpec) and spec.name == profile.name
        assert spec.num_parameters and spec.max_position_embeddings, profile.slug


def test_every_gpu_row_converts(db):
    for profile in GpuProfile.objects.all():
        spec = profile.to_spec()
        assert isinstance(spec, GpuSpec) and spec.memory_gib > 0, profile.slug


@pytest.mark.parametrize("slug", sorted(KV_BYTES_FROM_MODELS_CSV))
def test_kv_bytes_per_token_match_models_csv(db, slug):
    bf16_all, bf16_global, fp8 = KV_BYTES_FROM_MODELS_CSV[slug]
    profile = ModelProfile.objects.get(slug=slug)
    spec = profile.to_spec()
    assert kv_bytes_per_token(spec, "bf16") == bf16_all
    full_layers = [lay for lay in spec.layer_specs if lay.kind == "full"]
    assert kv_bytes_per_token(spec, "bf16", layers=full_layers) == bf16_global
    assert kv_bytes_per_token(spec, "fp8") == fp8
    # The source's figures are stored on the row too.
    assert (profile.kv_bytes_per_token_bf16, profile.kv_bytes_per_token_bf16_global,
            profile.kv_bytes_per_token_fp8) == (bf16_all, bf16_global, fp8)


@pytest.mark.parametrize("slug", ["llama-3-1-8b", "llama-2-70b", "qwen2-5-72b", "mixtral-8x22b"])
def test_dense_kv_formula_by_hand(db, slug):
    p = ModelProfile.objects.get(slug=slug)
    assert kv_bytes_per_token(p.to_spec(), "bf16") == 2 * p.num_layers * p.num_kv_heads * p.head_dim * 2


def test_layer_patterns_follow_the_csv(db):
    # models.csv n_full_attention_layers / n_sliding_window_layers / n_linear_or_ssm_layers.
    expected = {"gemma-2-9b": (21, 21, 0), "gemma-3-27b": (10, 52, 0), "gpt-oss-20b": (12, 12, 0),
                "gpt-oss-120b": (18, 18, 0), "qwen3-next-80b-a3b": (12, 0, 36), "jamba-v0-1": (4, 0, 28),
                "deepseek-v3": (61, 0, 0), "phi-3-mini-4k": (32, 0, 0)}
    for slug, counts in expected.items():
        p = ModelProfile.objects.get(slug=slug)
        assert (p.num_full_layers, p.num_sliding_layers, p.num_linear_layers) == counts, slug
