"""Browser pages: sign up, sign in/out, the account page (create and revoke tokens)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import ApiToken, hash_token
from accounts.services import api_token_create

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


def test_sign_up_creates_the_user_and_signs_in(client, django_user_model):
    response = client.post(
        reverse("signup"),
        {"username": "carol", "email": "", "password1": PASSWORD, "password2": PASSWORD},
    )
    assert response.status_code == 302 and response["Location"] == reverse("account")
    assert django_user_model.objects.filter(username="carol").exists()
    assert client.get(reverse("account")).status_code == 200


def test_sign_up_shows_field_errors(client):
    response = client.post(reverse("signup"), {"username": "", "password1": "a", "password2": "b"})
    assert response.status_code == 200
    assert b'class="errorlist"' in response.content


def test_sign_up_ignores_an_offsite_next(client):
    response = client.post(
        reverse("signup") + "?next=https://evil.example/",
        {"username": "dave", "password1": PASSWORD, "password2": PASSWORD, "next": "https://evil.example/"},
    )
    assert response["Location"] == reverse("account")


def test_sign_in_page_renders_and_signs_in(client, user):
    page = client.get(reverse("login"))
    assert page.status_code == 200 and b"Sign in" in page.content
    response = client.post(reverse("login"), {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302
    assert client.get(reverse("account")).status_code == 200


def test_sign_out_is_a_post(client, user):
    client.force_login(user)
    response = client.post(reverse("logout"))
    assert response.status_code == 302
    assert client.get(reverse("account")).status_code == 302  # back to the sign-in page


def test_account_page_needs_sign_in(client):
    response = client.get(reverse("account"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_account_page_lists_only_my_tokens(client, user, other_user):
    api_token_create(user=user, name="mine")
    api_token_create(user=other_user, name="theirs")
    client.force_login(user)
    body = client.get(reverse("account")).content.decode()
    assert "mine" in body and "theirs" not in body


def test_creating_a_token_shows_it_once(client, user):
    client.force_login(user)
    response = client.post(reverse("account"), {"name": "notebook"})
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    raw = re.search(r'<code id="new-token">(kvp_[A-Za-z0-9_-]+)</code>', response.content.decode()).group(1)
    assert ApiToken.objects.get(user=user, name="notebook").key_hash == hash_token(raw)
    assert raw not in client.get(reverse("account")).content.decode()


def test_a_duplicate_name_is_a_form_error(client, user):
    api_token_create(user=user, name="ci")
    client.force_login(user)
    response = client.post(reverse("account"), {"name": "ci"})
    assert b"already have a token" in response.content
    assert ApiToken.objects.filter(user=user).count() == 1


def test_revoke_removes_my_token(client, user):
    token, _ = api_token_create(user=user, name="old")
    client.force_login(user)
    response = client.post(reverse("token-revoke", args=[token.pk]))
    assert response.status_code == 302
    assert not ApiToken.objects.filter(pk=token.pk).exists()


def test_revoke_asks_first_and_revokes_only_from_the_confirmation(client, user):
    """Issue 33 item 4: the account page's "Revoke…" opens a confirmation (GET changes nothing); its button posts."""
    token, _ = api_token_create(user=user, name="old")
    client.force_login(user)
    page = client.get(reverse("token-revoke", args=[token.pk]))
    assert page.status_code == 200 and "Revoke the API token “old”?" in page.content.decode()
    assert f'action="{reverse("token-revoke", args=[token.pk])}"' in page.content.decode()
    assert ApiToken.objects.filter(pk=token.pk).exists()
    assert 'method="post" action="/accounts/tokens/' not in client.get(reverse("account")).content.decode()


def test_cannot_revoke_someone_elses_token(client, user, other_user):
    theirs, _ = api_token_create(user=other_user, name="theirs")
    client.force_login(user)
    client.post(reverse("token-revoke", args=[theirs.pk]))
    assert ApiToken.objects.filter(pk=theirs.pk).exists()


def test_account_forms_enforce_csrf(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post(reverse("account"), {"name": "x"}).status_code == 403
    assert not ApiToken.objects.filter(user=user).exists()
