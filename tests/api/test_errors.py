"""One JSON error shape everywhere under /api/: bad JSON, too-large bodies, unknown URLs, crashes.

The shape is ``{"errors": {field: [messages]}}``; errors that are not about one field
go under ``non_field_errors``.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client, override_settings
from rest_framework import status

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("_probe_urls")]


@pytest.fixture
def _probe_urls():
    with override_settings(ROOT_URLCONF="tests.api.probe_urls"):
        yield


def assert_error_shape(response, status_code: int) -> dict:
    assert response.status_code == status_code, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert set(body) == {"errors"} and body["errors"]
    for field, messages in body["errors"].items():
        assert isinstance(field, str)
        assert isinstance(messages, list) and messages and all(isinstance(m, str) for m in messages)
    return body["errors"]


def test_malformed_json_is_400(token_client):
    response = token_client.post("/api/_probe/", "{not json", content_type="application/json")
    errors = assert_error_shape(response, status.HTTP_400_BAD_REQUEST)
    assert "JSON parse error" in errors["non_field_errors"][0]


def test_unsupported_media_type_is_415(token_client):
    response = token_client.post("/api/_probe/", "a,b\n1,2", content_type="text/csv")
    assert_error_shape(response, status.HTTP_415_UNSUPPORTED_MEDIA_TYPE)


def test_a_body_over_the_limit_is_413_not_500(token_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    body = json.dumps({"x": "a" * 2048})
    response = token_client.post("/api/_probe/", body, content_type="application/json")
    errors = assert_error_shape(response, status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    assert "1024 bytes" in errors["non_field_errors"][0]


def test_the_real_limit_is_5_mib(token_client):
    body = json.dumps({"x": "a" * (5 * 2**20)})
    response = token_client.post("/api/_probe/", body, content_type="application/json")
    assert_error_shape(response, status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)


def test_a_form_body_over_the_limit_is_413_too(token_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    response = token_client.post("/api/_probe/", {"x": "a" * 2048}, format="multipart")
    assert_error_shape(response, status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)


def test_unknown_api_url_is_json_404(anon_client):
    for url in ("/api/nope/", "/api/", "/api/models/x/y/z/does-not-exist/"):
        errors = assert_error_shape(anon_client.get(url), status.HTTP_404_NOT_FOUND)
        assert "/api/docs/" in errors["non_field_errors"][0]


def test_unknown_page_outside_the_api_stays_html():
    response = Client().get("/no-such-page/")
    assert response.status_code == 404
    assert not response["Content-Type"].startswith("application/json")


def test_method_not_allowed_is_405_in_the_shape(token_client):
    assert_error_shape(token_client.delete("/api/_probe/"), status.HTTP_405_METHOD_NOT_ALLOWED)


def test_a_crash_is_a_json_500_that_hides_the_details(caplog):
    response = Client(raise_request_exception=False).get("/api/_crash/")
    errors = assert_error_shape(response, status.HTTP_500_INTERNAL_SERVER_ERROR)
    assert "boom" not in json.dumps(errors)


def test_the_django_level_400_is_json_under_api(rf):
    from django.core.exceptions import RequestDataTooBig, SuspiciousOperation

    from planner.api.handlers import bad_request, permission_denied, server_error

    request = rf.get("/api/plan/")
    assert_error_shape(bad_request(request, RequestDataTooBig("x")), 413)
    assert_error_shape(bad_request(request, SuspiciousOperation("x")), 400)
    assert_error_shape(permission_denied(request, Exception("x")), 403)
    assert_error_shape(server_error(request), 500)


def test_a_bad_host_is_json_400_under_api():
    response = Client(raise_request_exception=False).get("/api/_probe/", HTTP_HOST="evil.example")
    assert_error_shape(response, status.HTTP_400_BAD_REQUEST)


def test_django_validation_errors_from_services_are_400_by_field():
    from django.core.exceptions import ValidationError

    from planner.api.errors import exception_handler

    response = exception_handler(ValidationError({"gpu": ["Unknown GPU 'x'."]}), {})
    assert response.status_code == 400
    assert response.data == {"errors": {"gpu": ["Unknown GPU 'x'."]}}
