"""Fixtures for the API tests: users, tokens, clients, and a clean throttle cache."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from planner.accounts.services import api_token_create


@pytest.fixture(autouse=True)
def _clear_cache():
    """Throttle counters live in the cache: start every test from zero."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", password="correct horse battery staple")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("bob", password="another fine password 42")


@pytest.fixture
def raw_token(user) -> str:
    _, raw = api_token_create(user=user, name="test script")
    return raw


@pytest.fixture
def anon_client() -> APIClient:
    return APIClient()


@pytest.fixture
def token_client(raw_token) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw_token}")
    return client
