"""Shared fixtures: access to the real parts (Redis, Chromium) with one rule.

When ``KVP_REQUIRE_REAL_PARTS=1`` (CI), a missing real part is a failure; on a developer
machine without it, the tests that need it are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil

import pytest


def require_real_parts() -> bool:
    return os.environ.get("KVP_REQUIRE_REAL_PARTS", "") in {"1", "true", "yes"}


def missing_part(reason: str):
    """Fail in CI, skip elsewhere."""
    if require_real_parts():
        pytest.fail(f"{reason} (KVP_REQUIRE_REAL_PARTS=1)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A reachable Redis URL (``REDIS_URL`` or the local default)."""
    url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    try:
        import redis

        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except Exception as exc:  # noqa: BLE001
        missing_part(f"Redis not reachable at {url}: {exc}")
    return url


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """The Debian ``chromium`` binary for Playwright (no browser download)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        missing_part("chromium is not installed (apt-get install chromium)")
    return path
