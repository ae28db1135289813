"""A user sets or clears a model's default sampling on the edit form and through the API; it reaches the spec,
and an unknown path is an error naming the choices."""

import pytest
from django.urls import reverse
from rest_framework import status

from gpuprofiles.models import ModelProfile
from gpuprofiles.services import MODEL_EDITABLE

from .factories import api_client, make_model


def _form_data(profile, **changes) -> dict:
    """The edit form as the page fills it, with ``changes``."""
    data = {f: getattr(profile, f) for f in MODEL_EDITABLE}
    data.update(changes)
    return {k: ("" if v is None else v) for k, v in data.items() if v is not False}


def test_edit_form_sets_and_clears_it(client, user):
    client.force_login(user)
    profile = make_model(user)
    r = client.post(reverse("gpuprofiles:model-edit", args=[profile.slug]),
                    _form_data(profile, sampling="top_k_top_p_penalties"))
    assert r.status_code == 302
    profile.refresh_from_db()
    assert profile.sampling == "top_k_top_p_penalties"
    assert profile.to_spec().sampling == "top_k_top_p_penalties"
    r = client.post(reverse("gpuprofiles:model-edit", args=[profile.slug]), _form_data(profile, sampling=""))
    assert r.status_code == 302
    profile.refresh_from_db()
    assert profile.sampling == "" and profile.to_spec().sampling is None


def test_edit_form_offers_the_paths_in_words(client, user):
    client.force_login(user)
    profile = make_model(user, sampling="temperature")
    html = client.get(reverse("gpuprofiles:model-edit", args=[profile.slug])).content.decode()
    assert "Default sampling" in html and "not known (timed as top-k / top-p)" in html
    assert '<option value="temperature" selected>temperature only</option>' in html


def test_edit_form_refuses_an_unknown_path(client, user):
    client.force_login(user)
    profile = make_model(user, sampling="greedy")
    r = client.post(reverse("gpuprofiles:model-edit", args=[profile.slug]), _form_data(profile, sampling="beam"))
    assert r.status_code == 200
    html = r.content.decode()
    assert "beam is not a sampler path: choose one of greedy (greedy (temperature 0)), temperature" in html
    profile.refresh_from_db()
    assert profile.sampling == "greedy"


def test_api_sets_clears_and_refuses(user):
    profile = make_model(user)
    url = reverse("api-model-detail", args=[profile.slug])
    r = api_client(user).patch(url, {"sampling": "greedy"}, format="json")
    assert r.status_code == status.HTTP_200_OK and r.json()["sampling"] == "greedy"
    assert ModelProfile.objects.get(pk=profile.pk).to_spec().sampling == "greedy"
    for blank in (None, ""):
        api_client(user).patch(url, {"sampling": "greedy"}, format="json")
        r = api_client(user).patch(url, {"sampling": blank}, format="json")
        assert r.status_code == status.HTTP_200_OK and r.json()["sampling"] == ""
    r = api_client(user).patch(url, {"sampling": "beam"}, format="json")
    assert r.status_code == status.HTTP_400_BAD_REQUEST
    assert r.json()["errors"]["sampling"] == [
        '"beam" is not a sampler path: choose one of greedy, temperature, top_k_top_p, top_k_top_p_penalties, '
        'or "" (not known).']


@pytest.mark.parametrize("slug, path", [("mixtral-8x7b", "temperature"), ("qwen2-5-7b", "top_k_top_p_penalties"),
                                        ("gemma-4-26b-a4b", "")])
def test_api_exposes_it(db, slug, path):
    assert api_client().get(reverse("api-model-detail", args=[slug])).json()["sampling"] == path
    listed = api_client().get(reverse("api-model-list"), {"q": slug.split("-")[0]}).json()["results"]
    assert {m["slug"]: m["sampling"] for m in listed}[slug] == path


def test_copy_keeps_it(user):
    r = api_client(user).post(reverse("api-model-copy", args=["qwen2-5-7b"]))
    assert r.status_code == status.HTTP_201_CREATED and r.json()["sampling"] == "top_k_top_p_penalties"
