"""Per-user and per-anonymous-client rate limits answer 429 in the error shape."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client, override_settings
from rest_framework import status
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from tests.cache_reset import reset_cache

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("_probe_urls", "_mid_window")]


@pytest.fixture
def _mid_window(monkeypatch):
    """The page and sign-in limits count in fixed windows (one minute): the clock is pinned mid-window, or
    requests that straddle a boundary start a new count (four 200s where a 429 was due: failed once)."""
    from types import SimpleNamespace

    from config import throttling

    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: 1_800_000_030.0))


@pytest.fixture
def _probe_urls():
    with override_settings(ROOT_URLCONF="tests.api.probe_urls"):
        yield


@pytest.fixture
def low_limits(monkeypatch):
    """anon 3/min, user 5/min. DRF binds the rates to the throttle class at import,
    so overriding the REST_FRAMEWORK setting alone would not reach them."""
    from django.conf import settings

    rates = {"anon": "3/min", "user": "5/min", "heavy": "2/min"}
    with override_settings(REST_FRAMEWORK={**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}):
        monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)
        reset_cache()
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
    assert set(rates) == {"anon", "user", "heavy"}


# --------------------------------------------------------------------------- issue 23


def test_the_throttle_cache_is_shared_by_processes():
    """Each gunicorn process counted on its own with the per-process memory cache; a second process
    (a fresh interpreter) must see a counter this one wrote."""
    import os
    import subprocess
    import sys

    from django.conf import settings

    assert settings.CACHES["default"]["BACKEND"] in (
        "django.core.cache.backends.redis.RedisCache", "django.core.cache.backends.filebased.FileBasedCache")
    cache.set("kvp:test:shared", 41, 60)
    code = ("import django; django.setup(); from django.core.cache import cache; "
            "print(cache.incr('kvp:test:shared'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}, check=True)
    assert out.stdout.strip().splitlines()[-1] == "42"
    assert cache.get("kvp:test:shared") == 42


def test_a_forged_x_forwarded_for_does_not_lift_the_limit(low_limits):
    codes = [APIClient(HTTP_X_FORWARDED_FOR=f"198.51.100.{i}").get("/api/_probe/").status_code for i in range(5)]
    assert codes == [200, 200, 200, 429, 429]


def test_behind_a_configured_proxy_the_forwarded_address_is_the_client(low_limits, settings):
    from django.conf import settings as dj

    with override_settings(NUM_PROXIES=1, REST_FRAMEWORK={**dj.REST_FRAMEWORK, "NUM_PROXIES": 1}):
        def get(ip):
            return APIClient(REMOTE_ADDR="10.0.0.9", HTTP_X_FORWARDED_FOR=f"203.0.113.7, {ip}").get("/api/_probe/")

        assert [get("192.0.2.1").status_code for _ in range(4)] == [200, 200, 200, 429]
        assert get("192.0.2.2").status_code == 200  # the proxy's last hop is the client, not the forged first


def test_pages_are_throttled_per_client_with_retry_after(settings):
    settings.THROTTLE_PAGES = "3/min"
    client = Client(REMOTE_ADDR="10.1.1.1")
    codes = [client.get("/catalog/gpus/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    response = client.get("/")
    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert Client(REMOTE_ADDR="10.1.1.2").get("/").status_code == 200
    assert client.get("/healthz").status_code == 200  # health checks are never throttled


def test_a_submitted_replicas_search_has_its_own_lower_limit(settings):
    settings.THROTTLE_HEAVY_PAGES = "1/min"
    client = Client(REMOTE_ADDR="10.1.1.3")
    query = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "rate": "2", "requests": "20"}
    assert client.get("/replicas/", query).status_code == 200
    assert client.get("/replicas/", query).status_code == 429
    assert client.get("/replicas/").status_code == 200  # the unsubmitted form simulates nothing


def test_simulations_have_the_heavy_limit(low_limits, token_client):
    body = {"engine": {"num_gpu_blocks": 200}, "workload": {"spec": {"n": 5}}}
    codes = [token_client.post("/api/simulations/", body, format="json").status_code for _ in range(3)]
    assert codes == [200, 200, 429]


def test_calibrations_have_the_heavy_limit_and_share_it_with_simulations(low_limits, token_client):
    """Issue 37: three calibrations at once took /healthz down. A POST counts before its body is read (a refused
    file still counts); the list (GET) does not."""
    body = {"name": "c", "model": "qwen2-5-7b", "gpu": "h100-sxm5-80gb", "text": "not a measurement"}
    codes = [token_client.post("/api/calibrations/", body, format="json").status_code for _ in range(3)]
    assert codes == [400, 400, 429]
    assert token_client.get("/api/calibrations/").status_code == 200
    sim = {"engine": {"num_gpu_blocks": 200}, "workload": {"spec": {"n": 5}}}
    assert token_client.post("/api/simulations/", sim, format="json").status_code == 429


def test_a_calibration_upload_page_has_the_heavy_page_limit(settings, user):
    settings.THROTTLE_HEAVY_PAGES = "1/min"
    client = Client(REMOTE_ADDR="10.1.1.4")
    client.force_login(user)
    form = {"name": "c", "model": "qwen2-5-7b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 1}
    assert client.post("/calibrations/", form).status_code == 200  # a form error: no file
    response = client.post("/calibrations/", form)
    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert client.get("/calibrations/").status_code == 200  # the page itself simulates nothing


def test_failed_sign_ins_are_limited_per_address_and_user_name_together(settings, user):
    """Issue 37: ten wrong passwords for a name locked that user out wherever they came from. The count is
    per address and name together: the stranger's address is held, the user's own is not."""
    settings.LOGIN_FAILURES = "3/h"
    client = Client(REMOTE_ADDR="10.2.2.2")
    for _ in range(3):
        response = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
        assert response.status_code == 200 and b"correct" in response.content  # the form's error
    blocked = client.post("/accounts/login/", {"username": "alice", "password": "correct horse battery staple"})
    assert blocked.status_code == 429 and int(blocked["Retry-After"]) > 0
    # The user, from their own address, still signs in: a stranger cannot lock them out ...
    own = Client(REMOTE_ADDR="10.2.2.3")
    assert own.post("/accounts/login/", {"username": "alice",
                                         "password": "correct horse battery staple"}).status_code == 302
    # ... and another account from the stranger's address is not held by alice's count.
    bob = get_user_model().objects.create_user("bob2", password="another fine password 42")
    response = client.post("/accounts/login/", {"username": bob.username, "password": "another fine password 42"})
    assert response.status_code == 302


def test_a_user_name_written_otherwise_and_a_neighbouring_ipv6_address_share_the_count(settings, user):
    """The count is keyed by the name as the sign-in form reads it (NFKC, stripped, any case) and by the client's
    IPv6 /64: "ALICE", " alice" or the full-width "ａｌｉｃｅ" from the next address of the same /64 is no fresh count
    of ten guesses."""
    settings.LOGIN_FAILURES = "3/h"
    for i, name in enumerate(["alice", "ALICE ", "\uff41\uff4c\uff49\uff43\uff45"]):
        response = Client(REMOTE_ADDR=f"2001:db8:9:9::{i + 1}").post("/accounts/login/",
                                                                      {"username": name, "password": "wrong"})
        assert response.status_code == 200
    blocked = Client(REMOTE_ADDR="2001:db8:9:9::ff").post("/accounts/login/", {
        "username": " Alice", "password": "correct horse battery staple"})
    assert blocked.status_code == 429
    assert Client(REMOTE_ADDR="2001:db8:9:a::1").post("/accounts/login/", {
        "username": "alice", "password": "correct horse battery staple"}).status_code == 302  # another /64


def test_one_address_trying_many_names_is_held(settings, user):
    """Guessing over many user names from one address is bounded by LOGIN_FAILURES_PER_IP."""
    settings.LOGIN_FAILURES_PER_IP = "4/h"
    client = Client(REMOTE_ADDR="10.2.3.4")
    codes = [client.post("/accounts/login/", {"username": f"u{i}", "password": "x"}).status_code for i in range(5)]
    assert codes == [200, 200, 200, 200, 429]
    assert Client(REMOTE_ADDR="10.2.3.5").post("/accounts/login/", {
        "username": "alice", "password": "correct horse battery staple"}).status_code == 302
