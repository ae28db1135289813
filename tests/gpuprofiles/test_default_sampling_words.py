"""A model's default sampling is said in words with its reason, on the detail page and by one helper."""

import pytest
from django.urls import reverse

from gpuprofiles.display import MODEL_SAMPLING_CHOICES, default_sampling_words, sampling_fields_text
from gpuprofiles.models import ModelProfile
from gpuprofiles.services import model_profile_import
from planner.sampling_words import SAMPLING_CHOICES
from simulator.base.sampling import PATH_WORDS, SAMPLER_PATHS

from .factories import MINIMAL_CONFIG, make_model


def test_every_path_has_words_and_both_selects_say_the_same():
    assert set(PATH_WORDS) == set(SAMPLER_PATHS)
    assert MODEL_SAMPLING_CHOICES[1:] == SAMPLING_CHOICES[1:] == [(k, PATH_WORDS[k]) for k in SAMPLER_PATHS]


def test_fields_in_the_files_own_keys():
    assert sampling_fields_text({"top_p": 0.9, "temperature": 0.6, "do_sample": True}) == \
        "sets temperature 0.6, top_p 0.9"
    assert sampling_fields_text({"top_k": 20, "repetition_penalty": 1.05}) == "sets top_k 20, repetition_penalty 1.05"
    assert sampling_fields_text({}) == "sets no sampling fields"


def test_catalog_row_with_fields(db):
    words = default_sampling_words(ModelProfile.objects.get(slug="llama-3-1-8b"))
    assert words.startswith("top-k / top-p — its generation_config.json sets temperature 0.6, top_p 0.9 (source: ")
    assert words.endswith("; not verified against the owner's file)")


def test_catalog_row_whose_file_sets_no_fields(db):
    words = default_sampling_words(ModelProfile.objects.get(slug="mixtral-8x7b"))
    assert words.startswith("temperature only — its generation_config.json sets no sampling fields (source: ")
    assert words.endswith("; read from the owner's file)")  # verified: the owner's page was read


def test_blank_is_not_known(db):
    assert default_sampling_words(ModelProfile.objects.get(slug="gemma-4-26b-a4b")) == \
        "not known — timed as top-k / top-p, the planner's default"


def test_own_rows_say_where_it_came_from(user):
    assert default_sampling_words(make_model(user, sampling="greedy")) == "greedy (temperature 0) — set by you"
    imported = model_profile_import(owner=user, config=MINIMAL_CONFIG,
                                    generation_config={"temperature": 0.7, "top_k": 20})
    assert default_sampling_words(imported) == \
        "top-k / top-p — from the generation_config you imported (it sets temperature 0.7, top_k 20)"
    imported.sampling = "temperature"  # then changed on the edit form
    assert default_sampling_words(imported) == "temperature only — set by you"


@pytest.mark.parametrize("slug, words", [
    ("mixtral-8x7b", "temperature only — its generation_config.json sets no sampling fields"),
    ("qwen2-5-7b", "top-k / top-p + repetition penalty — its generation_config.json sets temperature 0.7, "
                   "top_k 20, top_p 0.8, repetition_penalty 1.05"),
    ("gemma-4-26b-a4b", "not known — timed as top-k / top-p, the planner&#x27;s default"),
])
def test_detail_page_shows_it(client, db, slug, words):
    html = client.get(reverse("gpuprofiles:model-detail", args=[slug])).content.decode()
    assert 'id="default-sampling"' in html and words in html


def test_detail_page_of_an_imported_row(client, user):
    client.force_login(user)
    profile = model_profile_import(owner=user, config=MINIMAL_CONFIG, generation_config={"temperature": 0})
    html = client.get(profile.get_absolute_url()).content.decode()
    assert "greedy (temperature 0) — from the generation_config you imported (it sets temperature 0)" in html
    assert "generation_config.json (verbatim)" in html
