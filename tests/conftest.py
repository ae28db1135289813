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
#: kombu 5.5 ``_kombu.binding_permanent.Q`` and ``_kombu.binding_deadlines``), the tests' own queues; the
#: workers' tests put all of theirs under :func:`redis_key_prefix` (``kvp-it-gw0:...``).
REDIS_TEST_KEYS = ("_kombu.binding*", "kvp-it-*", "kvp-test-*", "unacked*", "celery*", "*.reply.celery.pidbox")


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing():
    """MD5 for the tests' passwords: Django's PBKDF2 (a million rounds) took about 1 s of CPU per user made or
    signed in, and hashing strength is not what any test checks (settings.py keeps Django's default)."""
    from django.test.utils import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(scope="session", autouse=True)
def _flush_puts_back_post_migrate_rows():
    """After a transactional test's flush, the content types and permissions go back in one insert per table
    instead of ``post_migrate``'s per-app queries (about 0.4 s a flush): ``tests/flush_restore.py``."""
    from tests.flush_restore import install

    install()


def redis_key_prefix() -> str:
    """The prefix of every broker key this test process and the workers it starts use (kombu's
    ``global_keyprefix``): one per xdist worker, so two workers' tests never share a queue, a binding or
    kombu's ``unacked`` hash (whose messages a healer reads, and whose ids each worker's database reuses)."""
    return f"kvp-it-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}:"


def _redis_test_url() -> str:
    """``REDIS_URL``, or the default one when CI requires the real parts; "" when no Redis test runs."""
    url = os.environ.get("REDIS_URL", "")
    return url or ("redis://127.0.0.1:6379/0" if require_real_parts() else "")


@pytest.fixture(scope="session")
def redis_url():
    """A reachable Redis URL: ``REDIS_URL``; unset, no Redis test runs unless KVP_REQUIRE_REAL_PARTS asks.

    At the end of the session, the keys of :data:`REDIS_TEST_KEYS` that were not there at its start
    are deleted: the suite leaves the database as it found it and touches no other. Under xdist the
    controller does it, once every worker has ended (:func:`pytest_sessionfinish`): a worker that ended
    first would delete keys the other one's test is using.
    """
    url = _redis_test_url()
    if not url:
        pytest.skip("REDIS_URL is not set (e.g. REDIS_URL=redis://127.0.0.1:6379/15 for the Redis tests)")
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        before = _keys(client)
    except Exception as exc:  # noqa: BLE001
        missing_part(f"Redis not reachable at {url}: {exc}")
    yield url
    if "PYTEST_XDIST_WORKER" not in os.environ:
        _delete_created(client, before)
    client.close()


def _keys(client) -> set[bytes]:
    return {key for pattern in REDIS_TEST_KEYS for key in client.scan_iter(match=pattern, count=500)}


def _delete_created(client, before: set[bytes]) -> None:
    created = _keys(client) - before
    if created:
        client.delete(*created)


def _is_xdist_controller(config) -> bool:
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))


@pytest.hookimpl(tryfirst=True)  # before xdist starts its workers
def pytest_sessionstart(session):
    """Under xdist, the controller notes Redis's test keys before any worker starts (see ``redis_url``)."""
    url = _redis_test_url()
    if not url or not _is_xdist_controller(session.config):
        return
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        session.config.stash[_REDIS_BEFORE] = (client, _keys(client))
    except Exception:  # noqa: BLE001 - unreachable: the workers' redis_url fixture says so
        return


def pytest_sessionfinish(session):
    """Under xdist, the controller deletes the test keys the workers created, once every worker has ended."""
    noted = session.config.stash.get(_REDIS_BEFORE, None)
    if noted is not None:
        client, before = noted
        try:
            _delete_created(client, before)
        finally:
            client.close()


_REDIS_BEFORE = pytest.StashKey[tuple]()


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
    tests (the docs' sandbox blocks) first and hands out the rest as workers free up, so ordinary tests
    can follow a flush on the same xdist worker. They expect the migrated catalog: it is reloaded once, before the first of them.
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
