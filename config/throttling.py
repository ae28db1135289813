"""Rate limits that hold across processes: API scopes, HTML pages and failed sign-ins.

Every counter lives in Django's default cache, which ``config/settings.py``
points at Redis when ``REDIS_URL`` is set (else a file cache shared by the
processes of one host), so gunicorn's workers count together.

The client is the signed-in user, else its IP address: ``REMOTE_ADDR``, or the
address ``NUM_PROXIES`` hops from the right of ``X-Forwarded-For`` when the
site runs behind that many trusted proxies (a client cannot choose its own
address by sending the header; with ``NUM_PROXIES`` 0 the header is ignored).

- API: ``anon`` / ``user`` rates for every operation (:class:`AnonRateThrottle`, :class:`UserRateThrottle`),
  plus ``heavy`` (:class:`HeavyRateThrottle`) for the operations that simulate in the request; all three
  count with :func:`hit` (shared atomic counters in a sliding window), not DRF's read-modify-write list.
- Pages: :class:`PageThrottleMiddleware`, ``THROTTLE_PAGES`` per client for
  every page outside ``/api/``, ``/static/`` and ``/healthz``, and
  ``THROTTLE_HEAVY_PAGES`` for a submitted replicas search or calibration upload; past it a 429 page
  with ``Retry-After``.
- Sign-up: ``THROTTLE_SIGNUPS`` accounts created per client IP (``accounts.views.signup``, with :func:`hit`).
- Sign-in: :func:`login_blocked` / :func:`login_failed`, ``LOGIN_FAILURES`` failed attempts per client
  IP and user name together, and ``LOGIN_FAILURES_PER_IP`` per client IP over all names, in a window.
"""

from __future__ import annotations

import hashlib
import ipaddress
import time
import unicodedata

from django.conf import settings
from django.core.cache import cache
from django.http import HttpResponse
from django.utils.html import escape
from rest_framework.throttling import SimpleRateThrottle

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """``"300/min"`` -> ``(300, 60)`` (requests, seconds): the period's first letter counts, as in DRF."""
    num, _, period = rate.partition("/")
    return int(num), _PERIODS[period.strip()[0]]


#: Prefix length an IPv6 client is counted by: one host (one subscriber, one cloud VM) is usually given a whole
#: /64, so counting each of its 2**64 addresses apart would let it pick a fresh one for every request.
IPV6_CLIENT_PREFIX = 64


def client_address(text: str) -> str:
    """The address a client is counted by: an IPv4 address as it is, an IPv6 one as its /64 network
    (``2001:db8:1:2::/64``; an IPv4-mapped one as its IPv4 address); text that is no address, cut to 100
    characters."""
    text = (text or "").strip()
    try:
        addr = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return text[:100] or "unknown"
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        return str(ipaddress.ip_network(f"{addr}/{IPV6_CLIENT_PREFIX}", strict=False))
    return str(addr)


def client_ip(request) -> str:
    """The client's address (:func:`client_address`): ``REMOTE_ADDR``, or ``X-Forwarded-For`` read behind
    ``NUM_PROXIES`` proxies."""
    remote = request.META.get("REMOTE_ADDR", "") or "unknown"
    proxies = int(getattr(settings, "NUM_PROXIES", 0) or 0)
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies <= 0 or not forwarded:
        return client_address(remote)
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    return client_address(hops[-min(proxies, len(hops))] if hops else remote)


def client_key(request) -> str:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"user-{user.pk}"
    return f"ip-{client_ip(request)}"


#: Buckets a period is counted in: a limit of N per minute counts in 5 s buckets.
BUCKETS = 12


def _bump(key: str, by: int, timeout: int) -> int:
    """Add ``by`` to the counter ``key`` and return its new value: ``cache.add`` creates it, ``cache.incr``
    counts (one atomic INCRBY on Redis, so concurrent web workers never lose a count)."""
    cache.add(key, 0, timeout=timeout)
    try:
        return cache.incr(key, by)
    except ValueError:  # expired between add and incr
        cache.add(key, 0, timeout=timeout)
        return cache.incr(key, by)


def hit(scope: str, ident: str, rate: str) -> int | None:
    """Count one request of ``ident`` in ``scope``; the seconds to wait when over ``rate``, else None.

    A sliding window held as :data:`BUCKETS` counters per period (5 s buckets for a minute), each a shared
    atomic counter: the request is counted first (``incr``), then the buckets of the last period plus one
    bucket are summed; over the limit, the count is taken back (``decr``) and the request refused. So no
    span of one period ever admits more than the limit, however many processes count at once (two
    requests racing for the last place may both be refused, never both admitted), and a refused request
    does not use up the client's allowance.
    """
    limit, period = parse_rate(rate)
    width = max(1, period // BUCKETS)
    now = time.time()
    current = int(now // width)
    span = -(-period // width) + 1  # buckets covering any span of one period, whatever its phase
    keys = [f"kvp:throttle:{scope}:{ident}:{width}:{b}" for b in range(current - span + 1, current + 1)]
    timeout = (span + 1) * width
    _bump(keys[-1], 1, timeout)
    counts = cache.get_many(keys)
    total = sum(int(counts.get(k) or 0) for k in keys)
    if total <= limit:
        return None
    _bump(keys[-1], -1, timeout)
    # Wait until enough of the oldest buckets have left the window to make room for one more request.
    excess = total - limit
    for i, key in enumerate(keys):
        excess -= int(counts.get(key) or 0)
        if excess <= 0:
            leaves = (current - span + 1 + i + span) * width  # when bucket i is out of the window
            return max(1, int(leaves - now + 0.999))
    return period


class _CountedThrottle(SimpleRateThrottle):
    """A DRF throttle counted by :func:`hit` (DRF's own keeps a list of times in the cache and writes it
    back, so concurrent workers overwrite each other's requests: 796-831 got through against 600/min)."""

    def get_cache_key(self, request, view):  # (DRF's hook; the counting below does not use it)
        return None

    def ident(self, request) -> str | None:
        raise NotImplementedError

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        ident = self.ident(request)
        if ident is None:
            return True
        self._wait = hit(self.scope, ident, self.rate)
        return self._wait is None

    def wait(self):
        return getattr(self, "_wait", None)


class AnonRateThrottle(_CountedThrottle):
    """``anon``: per client IP (:func:`client_ip`) for requests without a signed-in user."""

    scope = "anon"

    def ident(self, request):
        user = getattr(request, "user", None)
        return None if user is not None and user.is_authenticated else f"ip-{client_ip(request)}"


class UserRateThrottle(_CountedThrottle):
    """``user``: per signed-in user (all of the user's tokens and sessions together)."""

    scope = "user"

    def ident(self, request):
        user = getattr(request, "user", None)
        return f"user-{user.pk}" if user is not None and user.is_authenticated else None


class HeavyRateThrottle(_CountedThrottle):
    """``heavy`` rate for views that set ``heavy_throttle = True`` (they simulate inside the request)."""

    scope = "heavy"

    def get_rate(self):
        return self.THROTTLE_RATES.get(self.scope)  # unset: no extra limit

    def ident(self, request):
        return client_key(request)

    def allow_request(self, request, view):
        if not getattr(view, "heavy_throttle", False) or request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return super().allow_request(request, view)


def _too_many(wait: int, what: str) -> HttpResponse:
    body = (f"<!doctype html><title>Too many requests</title><h1>Too many requests</h1>"
            f"<p>{escape(what)} Try again in {wait} s.</p>")
    response = HttpResponse(body, status=429, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(wait)
    return response


_EXEMPT = ("/api/", "/static/", "/healthz")


def _heavy_page(request) -> bool:
    """A page request that simulates: a submitted replicas search, an uploaded calibration (its fit)."""
    path = request.path
    return (path.startswith("/replicas/") and bool(request.GET.get("rate"))) or (
        path == "/calibrations/" and request.method == "POST")


class PageThrottleMiddleware:
    """Rate-limit every HTML page per client (see the module docstring)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        path = request.path
        if not path.startswith(_EXEMPT) and path != "/api":
            ident = client_key(request)
            wait = hit("pages", ident, settings.THROTTLE_PAGES)
            if wait is None and _heavy_page(request):
                wait = hit("heavy-pages", ident, settings.THROTTLE_HEAVY_PAGES)
            if wait is not None:
                return _too_many(wait, "This client sent more requests than the site allows per minute.")
        return self.get_response(request)


def _login_keys(request, username: str) -> list[tuple[str, str]]:
    """``(counter, rate)`` of a sign-in: this address with this user name together (``LOGIN_FAILURES``), and this
    address over all names (``LOGIN_FAILURES_PER_IP``). No counter is per user name alone: one that was let
    anyone lock anyone out by failing ten times with their name."""
    ip = client_ip(request)
    # as the sign-in form reads it (NFKC, stripped) and case-folded: "ＡＬＩＣＥ " is alice's count, not a fresh one
    name = unicodedata.normalize("NFKC", username or "").strip().casefold()[:150]
    name = hashlib.sha256(name.encode("utf-8", "replace")).hexdigest()[:32]
    return [(f"pair-{ip}-{name}", settings.LOGIN_FAILURES),
            (f"ip-{ip}", getattr(settings, "LOGIN_FAILURES_PER_IP", "100/h"))]


def login_blocked(request, username: str) -> int | None:
    """Seconds to wait when this address, for this user name or over all names, has used up its failed
    sign-ins, else None."""
    for ident, rate in _login_keys(request, username):
        limit, period = parse_rate(rate)
        window = int(time.time() // period)
        if (cache.get(f"kvp:throttle:login-failed:{ident}:{window}") or 0) >= limit:
            return max(1, int((window + 1) * period - time.time()) + 1)
    return None


def login_failed(request, username: str) -> None:
    """Count one failed sign-in for this address with this user name, and for this address (fixed windows
    of the rate's period: a lockout ends with its window)."""
    for ident, rate in _login_keys(request, username):
        _, period = parse_rate(rate)
        window = int(time.time() // period)
        _bump(f"kvp:throttle:login-failed:{ident}:{window}", 1, period + 1)


def too_many(wait: int, what: str) -> HttpResponse:
    """The 429 page with ``Retry-After`` (a page's limit: sign-ins, sign-ups)."""
    return _too_many(wait, what)


def too_many_logins(wait: int) -> HttpResponse:
    return _too_many(wait, "Too many failed sign-ins from this address or for this user name.")
