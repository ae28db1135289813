"""OpenAPI post-processing: every operation documents the error statuses it can answer, in the error shape.

drf-spectacular documents the success answer of each operation and, where a view
says so, a 400. Every operation can also answer the project's cross-cutting
errors (``planner.api.errors``, ``planner.api.handlers``, ``config.throttling``):

- 400 bad input (any operation with a body or query parameters, and a bad Host);
- 401 / 403 failed or missing authentication, or another user's object;
- 404 an unknown object, or a page past the end of a list;
- 413 a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` and 415 a media type it does not
  take (operations with a body);
- 429 a rate limit or a quota;
- 503 the service is busy: more waits for a web worker than it can serve in time (``config.shedding``).

This hook adds them, each pointing at one ``ErrorResponse`` component
(``{"errors": {field: [messages]}}``), so that clients and schemathesis's
``status_code_conformance`` see every status an operation returns.
"""

from __future__ import annotations

ERROR_SCHEMA = {
    "type": "object",
    "required": ["errors"],
    "properties": {"errors": {
        "type": "object", "minProperties": 1,
        "description": "Messages per field; errors about no one field are under non_field_errors.",
        "additionalProperties": {"type": "array", "minItems": 1, "items": {"type": "string"}}}},
    "example": {"errors": {"workload.spec.n": ["at most 100,000 requests per sweep workload, got 200,000"]}},
}

DESCRIPTIONS = {
    400: "Bad input: a message per field.",
    401: "Not signed in, or an invalid token.",
    403: "Not allowed: another user's object, or a write without sign-in.",
    404: "No such object.",
    413: "Request body too large.",
    415: "Unsupported media type.",
    429: "Rate limit or quota reached; see the Retry-After header.",
    503: "The service is busy (load shedding, KVP_SHED_WAIT_S); try again after the Retry-After header's seconds.",
}


def _statuses(path: str, operation: dict) -> list[int]:
    codes = [400, 401, 403, 404, 429, 503]  # 404: an unknown object, or a page past the last of a list
    if "requestBody" in operation:
        codes += [413, 415]
    return sorted(codes)


def _is_generic(response: dict) -> bool:
    """A 4xx documented without a useful schema (``OpenApiTypes.OBJECT`` or none)."""
    content = response.get("content") or {}
    schemas = [c.get("schema") or {} for c in content.values()]
    return not schemas or all(s in ({}, {"type": "object"}, {"type": "object", "additionalProperties": {}})
                              for s in schemas)


def document_error_statuses(result, generator, request, public):
    """drf-spectacular ``POSTPROCESSING_HOOKS`` entry (see the module docstring)."""
    result.setdefault("components", {}).setdefault("schemas", {})["ErrorResponse"] = ERROR_SCHEMA
    ref = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
    for path, item in (result.get("paths") or {}).items():
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            responses = operation.setdefault("responses", {})
            for code in _statuses(path, operation):
                existing = responses.get(str(code))
                if existing is None or _is_generic(existing):
                    responses[str(code)] = {"description": (existing or {}).get("description") or DESCRIPTIONS[code],
                                            "content": ref}
    return result
