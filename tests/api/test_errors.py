"""One JSON error shape everywhere under /api/: bad JSON, too-large bodies, unknown URLs, crashes.

The shape is ``{"errors": {field: [messages]}}``; errors that are not about one field
go under ``non_field_errors``.
"""

from __future__ import annotations

import json
import time

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


# --------------------------------------------------------------------------- issue 23: inputs that were 500s

ISSUE_23_BODY = '{"engine":{"num_gpu_blocks":2000},"workload":{"spec":{"n":5000,"output":"const:10000000"},"seed":0}}'


def test_the_issue_s_130_byte_simulation_is_refused_in_under_a_second(token_client):
    """~22 GB in a web process before (8 bytes x requests x tokens / block size); now priced and refused."""
    assert len(ISSUE_23_BODY) < 131
    token_client.get("/api/simulations/")  # the first request of a process loads the URLs and the views
    start = time.process_time()  # this process's CPU: a loaded machine's waits for a core are not the refusal's
    response = token_client.post("/api/simulations/", ISSUE_23_BODY, content_type="application/json")
    elapsed = time.process_time() - start
    errors = assert_error_shape(response, status.HTTP_400_BAD_REQUEST)
    message = errors["workload"][0]
    assert "memory" in message and "the limit is 2.0 GiB" in message and "GiB" in message.split("about")[1]
    assert elapsed < 1.0, elapsed


def test_the_same_workload_as_a_sweep_is_refused_before_it_reaches_a_worker(token_client):
    body = {"engine": {"num_gpu_blocks": 2000}, "workload": {"spec": {"n": 5000, "output": "const:10000000"}},
            "axes": [{"param": "num_gpu_blocks", "values": [2000, 4000]}]}
    response = token_client.post("/api/sweeps/", body, format="json")
    errors = assert_error_shape(response, status.HTTP_400_BAD_REQUEST)
    assert "Sweep point num_gpu_blocks=2000" in errors["workload"][0] and "memory" in errors["workload"][0]
    from planner.models import Sweep

    assert not Sweep.objects.exists()


def test_fifty_million_blocks_are_refused_as_too_much_memory(token_client):
    body = {"engine": {"num_gpu_blocks": 50_000_000}, "workload": {"spec": {"n": 10}}}
    errors = assert_error_shape(token_client.post("/api/simulations/", body, format="json"), 400)
    assert "3.4 GiB of memory (the limit is 2.0 GiB)" in errors["workload"][0]


def test_a_long_simulation_is_refused_by_its_estimated_time(token_client, settings):
    """Priced at about 188 s: over the inline bound it would run on a worker, so the chunk limit refuses it."""
    settings.KVP_CHUNK_MAX_SECONDS = 1
    body = {"engine": {"num_gpu_blocks": 4000, "max_num_seqs": 8},
            "workload": {"spec": {"n": 5000, "prompt": "const:1000", "output": "const:2000"}}}
    errors = assert_error_shape(token_client.post("/api/simulations/", body, format="json"), 400)
    assert "(the limit is 1.0 s)" in errors["workload"][0] and "/api/sweeps/" in errors["workload"][0]


@pytest.mark.parametrize("url", ["/api/plan/", "/api/sweeps/", "/api/simulations/", "/api/replicas/",
                                 "/api/models/import/", "/api/_probe/"])
def test_json_nested_a_thousand_deep_is_400_not_a_recursion_error(token_client, url):
    body = '{"model": ' + "[" * 1000 + "]" * 1000 + "}"
    assert len(body) < 6 * 1024
    errors = assert_error_shape(token_client.post(url, body, content_type="application/json"), 400)
    assert "nested too deeply: at most 32 levels" in " ".join(sum(errors.values(), []))


def test_nesting_up_to_the_limit_is_accepted(token_client):
    body = {"x": json.loads("[" * 31 + "]" * 31)}
    assert token_client.post("/api/_probe/", body, format="json").status_code == 201


@pytest.mark.parametrize(("url", "body", "field"), [
    ("/api/plan/", {"model": "llama\u00003", "gpu": "h100-sxm5-80gb"}, "model"),
    ("/api/sweeps/", {"name": "a\u0000b", "engine": {"num_gpu_blocks": 100}, "workload": {"spec": {"n": 5}},
                      "axes": [{"param": "num_gpu_blocks", "values": [100, 200]}]}, "name"),
    ("/api/simulations/", {"engine": {"num_gpu_blocks": 100}, "workload": {"spec": {"n": 5, "prompt": "c\u0000"}}},
     "workload.spec.prompt"),
])
def test_a_nul_character_is_400_naming_the_field(token_client, url, body, field):
    errors = assert_error_shape(token_client.post(url, body, format="json"), 400)
    assert "NUL" in errors[field][0]


@pytest.mark.parametrize("url", ["/api/plan/", "/api/sweeps/", "/api/models/import/"])
def test_a_lone_surrogate_is_400_naming_the_field(token_client, url):
    body = '{"name": "x\\ud800y", "model": "m"}'
    errors = assert_error_shape(token_client.post(url, body, content_type="application/json"), 400)
    assert "surrogate" in errors["name"][0]


@pytest.mark.parametrize(("url", "body", "field"), [
    ("/api/sweeps/", '{"name": "x", "engine": {"num_gpu_blocks": 1e999}}', "engine.num_gpu_blocks"),
    ("/api/models/import/", '{"config": {"rope_theta": 1e999}}', "config.rope_theta"),
    ("/api/models/import/", '{"config": {}, "generation_config": {"temperature": 1e999}}',
     "generation_config.temperature"),
])
def test_a_number_too_large_for_a_double_is_400_naming_the_field(token_client, url, body, field):
    """``1e999`` is valid JSON text that Python reads as infinity; stored verbatim, PostgreSQL's jsonb refuses it."""
    errors = assert_error_shape(token_client.post(url, body, content_type="application/json"), 400)
    assert "too large for JSON (e.g. 1e999)" in errors[field][0], errors


def test_a_surrogate_pair_is_ordinary_text(token_client):
    response = token_client.post("/api/_probe/", '{"name": "\\ud83d\\ude00"}', content_type="application/json")
    assert response.status_code == 201 and response.json()["data"]["name"] == "\U0001F600"


def test_invalid_utf8_is_a_parse_error(token_client):
    response = token_client.post("/api/_probe/", b'{"a": "\xff"}', content_type="application/json")
    assert "JSON parse error" in assert_error_shape(response, 400)["non_field_errors"][0]


SIZED = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "workload": {"spec": {"n": 20}},
         "axes": [{"param": "gpu_memory_utilization", "values": [0.8, 0.9]}]}


@pytest.mark.parametrize(("where", "value"), [("engine", 0), ("engine", 3), ("deployment", 3), ("engine", True)])
def test_a_block_size_vllm_refuses_is_400_in_a_sweep(token_client, where, value):
    body = {**SIZED, where: {"block_size": value}}
    errors = assert_error_shape(token_client.post("/api/sweeps/", body, format="json"), 400)
    assert "vLLM's block sizes (1, 8, 16, 32, 64, 128, 256 tokens" in errors[f"{where}.block_size"][0]


def test_a_block_size_axis_takes_only_vllm_sizes(token_client):
    body = {"engine": {"num_gpu_blocks": 1000}, "workload": {"spec": {"n": 20}},
            "axes": [{"param": "block_size", "values": [16, 24]}]}
    errors = assert_error_shape(token_client.post("/api/sweeps/", body, format="json"), 400)
    assert "got 24" in errors["axes[0].values"][0]


@pytest.mark.parametrize(("value", "code"), [(3, 400), (0, 400), (512, 400), (32, 200), (256, 200), (1, 200)])
def test_plan_takes_the_block_sizes_vllm_takes(anon_client, value, code):
    body = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "block_size": value}
    response = anon_client.post("/api/plan/", body, format="json")
    assert response.status_code == code, response.content[:300]
    if code == 400:
        assert "vLLM" in response.json()["errors"]["block_size"][0]
