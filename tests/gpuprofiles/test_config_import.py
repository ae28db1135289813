"""A signed-in user imports a config.json (page and API); bad configs get a message naming the field."""

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework import status

from gpuprofiles.models import ModelProfile
from gpuprofiles.services import model_profile_import

from .factories import HF_CONFIGS, MINIMAL_CONFIG, api_client, hf_config

CONFIGS = sorted(p.name for p in HF_CONFIGS.glob("*_config.json") if "hf_quant" not in p.name)


def test_every_shipped_config_is_a_fixture():
    assert len(CONFIGS) == 15


@pytest.mark.parametrize("filename", CONFIGS)
def test_every_shipped_config_imports_through_the_api(user, filename):
    r = api_client(user).post(reverse("api-model-import"), {"config": hf_config(filename)}, format="json")
    assert r.status_code == status.HTTP_201_CREATED, r.json()
    profile = ModelProfile.objects.get(slug=r.json()["slug"])
    assert profile.owner == user and not profile.is_catalog
    assert profile.hf_config == hf_config(filename)
    assert profile.to_spec().num_parameters > 0


def test_families_import_with_their_features(user):
    ds = model_profile_import(owner=user, config=hf_config("deepseek-ai--DeepSeek-V3_config.json"))
    assert (ds.attention, ds.kv_lora_rank, ds.qk_rope_head_dim, ds.quantization) == ("MLA", 512, 64, "fp8")
    gemma = model_profile_import(owner=user, config=hf_config("google--gemma-4-26B-A4B_config.json"))
    assert (gemma.num_full_layers, gemma.num_sliding_layers, gemma.sliding_window) == (5, 25, 1024)
    oss = model_profile_import(owner=user, config=hf_config("openai--gpt-oss-20b_config.json"))
    assert (oss.quantization, oss.num_sliding_layers, oss.sliding_window) == ("mxfp4", 12, 128)
    mix = model_profile_import(owner=user, config=hf_config("mistralai--Mixtral-8x7B-v0.1_config.json"),
                               name="My Mixtral", num_parameters=46_702_792_704)
    assert (mix.name, mix.num_experts, mix.num_parameters) == ("My Mixtral", 8, 46_702_792_704)
    assert re.fullmatch(r"alice-my-mixtral-[0-9a-f]{16}", mix.slug)  # private slugs end in 64 random bits


def test_import_with_a_modelopt_quant_config(user):
    fp8 = model_profile_import(owner=user, config=hf_config("nvidia--Llama-3.1-70B-Instruct-FP8_config.json"),
                               quant_config=hf_config("nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json"))
    assert fp8.quantization == "fp8"


@pytest.mark.parametrize("config, message", [
    ({**MINIMAL_CONFIG, "num_key_value_heads": 3}, "num_key_value_heads: 3 does not divide num_attention_heads 4"),
    ({k: v for k, v in MINIMAL_CONFIG.items() if k != "num_hidden_layers"}, "num_hidden_layers: missing"),
    ({**MINIMAL_CONFIG, "hidden_size": "big"}, "hidden_size: must be a whole number"),
    ({**MINIMAL_CONFIG, "num_local_experts": 8}, "num_experts_per_tok"),
    ({**MINIMAL_CONFIG, "torch_dtype": "float7"}, "torch_dtype"),
    ({**MINIMAL_CONFIG, "layer_types": ["full_attention"]}, "layer_types: 1 entries for num_hidden_layers 2"),
    ([1, 2, 3], "must be a JSON object"),
])
def test_bad_configs_name_the_field_in_the_api(user, config, message):
    r = api_client(user).post(reverse("api-model-import"), {"config": config}, format="json")
    assert r.status_code == status.HTTP_400_BAD_REQUEST
    assert message in r.json()["errors"]["config"][0]


def test_api_import_needs_a_config_and_a_signed_in_user(user):
    r = api_client(user).post(reverse("api-model-import"), {"name": "x"}, format="json")
    assert r.status_code == 400 and "config" in r.json()["errors"]
    r = api_client().post(reverse("api-model-import"), {"config": MINIMAL_CONFIG}, format="json")
    assert r.status_code == status.HTTP_401_UNAUTHORIZED
    r = api_client(user).post(reverse("api-model-import"), {"config": MINIMAL_CONFIG, "num_parameters": 0},
                              format="json")
    assert r.status_code == 400 and "num_parameters" in r.json()["errors"]


def test_page_import_by_paste(client, user):
    client.force_login(user)
    r = client.post(reverse("gpuprofiles:model-import"),
                    {"config_text": json.dumps(MINIMAL_CONFIG), "name": "Tiny", "num_parameters": "12345678"})
    assert r.status_code == 302
    profile = ModelProfile.objects.get(owner=user)
    assert (profile.name, profile.num_parameters, profile.num_layers) == ("Tiny", 12345678, 2)


def test_page_import_by_upload(client, user):
    client.force_login(user)
    upload = SimpleUploadedFile("config.json", (HF_CONFIGS / "Qwen--Qwen3-30B-A3B_config.json").read_bytes(),
                                content_type="application/json")
    r = client.post(reverse("gpuprofiles:model-import"), {"config_file": upload})
    assert r.status_code == 302
    assert ModelProfile.objects.get(owner=user).num_experts == 128


@pytest.mark.parametrize("text, message", [
    ("{not json", "Not valid JSON"),
    ("[1, 2]", "must hold a JSON object"),
    ("", "Paste a config.json or upload one."),
    (json.dumps({**MINIMAL_CONFIG, "num_key_value_heads": 3}), "num_key_value_heads: 3 does not divide"),
])
def test_page_import_errors_show_at_the_field(client, user, text, message):
    client.force_login(user)
    r = client.post(reverse("gpuprofiles:model-import"), {"config_text": text})
    assert r.status_code == 200
    html = r.content.decode()
    assert 'class="errorlist' in html and message in html
    assert not ModelProfile.objects.filter(owner=user).exists()


def test_page_import_refuses_an_upload_over_one_mib(client, user):
    client.force_login(user)
    big = SimpleUploadedFile("config.json", b"{" + b" " * (2**20 + 10) + b"}", content_type="application/json")
    r = client.post(reverse("gpuprofiles:model-import"), {"config_file": big})
    assert r.status_code == 200
    assert "the limit is 262,144 bytes (256 KiB)" in r.content.decode()


def test_import_page_needs_sign_in(client):
    r = client.get(reverse("gpuprofiles:model-import"))
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]


def test_api_import_refuses_a_body_over_one_mib(user):
    config = {**MINIMAL_CONFIG, "padding": "x" * (2**20)}
    r = api_client(user).post(reverse("api-model-import"), {"config": config}, format="json")
    assert r.status_code == 400
    assert "limited to 262,144 bytes (256 KiB)" in r.json()["errors"]["config"][0]


# --- quantized checkpoints (issue 18) ------------------------------------------------------------------


def test_catalog_quantized_checkpoints_keep_dtype_and_quantization_apart(db):
    from gpuprofiles.models import ModelProfile

    awq = ModelProfile.objects.get(slug="qwen3-8b-awq")
    assert awq.weights_dtype == "fp16" and awq.quantization == "awq"
    assert awq.quant_group_size == 128 and awq.quantization_label == "awq w4a16, group 128"
    assert "huggingface.co/Qwen/Qwen3-8B-AWQ" in awq.sources and awq.is_unverified
    w8a8 = ModelProfile.objects.get(slug="llama-3-1-8b-w8a8-redhatai")
    assert w8a8.quantization == "compressed-tensors" and w8a8.quant_scheme == "w8a8-int8"
    assert w8a8.quant_ignore == ["lm_head"]
    spec = w8a8.to_spec()
    assert spec.quant_scheme == "w8a8-int8" and spec.quant_ignore == ("lm_head",)
    plain = ModelProfile.objects.get(slug="qwen3-8b")
    assert plain.quantization == "" and plain.quantization_label == "none (bf16)"


@pytest.mark.parametrize("qc, message", [
    ({"quant_method": "exl9"}, "quantization_config.quant_method: 'exl9' is not a quantization method"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 48}, "quantization_config.group_size: 48 does not divide"),
])
def test_bad_quantization_configs_name_the_key_in_the_api(user, qc, message):
    config = {**MINIMAL_CONFIG, "quantization_config": qc}
    r = api_client(user).post(reverse("api-model-import"), {"config": config}, format="json")
    assert r.status_code == status.HTTP_400_BAD_REQUEST
    assert message in r.json()["errors"]["config"][0]


def test_import_shows_the_dtype_and_the_quantization_apart(user):
    cfg = {**hf_config("meta-llama--Meta-Llama-3.1-8B_config.json"), "torch_dtype": "float16",
           "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}}
    r = api_client(user).post(reverse("api-model-import"), {"config": cfg}, format="json")
    assert r.status_code == status.HTTP_201_CREATED, r.json()
    d = r.json()
    assert d["weights_dtype"] == "fp16" and d["quantization"] == "gptq"
    assert d["quantization_label"] == "gptq w4a16, group 128" and d["quant_group_size"] == 128
