"""Catalog rows are read-only; own profiles are private: seen, copied and changed by their owner only.

Another user's private profile answers exactly like a slug that does not exist (404), on pages and in the
API, so it can be neither read, copied nor detected; private slugs end in 64 random bits.
"""

import importlib
import re

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import AnonymousUser
from django.http import Http404
from django.urls import reverse
from rest_framework import status

from gpuprofiles.models import GpuProfile, ModelProfile
from gpuprofiles.services import profile_copy

from .factories import api_client, make_gpu, make_model


def test_catalog_rows_refuse_writes_from_everyone_in_the_api(user):
    c = api_client(user)
    assert c.patch(reverse("api-gpu-detail", args=["h100-sxm5-80gb"]), {"memory_gib": 1}, format="json"
                   ).status_code == status.HTTP_403_FORBIDDEN
    r = c.delete(reverse("api-model-detail", args=["llama-3-1-8b"]))
    assert r.status_code == 403 and "copy" in r.json()["errors"]["non_field_errors"][0]
    assert GpuProfile.objects.get(slug="h100-sxm5-80gb").memory_gib == 79.18


def test_anonymous_writes_get_401(db):
    c = api_client()
    assert c.post(reverse("api-gpu-list"), {"name": "x", "memory_gib": 10}, format="json").status_code == 401
    assert c.patch(reverse("api-gpu-detail", args=["h100-sxm5-80gb"]), {}, format="json").status_code == 401
    assert c.delete(reverse("api-model-detail", args=["llama-3-1-8b"])).status_code == 401


def test_owner_creates_edits_and_deletes_a_gpu_in_the_api(user):
    c = api_client(user)
    r = c.post(reverse("api-gpu-list"), {"name": "My L40S", "memory_gib": 44.42, "price_per_hour": 1.2},
               format="json")
    assert r.status_code == 201 and r.json()["owner"] == "alice"
    assert re.fullmatch(r"alice-my-l40s-[0-9a-f]{16}", r.json()["slug"])
    slug = r.json()["slug"]
    r = c.patch(reverse("api-gpu-detail", args=[slug]), {"bandwidth_tbps": 0.864}, format="json")
    assert r.status_code == 200 and r.json()["bandwidth_tbps"] == 0.864 and r.json()["memory_gib"] == 44.42
    assert c.delete(reverse("api-gpu-detail", args=[slug])).status_code == 204
    assert not GpuProfile.objects.filter(slug=slug).exists()


def test_gpu_create_needs_memory(user):
    r = api_client(user).post(reverse("api-gpu-list"), {"name": "No memory"}, format="json")
    assert r.status_code == 400 and "memory_gib" in r.json()["errors"]


@pytest.mark.parametrize("kind", ["gpu", "model"])
def test_another_users_private_profile_is_404_in_the_api_like_an_unknown_slug(user, other_user, kind):
    own = make_gpu(user) if kind == "gpu" else make_model(user)
    c = api_client(other_user)
    detail, copy = reverse(f"api-{kind}-detail", args=[own.slug]), reverse(f"api-{kind}-copy", args=[own.slug])
    answers = [c.get(detail), c.patch(detail, {"name": "x"}, format="json"), c.delete(detail), c.post(copy),
               # Bad input from a non-owner is still "not found", not a 400 that would show the row exists.
               c.patch(detail, {"memory_gib": -1, "num_kv_heads": 3}, format="json")]
    assert [r.status_code for r in answers] == [status.HTTP_404_NOT_FOUND] * 5
    unknown = c.get(reverse(f"api-{kind}-detail", args=["no-such-slug"]))
    assert answers[0].json() == unknown.json()
    assert type(own).objects.filter(pk=own.pk, name=own.name).exists()
    assert type(own).objects.count() == type(own).objects.filter(is_catalog=True).count() + 1  # nothing copied
    assert api_client(user).get(detail).status_code == status.HTTP_200_OK


@pytest.mark.parametrize("kind", ["gpu", "model"])
def test_another_users_private_profile_is_never_listed(user, other_user, kind):
    own = make_gpu(user) if kind == "gpu" else make_model(user)
    client = api_client(other_user)
    for scope in ("", "?scope=mine", "?scope=catalog"):
        url, slugs = reverse(f"api-{kind}-list") + scope, set()
        while url:  # every page
            body = client.get(url).json()
            slugs |= {r["slug"] for r in body["results"]}
            url = body["next"]
        assert own.slug not in slugs and (scope == "?scope=mine" or len(slugs) > 10)
    mine = api_client(user).get(reverse(f"api-{kind}-list") + "?scope=mine").json()["results"]
    assert [r["slug"] for r in mine] == [own.slug]


def test_the_copy_service_refuses_another_users_private_profile(user, other_user):
    own = make_model(user)
    with pytest.raises(Http404):
        profile_copy(profile=own, owner=other_user)
    with pytest.raises(Http404):
        profile_copy(profile=own, owner=AnonymousUser())
    assert profile_copy(profile=own, owner=user).copied_from == own  # the owner may copy their own row
    assert profile_copy(profile=ModelProfile.objects.get(slug="llama-3-1-8b"), owner=other_user).owner == other_user


def test_model_update_is_validated_as_a_spec(user):
    model = make_model(user)
    r = api_client(user).patch(reverse("api-model-detail", args=[model.slug]), {"num_kv_heads": 3}, format="json")
    assert r.status_code == 400
    assert r.json()["errors"] == {"num_kv_heads": ["3 does not divide num_attention_heads 8"]}


def test_copy_makes_an_editable_owned_copy(user):
    c = api_client(user)
    r = c.post(reverse("api-model-copy", args=["deepseek-v3"]))
    assert r.status_code == 201
    copy = ModelProfile.objects.get(slug=r.json()["slug"])
    assert (copy.owner, copy.is_catalog, copy.copied_from.slug) == (user, False, "deepseek-v3")
    assert copy.to_spec().kv_lora_rank == 512 and copy.sources == ModelProfile.objects.get(slug="deepseek-v3").sources
    r = c.patch(reverse("api-model-detail", args=[copy.slug]), {"num_parameters": 685_000_000_000}, format="json")
    assert r.status_code == 200 and r.json()["num_parameters"] == 685_000_000_000


@pytest.mark.parametrize("name", ["gpu", "model"])
def test_pages_hide_others_profiles_and_refuse_catalog_edits(client, user, other_user, name):
    own = make_gpu(user) if name == "gpu" else make_model(user)
    catalog_slug = "h100-sxm5-80gb" if name == "gpu" else "llama-3-1-8b"
    client.force_login(other_user)
    assert client.get(reverse(f"gpuprofiles:{name}-detail", args=[own.slug])).status_code == 404
    assert client.post(reverse(f"gpuprofiles:{name}-copy", args=[own.slug])).status_code == 404
    for action in ("edit", "delete"):
        assert client.get(reverse(f"gpuprofiles:{name}-{action}", args=[own.slug])).status_code == 404
        assert client.post(reverse(f"gpuprofiles:{name}-{action}", args=[own.slug])).status_code == 404
        assert client.get(reverse(f"gpuprofiles:{name}-{action}", args=[catalog_slug])).status_code == 403
    assert client.get(reverse(f"gpuprofiles:{name}-detail", args=[catalog_slug])).status_code == 200
    assert type(own).objects.filter(pk=own.pk).exists()
    assert not type(own).objects.filter(owner=other_user).exists()
    client.logout()
    assert client.get(reverse(f"gpuprofiles:{name}-detail", args=[own.slug])).status_code == 404


def test_owner_edits_and_deletes_on_pages(client, user):
    gpu = make_gpu(user)
    client.force_login(user)
    r = client.post(reverse("gpuprofiles:gpu-edit", args=[gpu.slug]), {"name": "Renamed", "memory_gib": "70"})
    assert r.status_code == 302
    gpu.refresh_from_db()
    assert (gpu.name, gpu.memory_gib) == ("Renamed", 70.0)
    r = client.post(reverse("gpuprofiles:gpu-edit", args=[gpu.slug]), {"name": "Renamed", "memory_gib": ""})
    assert r.status_code == 200 and 'class="errorlist' in r.content.decode()
    assert client.post(reverse("gpuprofiles:gpu-delete", args=[gpu.slug])).status_code == 302
    assert not GpuProfile.objects.filter(pk=gpu.pk).exists()


def test_copy_to_my_profiles_on_the_page(client, user):
    client.force_login(user)
    r = client.post(reverse("gpuprofiles:gpu-copy", args=["h100-sxm5-80gb"]))
    assert r.status_code == 302
    copy = GpuProfile.objects.get(owner=user)
    assert r["Location"] == copy.get_absolute_url() and copy.memory_gib == 79.18
    assert client.get(reverse("gpuprofiles:gpu-edit", args=[copy.slug])).status_code == 200


def test_private_slugs_are_unguessable(user):
    c = api_client(user)
    slugs = [c.post(reverse("api-gpu-list"), {"name": "Same", "memory_gib": 10}, format="json").json()["slug"]
             for _ in range(3)]
    assert len(set(slugs)) == 3 and all(re.fullmatch(r"alice-same-[0-9a-f]{16}", s) for s in slugs)
    copy = c.post(reverse("api-gpu-copy", args=["h100-sxm5-80gb"])).json()["slug"]
    assert re.fullmatch(r"alice-h100-sxm5-80gb-[0-9a-f]{16}", copy)
    # The suffix is random (64 bits), not a counter: two copies share no suffix.
    again = c.post(reverse("api-gpu-copy", args=["h100-sxm5-80gb"])).json()["slug"]
    assert again[-16:] != copy[-16:]


def test_migration_gives_existing_private_rows_a_random_suffix_once(user):
    migration = importlib.import_module("gpuprofiles.migrations.0004_private_slugs_unguessable")
    old_gpu, old_model = make_gpu(user, slug="alice-h100-sxm5-80gb"), make_model(user, slug="alice-llama")
    migration.add_random_suffix(django_apps, None)
    old_gpu.refresh_from_db()
    old_model.refresh_from_db()
    assert re.fullmatch(r"alice-h100-sxm5-80gb-[0-9a-f]{16}", old_gpu.slug)
    assert re.fullmatch(r"alice-llama-[0-9a-f]{16}", old_model.slug)
    before = sorted(GpuProfile.objects.values_list("slug", flat=True))
    migration.add_random_suffix(django_apps, None)  # idempotent; catalog slugs never change
    assert sorted(GpuProfile.objects.values_list("slug", flat=True)) == before
    assert GpuProfile.objects.filter(slug="h100-sxm5-80gb", is_catalog=True).exists()


def test_pages_that_plan_never_use_another_users_private_profile(client, user, other_user):
    gpu, model = make_gpu(user, name="Alice's secret GPU"), make_model(user, name="Alice's secret model")
    client.force_login(other_user)
    asks = [("/", {"model": model.slug}), ("/", {"gpu": gpu.slug}),
            ("/compare/", {"model": model.slug, "gpus": [gpu.slug, "h100-sxm5-80gb"]}),
            ("/sweeps/new/", {"model": model.slug, "gpu": gpu.slug})]
    for url, query in asks:
        response = client.get(url, query)
        html = response.content.decode()
        assert response.status_code == 200, url
        assert "secret" not in html, url  # neither offered nor used (the slug asked for may be echoed back)
    client.force_login(user)
    assert "Alice&#x27;s secret model" in client.get("/", {"model": model.slug}).content.decode()
