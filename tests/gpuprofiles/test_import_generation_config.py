"""A config.json import takes an optional generation_config.json (page and API): it gives the default sampling;
without it a known model gets its shipped defaults; a bad one is an error on that field and nothing is stored."""

import json

import pytest
from django.urls import reverse
from rest_framework import status

from gpuprofiles.models import ModelProfile

from .factories import MINIMAL_CONFIG, api_client, hf_config

QWEN_GENERATION = {"bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643],
                   "pad_token_id": 151643, "repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20, "top_p": 0.8}


def test_api_import_with_a_generation_config(user):
    r = api_client(user).post(reverse("api-model-import"),
                              {"config": MINIMAL_CONFIG, "generation_config": QWEN_GENERATION}, format="json")
    assert r.status_code == status.HTTP_201_CREATED, r.json()
    assert r.json()["sampling"] == "top_k_top_p_penalties"
    assert r.json()["hf_generation_config"] == QWEN_GENERATION
    profile = ModelProfile.objects.get(slug=r.json()["slug"])
    assert profile.hf_generation_config == QWEN_GENERATION and profile.to_spec().sampling == "top_k_top_p_penalties"


def test_api_import_without_one(user):
    unknown = api_client(user).post(reverse("api-model-import"), {"config": MINIMAL_CONFIG}, format="json")
    assert unknown.status_code == 201 and unknown.json()["sampling"] == ""
    assert unknown.json()["hf_generation_config"] is None
    # a known checkpoint (its config's _name_or_path) gets the shipped defaults
    mixtral = api_client(user).post(reverse("api-model-import"),
                                    {"config": hf_config("mistralai--Mixtral-8x7B-v0.1_config.json"),
                                     "name": "Mixtral 8x7B"}, format="json")
    assert mixtral.status_code == 201 and mixtral.json()["sampling"] == "temperature"


def test_the_given_file_wins_over_the_shipped_defaults(user):
    r = api_client(user).post(reverse("api-model-import"),
                              {"config": MINIMAL_CONFIG, "name": "Qwen2.5 7B", "generation_config": {"temperature": 0}},
                              format="json")
    assert r.status_code == 201 and r.json()["sampling"] == "greedy"


@pytest.mark.parametrize("generation_config, message", [
    ([0.7, 20], "must be a JSON object (generation_config.json)"),
    ("temperature 0.7", "must be a JSON object (generation_config.json)"),
    ({"top_p": "high"}, "generation_config.top_p: must be a number, got 'high'"),
    ({"temperature": -1}, "generation_config.temperature: must be 0 or more, got -1"),
])
def test_api_refuses_a_bad_one_on_its_field(user, generation_config, message):
    r = api_client(user).post(reverse("api-model-import"),
                              {"config": MINIMAL_CONFIG, "generation_config": generation_config}, format="json")
    assert r.status_code == status.HTTP_400_BAD_REQUEST
    assert r.json()["errors"] == {"generation_config": [message]}
    assert not ModelProfile.objects.filter(owner=user).exists()


def test_api_caps_the_body_with_it(user):
    r = api_client(user).post(reverse("api-model-import"),
                              {"config": MINIMAL_CONFIG, "generation_config": {"pad": "x" * 2**20}}, format="json")
    assert r.status_code == 400 and "limited to 262,144 bytes (256 KiB)" in r.json()["errors"]["config"][0]


def test_page_import_with_a_pasted_one(client, user):
    client.force_login(user)
    r = client.post(reverse("gpuprofiles:model-import"),
                    {"config_text": json.dumps(MINIMAL_CONFIG), "generation_config": json.dumps(QWEN_GENERATION)})
    assert r.status_code == 302
    profile = ModelProfile.objects.get(owner=user)
    assert profile.sampling == "top_k_top_p_penalties" and profile.hf_generation_config == QWEN_GENERATION


def test_page_import_without_one(client, user):
    client.force_login(user)
    r = client.post(reverse("gpuprofiles:model-import"), {"config_text": json.dumps(MINIMAL_CONFIG)})
    assert r.status_code == 302
    profile = ModelProfile.objects.get(owner=user)
    assert profile.sampling == "" and profile.hf_generation_config is None


def test_page_offers_the_second_textarea(client, user):
    client.force_login(user)
    html = client.get(reverse("gpuprofiles:model-import")).content.decode()
    assert "generation_config.json (optional)" in html and 'name="generation_config"' in html


@pytest.mark.parametrize("text, message", [
    ("{not json", "Not valid JSON"),
    ("[0.7]", "generation_config.json must hold a JSON object ({...}), not a list."),
    (json.dumps({"top_p": "high"}), "generation_config.top_p: must be a number, got &#x27;high&#x27;"),
    ("{" + " " * (2**20 + 10) + "}", "The text is larger than the limit of 262,144 bytes (256 KiB)."),
])
def test_page_shows_a_bad_one_at_its_field(client, user, text, message):
    client.force_login(user)
    r = client.post(reverse("gpuprofiles:model-import"),
                    {"config_text": json.dumps(MINIMAL_CONFIG), "generation_config": text})
    assert r.status_code == 200
    form = r.context["form"]
    assert list(form.errors) == ["generation_config"]
    assert message.replace("&#x27;", "'") in form.errors["generation_config"][0]
    assert message in r.content.decode()
    assert not ModelProfile.objects.filter(owner=user).exists()
