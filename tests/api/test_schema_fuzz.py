"""Property-based fuzz of the whole API against its own OpenAPI schema (schemathesis).

Every operation in ``/api/schema/`` is called through the WSGI app (no server, the test
database), once as an anonymous client and once with an API token, with both valid
("positive") and invalid ("negative") inputs generated from the schema (anonymously, the operations that
need a signed-in user get a few: they answer 401 before reading any input). Checks: no 5xx
ever, every documented response conforms to its schema, and every 4xx is JSON in the
error shape ``{"errors": {field: [messages]}}``.

Bounded: ``FUZZ_MAX_EXAMPLES`` examples per operation, mode and generation method (default 20
with ``KVP_HYPOTHESIS_BUDGET=full``, as in CI; a quarter, 5, in a quick local run, like the other
property tests), derandomized so a run is reproducible; set ``FUZZ_SEED_RANDOM=1`` to
explore new inputs. The figures (operations, cases, status codes) are printed in the
terminal summary.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from django.urls import Resolver404, resolve
from hypothesis import HealthCheck, reject, settings
from rest_framework.throttling import SimpleRateThrottle
from schemathesis.checks import ALL_CHECKS, not_a_server_error, response_schema_conformance

from config.wsgi import application

#: The suite's budget switch (tests/conftest.py): CI's full budget, or a quarter of it locally.
FULL_BUDGET = os.environ.get("KVP_HYPOTHESIS_BUDGET", "") == "full"
MAX_EXAMPLES = int(os.environ.get("FUZZ_MAX_EXAMPLES", "20" if FULL_BUDGET else "5"))
DERANDOMIZE = os.environ.get("FUZZ_SEED_RANDOM", "") not in {"1", "true", "yes"}


def error_shape_conformance(response, case) -> None:
    """Every 4xx answer is JSON in the one documented shape ``{"errors": {field: [messages]}}``."""
    if not 400 <= response.status_code < 500:
        return None
    content_type = response.headers.get("Content-Type", "")
    assert content_type.startswith("application/json"), f"{response.status_code} answered {content_type!r}, not JSON"
    body = response.json
    body = body() if callable(body) else body
    assert isinstance(body, dict) and set(body) == {"errors"}, f"not the error shape: {str(body)[:300]}"
    errors = body["errors"]
    assert isinstance(errors, dict) and errors, f"empty or non-object errors: {str(body)[:300]}"
    for field, messages in errors.items():
        assert isinstance(messages, list) and messages and all(isinstance(m, str) for m in messages), (
            f"errors[{field!r}] is not a non-empty list of strings: {str(messages)[:300]}"
        )
    return None


CHECKS = (not_a_server_error, response_schema_conformance, error_shape_conformance)
FORM_MEDIA_TYPES = {"application/x-www-form-urlencoded", "multipart/form-data"}

#: (mode, "METHOD /path") -> cases sent; (mode, status) -> responses. Read by the summary hook.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

FIGURES: dict[str, Counter] = {"cases": Counter(), "statuses": Counter()}


@pytest.fixture
def api_schema(db, monkeypatch):
    """The live schema, loaded through the WSGI app, with throttling off for the fuzz.

    The real WSGI handler closes "old" database connections at the end of each request;
    inside the test's transaction that would close the connection under it (PostgreSQL),
    so, as Django's own test client does, that signal handler is disconnected meanwhile.
    """
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"anon": None, "user": None})
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.from_wsgi("/api/schema/?format=json", application)
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


schema = schemathesis.from_pytest_fixture(
    "api_schema",
    data_generation_methods=[
        schemathesis.DataGenerationMethod.positive,
        schemathesis.DataGenerationMethod.negative,
    ],
)

FUZZ_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=DERANDOMIZE,
    database=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)


def _run(case, mode: str, headers: dict[str, str] | None = None):
    if case.media_type in FORM_MEDIA_TYPES and not isinstance(case.body, dict):
        reject()  # a form body is key=value pairs: a bare list or scalar cannot be sent as one
    response = case.call_wsgi(headers=headers)
    FIGURES["cases"][(mode, f"{case.method} {case.path}")] += 1
    FIGURES["statuses"][(mode, response.status_code)] += 1
    case.validate_response(response, checks=CHECKS)
    return response


def anonymous_allowed(ctx) -> bool:
    """Whether the schema lets an anonymous client call the operation (its ``security`` lists ``{}``, or is absent)."""
    security = ctx.operation.definition.raw.get("security")
    return security is None or {} in security


@schema.include(anonymous_allowed).parametrize()
@FUZZ_SETTINGS
def test_fuzz_anonymous(case):
    _run(case, "anonymous")


#: An operation that needs a signed-in user (most of them) answers an anonymous client before its view reads the
#: query or the body (DRF authenticates and checks permissions first; the middleware reads neither): the same 401
#: (403 where session authentication comes first) whatever the input. A few cases check that answer (its schema,
#: its error shape, and that it is the refusal); the full budget spent 20 positive and 20 negative cases on it.
SIGN_IN_EXAMPLES = min(MAX_EXAMPLES, 4 if FULL_BUDGET else 2)


@schema.exclude(anonymous_allowed).parametrize()
@settings(FUZZ_SETTINGS, max_examples=SIGN_IN_EXAMPLES)
def test_fuzz_anonymous_where_sign_in_is_needed(case):
    response = _run(case, "anonymous")
    if response.status_code == 404:  # a path parameter the URL patterns refuse: no view ran
        with pytest.raises(Resolver404):
            resolve(case.formatted_path)
        return
    assert response.status_code in (401, 403), (case.method, case.path, response.status_code)


@pytest.fixture
def fuzz_token(db, django_user_model) -> str:
    from accounts.services import api_token_create

    user, _ = django_user_model.objects.get_or_create(username="fuzzer")
    _, raw = api_token_create(user=user, name=f"fuzz {user.api_tokens.count()}")
    return raw


@schema.parametrize()
@FUZZ_SETTINGS
def test_fuzz_with_token(case, fuzz_token):
    _run(case, "token", headers={"Authorization": f"Token {fuzz_token}"})


#: ``--checks all`` (schemathesis's every check) with a reduced budget (4 in CI, 2 locally): the documented statuses, content types,
#: headers and schemas, and invalid input refused. A large budget: ``bench/fuzz_api.py`` (docs/operations.md).
ALL_CHECKS_EXAMPLES = int(os.environ.get("FUZZ_ALL_CHECKS_EXAMPLES", "4" if FULL_BUDGET else "2"))
#: ``ignored_auth`` is left out: it reads the token this test passes on each call as one schemathesis generated
#: (so "invalid"), and the catalog's reads are public by design (signed-in users may also call them).
ALL_CHECKS_BUT_AUTH = tuple(c for c in ALL_CHECKS if c.__name__ != "ignored_auth")


@schema.parametrize()
@settings(max_examples=ALL_CHECKS_EXAMPLES, deadline=None, derandomize=DERANDOMIZE, database=None,
          suppress_health_check=list(HealthCheck), print_blob=True)
def test_fuzz_all_checks(case, fuzz_token):
    if case.media_type in FORM_MEDIA_TYPES and not isinstance(case.body, dict):
        reject()
    response = case.call_wsgi(headers={"Authorization": f"Token {fuzz_token}"})
    FIGURES["cases"][("all-checks", f"{case.method} {case.path}")] += 1
    FIGURES["statuses"][("all-checks", response.status_code)] += 1
    case.validate_response(response, checks=(*ALL_CHECKS_BUT_AUTH, error_shape_conformance))
