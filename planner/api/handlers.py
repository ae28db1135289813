"""Django-level error views that answer JSON under ``/api/``.

DRF's exception handler (``planner.api.errors``) covers errors raised inside API
views. These cover what happens outside them: an unknown ``/api/`` URL (404), a
request Django itself rejects before any view runs, such as a body larger than
``DATA_UPLOAD_MAX_MEMORY_SIZE`` or a bad Host (400), a permission error raised
outside DRF (403), and an unexpected crash (500). Pages outside ``/api/`` keep
Django's HTML answers. Wired by ``handler400``..``handler500`` in ``config/urls.py``.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.views import defaults

API_PREFIX = "/api/"


def is_api_request(request) -> bool:
    return request.path.startswith(API_PREFIX) or request.path == API_PREFIX.rstrip("/")


def _json(message: str, status: int, field: str = "non_field_errors") -> JsonResponse:
    return JsonResponse({"errors": {field: [message]}}, status=status)


def too_large_message() -> str:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return f"Request body too large: the limit is {limit} bytes ({limit / 2**20:g} MiB)."


def bad_request(request, exception, template_name=defaults.ERROR_400_TEMPLATE_NAME):
    if is_api_request(request):
        if isinstance(exception, RequestDataTooBig):
            return _json(too_large_message(), 413)
        return _json("Bad request.", 400)
    return defaults.bad_request(request, exception, template_name)


def permission_denied(request, exception, template_name=defaults.ERROR_403_TEMPLATE_NAME):
    if is_api_request(request):
        return _json("You do not have permission to perform this action.", 403)
    return defaults.permission_denied(request, exception, template_name)


def page_not_found(request, exception, template_name=defaults.ERROR_404_TEMPLATE_NAME):
    if is_api_request(request):
        return _json(f"No API endpoint at {request.path}. See /api/docs/ for the list.", 404)
    return defaults.page_not_found(request, exception, template_name)


def server_error(request, template_name=defaults.ERROR_500_TEMPLATE_NAME):
    if is_api_request(request):
        return _json("Internal error; it has been logged.", 500)
    return defaults.server_error(request, template_name)
