"""One JSON error shape for the whole API: ``{"errors": {field: [messages]}}``.

Errors that do not belong to a field go under ``"non_field_errors"``; the HTTP
status is always a 4xx for bad input. The one input-error type,
:class:`simulator.base.errors.FieldError` (the planner's
:class:`~planner.errors.InputError` is one), is mapped here once, wherever it was
raised (simulator, services, catalog): 400 with its field messages (``errors``),
or 404 (same shape) when the input names a profile the user may not see. Unexpected exceptions are logged and answered with a 500 in the
same shape, but no input should reach that path.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.fields import get_error_detail
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from simulator.base.errors import FieldError

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


class ReferenceNotFound(APIException):
    """A 404 with field messages: the input names a profile that does not exist for this user."""

    status_code = status.HTTP_404_NOT_FOUND
    default_detail = "Not found."
    default_code = "not_found"

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__()
        self.detail = errors


def input_error_as_api_exception(exc: FieldError) -> APIException:
    """An input error (:class:`~simulator.base.errors.FieldError`, the planner's ``InputError`` among them) as DRF's
    400 with its messages per field (or a 404 for a reference to nothing)."""
    return ReferenceNotFound(exc.errors) if exc.not_found else ValidationError(exc.errors)


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body too large."
    default_code = "payload_too_large"


def _as_api_exception(exc):
    """Django errors that reach a DRF view, as the 4xx they are (not a 500).

    A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413; other suspicious input Django
    refuses (too many fields, bad multipart) a 400; a Django ``ValidationError`` raised
    by a service a 400 with its field messages; an input error (:class:`FieldError`) its 400 or 404.
    """
    if isinstance(exc, FieldError):
        return input_error_as_api_exception(exc)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return PayloadTooLarge(f"Request body too large: the limit is {limit} bytes ({limit / 2**20:g} MiB).")
    if isinstance(exc, SuspiciousOperation):
        return ParseError(str(exc) or "Bad request.")
    if isinstance(exc, DjangoValidationError):
        return ValidationError(get_error_detail(exc))
    return exc


def exception_handler(exc, context):
    """DRF exception handler producing ``{"errors": {...}}`` for every error."""
    exc = _as_api_exception(exc)
    response = drf_exception_handler(exc, context)
    if response is None:
        logger.exception("unhandled API error", exc_info=exc)
        return Response(
            {"errors": {"non_field_errors": ["Internal error; it has been logged."]}},
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    if isinstance(exc, (ValidationError, ReferenceNotFound)):
        response.data = {"errors": _as_field_errors(exc.detail)}
    else:
        detail = response.data.get("detail", response.data) if isinstance(response.data, dict) else response.data
        response.data = {"errors": {"non_field_errors": [str(detail)]}}
    return response
