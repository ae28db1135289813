"""Named API tokens: creation, storage, authentication, revocation, and the issue_token command."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from rest_framework import status

from accounts.models import ApiToken, hash_token
from accounts.services import MAX_TOKENS_PER_USER, api_token_create, api_token_revoke
from simulator.base.errors import FieldError

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("_probe_urls")]


@pytest.fixture
def _probe_urls():
    with override_settings(ROOT_URLCONF="tests.api.probe_urls"):
        yield


def test_only_the_hash_and_a_short_prefix_are_stored(user):
    token, raw = api_token_create(user=user, name="notebook")
    assert raw.startswith("kvp_") and len(raw) >= 40
    token.refresh_from_db()
    assert token.key_hash == hash_token(raw) and raw not in token.key_hash
    assert raw.startswith(token.prefix) and len(token.prefix) < len(raw) - 30


def test_names_are_required_and_unique_per_user(user, other_user):
    api_token_create(user=user, name="ci")
    with pytest.raises(FieldError, match="name: "):
        api_token_create(user=user, name="ci")
    with pytest.raises(FieldError, match="name: "):
        api_token_create(user=user, name="   ")
    api_token_create(user=other_user, name="ci")  # another user may reuse the name


def test_a_user_holds_a_bounded_number_of_tokens(user):
    for i in range(MAX_TOKENS_PER_USER):
        api_token_create(user=user, name=f"t{i}")
    with pytest.raises(FieldError, match="name: "):
        api_token_create(user=user, name="one too many")


def test_token_authenticates_a_write(token_client):
    response = token_client.post("/api/_probe/", {"x": 1}, format="json")
    assert response.status_code == status.HTTP_201_CREATED
    assert response.json()["user"] == "alice"


def test_bearer_keyword_is_accepted_too(raw_token, anon_client):
    anon_client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
    assert anon_client.post("/api/_probe/", {}, format="json").status_code == status.HTTP_201_CREATED


def test_use_is_recorded(user, raw_token, token_client):
    assert ApiToken.objects.get(user=user).last_used_at is None
    token_client.get("/api/_probe/")
    assert ApiToken.objects.get(user=user).last_used_at is not None


@pytest.mark.parametrize(
    "header",
    ["Token kvp_not-a-real-token", "Token", "Token a b", "Bearer ", "token kvp_\u00e9"],
)
def test_bad_tokens_are_401_in_the_error_shape(anon_client, header):
    anon_client.credentials(HTTP_AUTHORIZATION=header)
    response = anon_client.post("/api/_probe/", {}, format="json")
    assert response.status_code == status.HTTP_403_FORBIDDEN
    assert set(response.json()) == {"errors"}
    assert response.json()["errors"]["non_field_errors"]


def test_an_unknown_token_is_rejected_even_for_reads(anon_client):
    """A script with a wrong token learns it at once, not at its first write.

    Session authentication comes first in DEFAULT_AUTHENTICATION_CLASSES, so DRF answers
    every authentication failure with 403 (not 401); the message says why.
    """
    anon_client.credentials(HTTP_AUTHORIZATION="Token kvp_wrong")
    response = anon_client.get("/api/_probe/")
    assert response.status_code == status.HTTP_403_FORBIDDEN
    assert response.json() == {"errors": {"non_field_errors": ["Invalid or revoked token."]}}


def test_revoked_token_stops_working(user, raw_token, token_client):
    token = ApiToken.objects.get(user=user)
    assert api_token_revoke(user=user, token_id=token.pk)
    response = token_client.post("/api/_probe/", {}, format="json")
    assert response.status_code == status.HTTP_403_FORBIDDEN


def test_a_user_cannot_revoke_another_users_token(user, other_user, raw_token):
    token = ApiToken.objects.get(user=user)
    assert not api_token_revoke(user=other_user, token_id=token.pk)
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_inactive_users_tokens_are_refused(user, raw_token, token_client):
    user.is_active = False
    user.save()
    assert token_client.post("/api/_probe/", {}, format="json").status_code == status.HTTP_403_FORBIDDEN


def test_issue_token_prints_a_working_token(user, anon_client):
    out = io.StringIO()
    call_command("issue_token", "alice", "--name", "cli", stdout=out, stderr=io.StringIO())
    raw = out.getvalue().strip()
    assert ApiToken.objects.get(user=user, name="cli").key_hash == hash_token(raw)
    anon_client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    assert anon_client.post("/api/_probe/", {}, format="json").status_code == status.HTTP_201_CREATED


def test_issue_token_for_an_unknown_user_fails_clearly(db):
    with pytest.raises(CommandError, match="no user named"):
        call_command("issue_token", "nobody", stdout=io.StringIO(), stderr=io.StringIO())


def test_issue_token_can_create_the_user(django_user_model):
    out = io.StringIO()
    call_command("issue_token", "robot", "--create-user", stdout=out, stderr=io.StringIO())
    robot = django_user_model.objects.get(username="robot")
    assert not robot.has_usable_password()
    assert robot.api_tokens.count() == 1 and out.getvalue().strip().startswith("kvp_")
