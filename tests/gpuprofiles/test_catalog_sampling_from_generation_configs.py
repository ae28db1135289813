"""The catalog's default sampling comes from the shipped generation_config.json fields; migration 0005 fills
catalog rows and leaves users' rows blank."""

import importlib

from django.apps import apps

from gpuprofiles.models import ModelProfile

from .factories import make_model

MIGRATION_0005 = importlib.import_module("gpuprofiles.migrations.0005_modelprofile_sampling")


def test_catalog_rows_carry_their_generation_config_path(db):
    assert ModelProfile.objects.get(slug="mixtral-8x7b").sampling == "temperature"  # the file sets no fields
    assert ModelProfile.objects.get(slug="qwen2-5-7b").sampling == "top_k_top_p_penalties"
    assert ModelProfile.objects.get(slug="gemma-4-26b-a4b").sampling == ""  # not known: no shipped entry


def test_the_path_reaches_the_spec(db):
    assert ModelProfile.objects.get(slug="qwen2-5-7b").to_spec().sampling == "top_k_top_p_penalties"
    assert ModelProfile.objects.get(slug="gemma-4-26b-a4b").to_spec().sampling is None


def test_migration_0005_fills_catalog_rows_and_leaves_private_rows_blank(user):
    ModelProfile.objects.filter(is_catalog=True).update(sampling="")  # as the column was just added
    own = make_model(user, name="Qwen2.5 7B", hf_id="Qwen/Qwen2.5-7B-Instruct")  # a known name, still private
    MIGRATION_0005.load(apps, None)
    assert ModelProfile.objects.get(slug="mixtral-8x7b").sampling == "temperature"
    assert ModelProfile.objects.get(slug="qwen2-5-7b").sampling == "top_k_top_p_penalties"
    assert ModelProfile.objects.get(slug="gemma-4-26b-a4b").sampling == ""
    own.refresh_from_db()
    assert own.sampling == ""
