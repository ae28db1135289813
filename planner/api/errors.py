"""One JSON error shape for the whole API: ``{"errors": {field: [messages]}}``.

Errors that do not belong to a field go under ``"non_field_errors"``; the HTTP
status is always a 4xx for bad input. Unexpected exceptions are logged and
answered with a 500 in the same shape, but no input should reach that path.
"""

from __future__ import annotations

import logging

from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

logger = logging.getLogger(__name__)


def _as_field_errors(detail) -> dict[str, list[str]]:
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            if isinstance(value, dict):
                for sub, msgs in _as_field_errors(value).items():
                    out[f"{key}.{sub}"] = msgs
            elif isinstance(value, list) and value and isinstance(value[0], dict):
                for i, item in enumerate(value):
                    for sub, msgs in _as_field_errors(item).items():
                        out[f"{key}[{i}].{sub}"] = msgs
            elif isinstance(value, list):
                out[str(key)] = [str(v) for v in value]
            else:
                out[str(key)] = [str(value)]
        return out
    if isinstance(detail, list):
        return {"non_field_errors": [str(v) for v in detail]}
    return {"non_field_errors": [str(detail)]}


def exception_handler(exc, context):
    """DRF exception handler producing ``{"errors": {...}}`` for every error."""
    response = drf_exception_handler(exc, context)
    if response is None:
        logger.exception("unhandled API error", exc_info=exc)
        return Response(
            {"errors": {"non_field_errors": ["Internal error; it has been logged."]}},
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    if isinstance(exc, ValidationError):
        response.data = {"errors": _as_field_errors(exc.detail)}
    else:
        detail = response.data.get("detail", response.data) if isinstance(response.data, dict) else response.data
        response.data = {"errors": {"non_field_errors": [str(detail)]}}
    return response
