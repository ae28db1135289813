"""Fixtures for the API tests: users, tokens, clients, and a clean throttle cache."""

from __future__ import annotations

from collections import Counter

import pytest
from rest_framework.test import APIClient

from accounts.services import api_token_create
from tests.cache_reset import reset_cache


@pytest.fixture(autouse=True)
def _clear_cache():
    """Throttle counters live in the cache: start every test from zero."""
    reset_cache()
    yield
    reset_cache()


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


def pytest_terminal_summary(terminalreporter):
    """Print the schema fuzz's figures when it ran (operations, cases, status codes)."""
    module = __import__("sys").modules.get("tests.api.test_schema_fuzz")
    if module is None or not module.FIGURES["cases"]:
        return
    cases: Counter = module.FIGURES["cases"]
    statuses: Counter = module.FIGURES["statuses"]
    write = terminalreporter.write_line
    terminalreporter.section("schema fuzz figures")
    for mode in sorted({m for m, _ in cases}):
        ops = {op: n for (m, op), n in cases.items() if m == mode}
        codes = {code: n for (m, code), n in statuses.items() if m == mode}
        write(f"{mode}: {len(ops)} operations, {sum(ops.values())} cases; statuses {dict(sorted(codes.items()))}")
    for (mode, op), n in sorted(cases.items()):
        write(f"  {mode:9} {op}: {n}")
