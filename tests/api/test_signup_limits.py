"""Sign-up is throttled per IP and can be closed (issue 37 item 2): 20 accounts with their own quotas were made
in 17.8 s from one address."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.test import Client

from config import throttling

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


def _sign_up(client: Client, name: str):
    return client.post("/accounts/signup/", {"username": name, "password1": PASSWORD, "password2": PASSWORD})


def test_accounts_per_address_are_limited(settings, django_user_model, monkeypatch):
    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: 1_800_000_030.0))
    settings.THROTTLE_SIGNUPS = "3/h"
    codes = [_sign_up(Client(REMOTE_ADDR="10.9.9.1"), f"user{i}").status_code for i in range(5)]
    assert codes == [302, 302, 302, 429, 429]
    assert django_user_model.objects.filter(username__startswith="user").count() == 3
    refused = _sign_up(Client(REMOTE_ADDR="10.9.9.1"), "late")
    assert int(refused["Retry-After"]) > 0
    assert _sign_up(Client(REMOTE_ADDR="10.9.9.2"), "elsewhere").status_code == 302  # another address
    # A form with errors creates nothing and does not count.
    assert Client(REMOTE_ADDR="10.9.9.3").post("/accounts/signup/", {"username": ""}).status_code == 200


def test_sign_up_can_be_closed(settings, django_user_model):
    settings.SIGNUP_OPEN = False
    page = Client().get("/accounts/signup/")
    assert page.status_code == 403 and b"Sign-up is closed" in page.content and b"<form" not in page.content
    assert _sign_up(Client(), "nobody").status_code == 403
    assert not django_user_model.objects.filter(username="nobody").exists()


def test_an_ipv6_host_is_one_address_for_the_limit(settings, django_user_model, monkeypatch):
    """A host given an IPv6 /64 holds 2**64 addresses: counted apart, each sign-up could come from a fresh one.
    The addresses of one /64 share one count; another /64 has its own."""
    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: 1_800_000_030.0))
    settings.THROTTLE_SIGNUPS = "2/h"
    codes = [_sign_up(Client(REMOTE_ADDR=f"2001:db8:1:2::{i:x}"), f"v6user{i}").status_code for i in range(1, 5)]
    assert codes == [302, 302, 429, 429]
    assert _sign_up(Client(REMOTE_ADDR="2001:db8:1:3::1"), "v6other").status_code == 302


@pytest.mark.parametrize(("text", "counted_as"), [
    ("203.0.113.7", "203.0.113.7"),
    ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
    ("2001:DB8:1:2::1", "2001:db8:1:2::/64"),
    ("::ffff:203.0.113.7", "203.0.113.7"),  # IPv4-mapped: the IPv4 client it is
    ("fe80::1%eth0", "fe80::/64"),
    ("not an address", "not an address"),
    ("x" * 500, "x" * 100),
    ("", "unknown"),
])
def test_client_addresses(text, counted_as):
    assert throttling.client_address(text) == counted_as
