"""Rate limits that hold across processes: API scopes, HTML pages and failed sign-ins.

Every counter lives in Django's default cache, which ``config/settings.py``
points at Redis when ``REDIS_URL`` is set (else a file cache shared by the
processes of one host), so gunicorn's workers count together.

The client is the signed-in user, else its IP address: ``REMOTE_ADDR``, or the
address ``NUM_PROXIES`` hops from the right of ``X-Forwarded-For`` when the
site runs behind that many trusted proxies (a client cannot choose its own
address by sending the header; with ``NUM_PROXIES`` 0 the header is ignored).

- API: DRF's ``anon`` / ``user`` rates for every operation, plus ``heavy``
  (:class:`HeavyRateThrottle`) for the operations that simulate in the request.
- Pages: :class:`PageThrottleMiddleware`, ``THROTTLE_PAGES`` per client for
  every page outside ``/api/``, ``/static/`` and ``/healthz``, and
  ``THROTTLE_HEAVY_PAGES`` for a submitted replicas search; past it a 429 page
  with ``Retry-After``.
- Sign-in: :func:`login_blocked` / :func:`login_failed`, ``LOGIN_FAILURES``
  failed attempts per client IP and per user name in a window.
"""

from __future__ import annotations

import time

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


def client_ip(request) -> str:
    """The client's address: ``REMOTE_ADDR``, or ``X-Forwarded-For`` read behind ``NUM_PROXIES`` proxies."""
    remote = request.META.get("REMOTE_ADDR", "") or "unknown"
    proxies = int(getattr(settings, "NUM_PROXIES", 0) or 0)
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies <= 0 or not forwarded:
        return remote
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    return hops[-min(proxies, len(hops))] if hops else remote


def client_key(request) -> str:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"user-{user.pk}"
    return f"ip-{client_ip(request)}"


def hit(scope: str, ident: str, rate: str) -> int | None:
    """Count one request of ``ident`` in ``scope``; the seconds to wait when over ``rate``, else None.

    A fixed window: ``cache.add`` starts it, ``cache.incr`` counts (atomic on Redis).
    """
    limit, period = parse_rate(rate)
    window = int(time.time() // period)
    key = f"kvp:throttle:{scope}:{ident}:{window}"
    if cache.add(key, 1, timeout=period + 1):
        count = 1
    else:
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=period + 1)
            count = 1
    if count > limit:
        return max(1, int((window + 1) * period - time.time()) + 1)
    return None


class HeavyRateThrottle(SimpleRateThrottle):
    """``heavy`` rate for views that set ``heavy_throttle = True`` (they simulate inside the request)."""

    scope = "heavy"

    def get_rate(self):
        return self.THROTTLE_RATES.get(self.scope)  # unset: no extra limit

    def allow_request(self, request, view):
        if not getattr(view, "heavy_throttle", False) or request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return super().allow_request(request, view)

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": client_key(request)}


def _too_many(wait: int, what: str) -> HttpResponse:
    body = (f"<!doctype html><title>Too many requests</title><h1>Too many requests</h1>"
            f"<p>{escape(what)} Try again in {wait} s.</p>")
    response = HttpResponse(body, status=429, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(wait)
    return response


_EXEMPT = ("/api/", "/static/", "/healthz")


class PageThrottleMiddleware:
    """Rate-limit every HTML page per client (see the module docstring)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        path = request.path
        if not path.startswith(_EXEMPT) and path != "/api":
            ident = client_key(request)
            wait = hit("pages", ident, settings.THROTTLE_PAGES)
            if wait is None and path.startswith("/replicas/") and request.GET.get("rate"):
                wait = hit("heavy-pages", ident, settings.THROTTLE_HEAVY_PAGES)
            if wait is not None:
                return _too_many(wait, "This client sent more requests than the site allows per minute.")
        return self.get_response(request)


def _login_keys(request, username: str) -> list[str]:
    return [f"ip-{client_ip(request)}", f"name-{(username or '').strip().lower()[:150]}"]


def login_blocked(request, username: str) -> int | None:
    """Seconds to wait when this IP or this user name has used up its failed sign-ins, else None."""
    limit, period = parse_rate(settings.LOGIN_FAILURES)
    window = int(time.time() // period)
    for ident in _login_keys(request, username):
        if (cache.get(f"kvp:throttle:login-failed:{ident}:{window}") or 0) >= limit:
            return max(1, int((window + 1) * period - time.time()) + 1)
    return None


def login_failed(request, username: str) -> None:
    """Count one failed sign-in for this IP and this user name."""
    for ident in _login_keys(request, username):
        hit("login-failed", ident, settings.LOGIN_FAILURES)


def too_many_logins(wait: int) -> HttpResponse:
    return _too_many(wait, "Too many failed sign-ins from this address or for this user name.")
