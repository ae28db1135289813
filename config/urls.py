"""Top-level URLs.

Pages: ``/`` sizing (planner.sizing), ``/sweeps/`` and ``/reports/`` (planner.sweeps),
``/catalog/`` (gpuprofiles), ``/accounts/`` (sign in/up, API tokens).
API: everything under ``/api/`` is version 1 (``config.api_urls``).
"""

from django.contrib import admin
from django.urls import include, path

from .health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/", include("config.api_urls")),
    path("accounts/", include("accounts.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("catalog/", include("gpuprofiles.urls")),
    path("", include("planner.urls")),
]

# JSON errors under /api/, Django's pages elsewhere (planner.api.handlers).
handler400 = "planner.api.handlers.bad_request"
handler403 = "planner.api.handlers.permission_denied"
handler404 = "planner.api.handlers.page_not_found"
handler500 = "planner.api.handlers.server_error"
