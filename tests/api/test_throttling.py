"""Per-user and per-anonymous-client rate limits answer 429 in the error shape."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import override_settings
from rest_framework import status
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("_probe_urls")]


@pytest.fixture
def _probe_urls():
    with override_settings(ROOT_URLCONF="tests.api.probe_urls"):
        yield


@pytest.fixture
def low_limits(monkeypatch):
    """anon 3/min, user 5/min. DRF binds the rates to the throttle class at import,
    so overriding the REST_FRAMEWORK setting alone would not reach them."""
    from django.conf import settings

    rates = {"anon": "3/min", "user": "5/min"}
    with override_settings(REST_FRAMEWORK={**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}):
        monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)
        cache.clear()
        yield


def test_anonymous_clients_get_429_after_their_limit(low_limits):
    client = APIClient()
    codes = [client.get("/api/_probe/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    response = client.get("/api/_probe/")
    assert response.status_code == status.HTTP_429_TOO_MANY_REQUESTS
    assert int(response["Retry-After"]) > 0
    body = response.json()
    assert set(body) == {"errors"}
    assert "throttled" in body["errors"]["non_field_errors"][0]


def test_anonymous_limits_are_per_client(low_limits):
    for _ in range(3):
        APIClient(REMOTE_ADDR="10.0.0.1").get("/api/_probe/")
    assert APIClient(REMOTE_ADDR="10.0.0.1").get("/api/_probe/").status_code == 429
    assert APIClient(REMOTE_ADDR="10.0.0.2").get("/api/_probe/").status_code == 200


def test_users_get_their_own_higher_limit(low_limits, token_client, other_user):
    codes = [token_client.get("/api/_probe/").status_code for _ in range(6)]
    assert codes == [200] * 5 + [429]
    other = APIClient()
    other.force_authenticate(other_user)
    assert other.get("/api/_probe/").status_code == 200


def test_the_default_limits_come_from_the_environment():
    from django.conf import settings

    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    assert set(rates) == {"anon", "user"}
