"""Who may do what: public reads, signed-in writes, session CSRF, tokens without CSRF."""

from __future__ import annotations

import pytest
from django.test import override_settings
from rest_framework import status
from rest_framework.test import APIClient

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("_probe_urls")]


@pytest.fixture
def _probe_urls():
    with override_settings(ROOT_URLCONF="tests.api.probe_urls"):
        yield


def test_reads_are_public(anon_client):
    response = anon_client.get("/api/_probe/")
    assert response.status_code == status.HTTP_200_OK
    assert response.json() == {"ok": True, "user": None}


def test_anonymous_writes_are_refused_in_the_error_shape(anon_client):
    response = anon_client.post("/api/_probe/", {"x": 1}, format="json")
    assert response.status_code == status.HTTP_403_FORBIDDEN
    assert response.json() == {"errors": {"non_field_errors": ["Authentication credentials were not provided."]}}


def test_session_writes_need_the_csrf_token(user):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)  # a real session cookie, as a browser has
    response = client.post("/api/_probe/", {"x": 1}, format="json")
    assert response.status_code == status.HTTP_403_FORBIDDEN
    assert "CSRF" in response.json()["errors"]["non_field_errors"][0]


def test_session_writes_with_the_csrf_token_pass(user):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/accounts/")  # any page that renders {% csrf_token %} sets the cookie
    csrf = client.cookies["csrftoken"].value
    response = client.post("/api/_probe/", {"x": 1}, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == status.HTTP_201_CREATED


def test_token_writes_need_no_csrf(raw_token):
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw_token}")
    assert client.post("/api/_probe/", {"x": 1}, format="json").status_code == status.HTTP_201_CREATED


def test_the_project_defaults_are_the_documented_ones():
    from rest_framework.settings import api_settings

    assert [c.__name__ for c in api_settings.DEFAULT_AUTHENTICATION_CLASSES] == [
        "SessionAuthentication",
        "ApiTokenAuthentication",
    ]
    assert [c.__name__ for c in api_settings.DEFAULT_PERMISSION_CLASSES] == ["IsAuthenticatedOrReadOnly"]


@pytest.mark.parametrize("cookie", ["0\x00\x80\x80\x80", "a" * 8 + "\x00", "x" * 41, "UPPERCASEKEY1234", "short"])
def test_a_malformed_session_cookie_is_signed_out_not_a_500(cookie):
    client = APIClient(raise_request_exception=False)
    client.cookies["sessionid"] = cookie
    response = client.get("/api/_probe/")
    assert response.status_code == status.HTTP_200_OK
    assert response.json()["user"] is None


def test_a_real_session_still_signs_in(user):
    from django.test import Client

    client = Client()
    assert client.login(username="alice", password="correct horse battery staple")
    assert client.get("/accounts/").status_code == 200
