"""HTML and JSON go out gzip-compressed (issue 33 item 9: a 52.7 KB sizing page was sent as it is), static
files stay WhiteNoise's (pre-compressed, immutable-cached: ``test_static_compressed.py``), and the browser
receives the page compressed from the live server.

The BREACH reasoning (why compressing pages with a CSRF token is safe here) is in ``config/settings.py`` next to
the middleware and in docs/operations.md, "Compression"; the test checks its two premises: the CSRF token in a
page differs from one response to the next, and so does the compressed body's length padding.
"""

from __future__ import annotations

import gzip
import re

import pytest
from django.test import Client

GZIP = {"HTTP_ACCEPT_ENCODING": "gzip, deflate, br"}


def _body(response) -> bytes:
    raw = b"".join(response.streaming_content) if response.streaming else response.content
    return gzip.decompress(raw) if response.get("Content-Encoding") == "gzip" else raw


@pytest.mark.django_db
def test_the_sizing_page_is_sent_gzip_compressed():
    response = Client().get("/", **GZIP)
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in response["Vary"]
    html = _body(response)
    assert b"How much KV cache" in html
    assert len(response.content) < len(html) / 3, f"{len(response.content):,} bytes for {len(html):,}"
    plain = Client().get("/")  # a client that does not ask for gzip gets the page as it is
    assert "Content-Encoding" not in plain and plain.content == html


@pytest.mark.django_db
def test_json_answers_are_sent_gzip_compressed():
    response = Client().post("/api/plan/", {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"},
                             content_type="application/json", **GZIP)
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert b'"num_gpu_blocks"' in _body(response)


@pytest.mark.django_db
def test_each_response_masks_its_csrf_token_and_pads_its_body_anew(django_user_model):
    user = django_user_model.objects.create(username="breach")
    client = Client()
    client.force_login(user)
    pages = [client.get("/accounts/", **GZIP) for _ in range(5)]
    tokens = {re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', _body(p)).group(1) for p in pages}
    assert len(tokens) == 5, "Django masks the CSRF token with new random bytes in every response"
    assert all(p.content[3] & 0x08 for p in pages), "each gzip body carries a random-length file name (padding)"
    assert len({len(p.content) for p in pages}) > 1, "so the compressed length varies for the same page"


def test_the_browser_receives_pages_compressed(page, live_server):
    response = page.goto("/")
    assert response.ok
    assert response.headers.get("content-encoding") == "gzip"
