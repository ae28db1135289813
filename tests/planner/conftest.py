"""Fixtures the planner's API tests share."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def signed_in_api(django_user_model) -> APIClient:
    """An API client signed in as a fresh user (the owner of what it creates)."""
    c = APIClient()
    c.force_authenticate(django_user_model.objects.create_user("api-owner", password="pw-api-owner-123"))
    return c
