"""Static files go out compressed after ``collectstatic`` (whitenoise's compressed manifest storage).

Plotly is 4.8 MB; the pages that draw a chart must not send it uncompressed.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client


@pytest.mark.django_db
def test_plotly_is_served_gzip_compressed_with_a_hashed_name(settings, tmp_path):
    settings.STATIC_ROOT = tmp_path / "static"
    settings.WHITENOISE_USE_FINDERS = False  # serve what collectstatic wrote, as in production
    # only Plotly's bundle (the whole site's static files take ~30 s to compress on 2 cores)
    settings.STATICFILES_DIRS = [entry for entry in settings.STATICFILES_DIRS
                                 if isinstance(entry, tuple) and entry[0] == "plotly"]
    settings.STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder"]
    call_command("collectstatic", "--no-input", "--verbosity", "0", "--ignore", "datasets",
                 "--ignore", "widgetbundle.js", "--ignore", "templates")
    from django.contrib.staticfiles.storage import staticfiles_storage

    url = staticfiles_storage.url("plotly/plotly.min.js")
    assert url != "/static/plotly/plotly.min.js" and url.endswith(".js"), "a content-hashed, cacheable name"
    response = Client().get(url, HTTP_ACCEPT_ENCODING="gzip, deflate")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    size = int(response["Content-Length"])
    assert size < 2_000_000, f"Plotly sent as {size:,} bytes"
    assert "max-age=315360000" in response["Cache-Control"], "hashed names are cached for ever"
