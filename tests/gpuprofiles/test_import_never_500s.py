"""Whatever JSON a client sends as a config or a generation_config, the import answers 201 or 400, never a 500."""

from django.urls import reverse
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from .factories import MINIMAL_CONFIG, api_client, make_user

KEYS = [*MINIMAL_CONFIG, "head_dim", "kv_lora_rank", "qk_rope_head_dim", "num_local_experts", "num_experts_per_tok",
        "layer_types", "sliding_window", "quantization_config", "text_config", "tie_word_embeddings",
        "moe_intermediate_size", "mlp_only_layers", "decoder_sparse_step", "rope_scaling"]
JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 10**7) | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(max_size=12), lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.text(max_size=8), kids, max_size=3), max_leaves=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(st.sampled_from(KEYS), JSON, max_size=4))
@example(changes={"sliding_window": 9.223372036854776e18})  # once a 500: 2**63 does not fit a database integer
def test_random_configs_get_201_or_400(db, changes):
    client = api_client(make_user())
    r = client.post(reverse("api-model-import"), {"config": {**MINIMAL_CONFIG, **changes}}, format="json")
    assert r.status_code in (201, 400), r.content
    if r.status_code == 400:
        assert r.json()["errors"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(generation_config=st.dictionaries(st.sampled_from(["temperature", "top_k", "top_p", "min_p",
                                                          "repetition_penalty", "do_sample", "eos_token_id"]),
                                         JSON, max_size=4) | JSON)
def test_random_generation_configs_get_201_or_400(db, generation_config):
    client = api_client(make_user())
    r = client.post(reverse("api-model-import"), {"config": MINIMAL_CONFIG, "generation_config": generation_config},
                    format="json")
    assert r.status_code in (201, 400), r.content
    if r.status_code == 400:
        # on the field, or on a path inside it (the parser's "generation_config.temperature" for a NUL)
        assert all(k.split(".")[0] == "generation_config" for k in r.json()["errors"]), r.json()
