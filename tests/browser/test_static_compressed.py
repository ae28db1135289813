"""Static files go out compressed after ``collectstatic`` (whitenoise's compressed manifest storage).

Plotly's bundle is 1.4 MB; the pages that draw a chart must not send it uncompressed.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client


@pytest.mark.django_db
def test_plotly_is_served_gzip_compressed_with_a_hashed_name(settings, tmp_path):
    settings.STATIC_ROOT = tmp_path / "static"
    settings.WHITENOISE_USE_FINDERS = False  # serve what collectstatic wrote, as in production
    settings.STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder"]  # the site's own files
    call_command("collectstatic", "--no-input", "--verbosity", "0")
    from django.contrib.staticfiles.storage import staticfiles_storage

    from planner.plotly_assets import PLOTLY_JS

    url = staticfiles_storage.url(PLOTLY_JS)
    assert url != f"/static/{PLOTLY_JS}" and url.endswith(".js"), "a content-hashed, cacheable name"
    response = Client().get(url, HTTP_ACCEPT_ENCODING="gzip, deflate")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    size = int(response["Content-Length"])
    assert size < 2_000_000, f"Plotly sent as {size:,} bytes"
    assert "max-age=315360000" in response["Cache-Control"], "hashed names are cached for ever"
