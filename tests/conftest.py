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


#: Keys the suite's Redis users create: kombu's bindings and bookkeeping (``_kombu.binding.Q``, and since
#: kombu 5.5 ``_kombu.binding_permanent.Q`` and ``_kombu.binding_deadlines``), the tests' own queues.
REDIS_TEST_KEYS = ("_kombu.binding*", "kvp-it-*", "kvp-test-*", "unacked*", "celery*", "*.reply.celery.pidbox")


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing():
    """MD5 for the tests' passwords: Django's PBKDF2 (a million rounds) took about 1 s of CPU per user made or
    signed in, and hashing strength is not what any test checks (settings.py keeps Django's default)."""
    from django.test.utils import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(scope="session")
def redis_url():
    """A reachable Redis URL: ``REDIS_URL``; unset, no Redis test runs unless KVP_REQUIRE_REAL_PARTS asks.

    At the end of the session, the keys of :data:`REDIS_TEST_KEYS` that were not there at its start
    are deleted: the suite leaves the database as it found it and touches no other.
    """
    url = os.environ.get("REDIS_URL", "")
    if not url:
        if not require_real_parts():
            pytest.skip("REDIS_URL is not set (e.g. REDIS_URL=redis://127.0.0.1:6379/15 for the Redis tests)")
        url = "redis://127.0.0.1:6379/0"
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        before = _keys(client)
    except Exception as exc:  # noqa: BLE001
        missing_part(f"Redis not reachable at {url}: {exc}")
    yield url
    created = _keys(client) - before
    if created:
        client.delete(*created)
    client.close()


def _keys(client) -> set[bytes]:
    return {key for pattern in REDIS_TEST_KEYS for key in client.scan_iter(match=pattern, count=500)}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    """With ``-n 2 --dist loadgroup`` (pytest-xdist), tests that share state outside their worker run on one.

    Those are the tests of real Celery workers and of Redis: Redis's keys are one namespace for both
    xdist workers (kombu's ``unacked`` index, bindings; ``redis_url`` deletes what the session created when
    the session ends). They run one at a time there, while the other worker runs the rest. Browser and
    live-server tests need no group: each xdist worker has its own test database, live server and Chromium.
    """
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        path = str(item.fspath)
        if fixtures & SERIAL_FIXTURES or any(part in path for part in SERIAL_PATHS):
            item.add_marker(pytest.mark.xdist_group("real-parts"))


SERIAL_FIXTURES = {"redis_url", "worker_factory", "filesystem_worker", "sender_on_redis"}
SERIAL_PATHS = ("/tests/integration/",)

#: Fixtures that make a test transactional: its database is flushed (emptied) when it ends.
TRANSACTIONAL_FIXTURES = {"transactional_db", "live_server", "django_db_reset_sequences"}


def _database_use(item) -> str:
    """'transactional', 'db' (inside a transaction that is rolled back) or '' (no database), as pytest-django sees it."""
    names = set(getattr(item, "fixturenames", ()))
    marker = item.get_closest_marker("django_db")
    options = ({"transaction": marker.args[0] if marker.args else False} | marker.kwargs) if marker else {}
    if names & TRANSACTIONAL_FIXTURES or options.get("transaction") or options.get("reset_sequences"):
        return "transactional"
    return "db" if marker or "db" in names else ""


_catalog_flushed = [False]


def pytest_fixture_post_finalizer(fixturedef, request):
    """A transactional test flushed the database when its database fixture is torn down (not when it was skipped
    before reaching it: then the test database may not even exist yet)."""
    if fixturedef.argname == "_django_db_helper" and _database_use(request.node) == "transactional":
        _catalog_flushed[0] = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Put the catalog back (its data migration's rows) after a transactional test flushed it.

    pytest-django runs transactional tests after the others, but ``--dist loadgroup`` sends the grouped
    tests (workers, Redis: transactional) first, so ordinary tests can follow a flush on the same
    xdist worker. They expect the migrated catalog: it is reloaded once, before the first of them.
    """
    yield
    if _catalog_flushed[0] and nextitem is not None and _database_use(nextitem) == "db":
        from pytest_django.plugin import blocking_manager_key

        from gpuprofiles.catalog import load_catalog
        from gpuprofiles.models import GpuProfile, ModelProfile

        with item.config.stash[blocking_manager_key].unblock():
            load_catalog(GpuProfile, ModelProfile)
        _catalog_flushed[0] = False


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """The Debian ``chromium`` binary for Playwright (no browser download)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        missing_part("chromium is not installed (apt-get install chromium)")
    return path


def pytest_collection_finish(session):
    """Property tests' budget (``tests/budget.py``): ``KVP_HYPOTHESIS_BUDGET=full`` (``.ci/run``) runs each
    with the ``max_examples`` its test gives; otherwise (``python3 dev.py test``, a quick local run) with a
    quarter of it, at least 10 examples, so the whole suite stays within its 5 minutes."""
    from tests.budget import FULL, SHARE

    if FULL:
        return
    from hypothesis import settings

    scaled: set[int] = set()
    for item in session.items:
        test = getattr(item, "obj", None)
        current = getattr(test, "_hypothesis_internal_use_settings", None)
        if current is None or not getattr(test, "is_hypothesis_test", False) or id(test) in scaled:
            continue  # parametrized items share one function: scale it once
        scaled.add(id(test))
        test._hypothesis_internal_use_settings = settings(
            current, max_examples=max(10, current.max_examples // SHARE))
