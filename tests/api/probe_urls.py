"""A URLconf for the API's cross-cutting tests: the real one plus probe endpoints.

The probes are tiny DRF views with the project's default authentication, permission,
throttling, parsing and error handling, so auth, CSRF, limits and error shape are
tested without depending on any one feature's endpoint.
"""

from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from config.urls import handler400, handler403, handler404, handler500  # noqa: F401
from config.urls import urlpatterns as _real


class ProbeView(APIView):
    """GET is public; POST needs a signed-in user and echoes the parsed body."""

    def get(self, request):
        return Response({"ok": True, "user": request.user.username or None})

    def post(self, request):
        return Response({"user": request.user.username, "data": request.data}, status=201)


class CrashView(APIView):
    permission_classes: list = []

    def get(self, request):
        raise RuntimeError("boom")


urlpatterns = [
    path("api/_probe/", ProbeView.as_view()),
    path("api/_crash/", CrashView.as_view()),
    *_real,
]
