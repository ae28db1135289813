"""Catalog rows are read-only; own profiles are editable by their owner only (pages and API)."""

import pytest
from django.urls import reverse
from rest_framework import status

from gpuprofiles.models import GpuProfile, ModelProfile

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
    assert r.status_code == 201 and r.json()["owner"] == "alice" and r.json()["slug"] == "alice-my-l40s"
    slug = r.json()["slug"]
    r = c.patch(reverse("api-gpu-detail", args=[slug]), {"bandwidth_tbps": 0.864}, format="json")
    assert r.status_code == 200 and r.json()["bandwidth_tbps"] == 0.864 and r.json()["memory_gib"] == 44.42
    assert c.delete(reverse("api-gpu-detail", args=[slug])).status_code == 204
    assert not GpuProfile.objects.filter(slug=slug).exists()


def test_gpu_create_needs_memory(user):
    r = api_client(user).post(reverse("api-gpu-list"), {"name": "No memory"}, format="json")
    assert r.status_code == 400 and "memory_gib" in r.json()["errors"]


def test_others_get_403_on_my_profiles_in_the_api(user, other_user):
    gpu, model = make_gpu(user), make_model(user)
    c = api_client(other_user)
    assert c.patch(reverse("api-gpu-detail", args=[gpu.slug]), {"memory_gib": 2}, format="json").status_code == 403
    assert c.delete(reverse("api-gpu-detail", args=[gpu.slug])).status_code == 403
    assert c.patch(reverse("api-model-detail", args=[model.slug]), {"name": "x"}, format="json").status_code == 403
    assert c.delete(reverse("api-model-detail", args=[model.slug])).status_code == 403
    # Bad input from a non-owner is still a 403, not a 400.
    assert c.patch(reverse("api-gpu-detail", args=[gpu.slug]), {"memory_gib": -1}, format="json").status_code == 403


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
def test_pages_refuse_others_and_catalog_edits(client, user, other_user, name):
    own = make_gpu(user) if name == "gpu" else make_model(user)
    catalog_slug = "h100-sxm5-80gb" if name == "gpu" else "llama-3-1-8b"
    client.force_login(other_user)
    for action in ("edit", "delete"):
        assert client.get(reverse(f"gpuprofiles:{name}-{action}", args=[own.slug])).status_code == 403
        assert client.post(reverse(f"gpuprofiles:{name}-{action}", args=[own.slug])).status_code == 403
        assert client.get(reverse(f"gpuprofiles:{name}-{action}", args=[catalog_slug])).status_code == 403
    assert type(own).objects.filter(pk=own.pk).exists()


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


def test_slugs_are_unique(user):
    c = api_client(user)
    slugs = {c.post(reverse("api-gpu-list"), {"name": "Same", "memory_gib": 10}, format="json").json()["slug"]
             for _ in range(3)}
    assert slugs == {"alice-same", "alice-same-2", "alice-same-3"}
