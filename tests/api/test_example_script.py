"""examples/plan_and_sweep.py end to end, its HTTP routed into the Django app in-process.

A ``requests`` transport adapter hands each request to Django's test client, so the script
runs unchanged against the real views and the test database. The Celery worker's part is
played by the script's own waits: each ``time.sleep`` runs one pending chunk through
``chunk_run``, the function the worker task calls.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from django.test import Client
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict

from accounts.services import api_token_create
from planner.models import SweepChunk
from planner.sweeps import services

pytestmark = pytest.mark.django_db
SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "plan_and_sweep.py"


class DjangoAdapter(BaseAdapter):
    def __init__(self):
        super().__init__()
        self.client = Client()
        self.calls: list[str] = []

    def send(self, request, **kwargs):
        url = urlsplit(request.url)
        path = url.path + (f"?{url.query}" if url.query else "")
        self.calls.append(f"{request.method} {url.path}")
        extra = {
            f"HTTP_{k.upper().replace('-', '_')}": v
            for k, v in request.headers.items()
            if k.lower() not in {"content-type", "content-length"}
        }
        body = request.body or b""
        content_type = request.headers.get("Content-Type", "application/octet-stream")
        dj = self.client.generic(request.method, path, data=body, content_type=content_type, **extra)
        response = requests.Response()
        response.status_code = dj.status_code
        response.headers = CaseInsensitiveDict(dict(dj.items()))
        content = b"".join(dj.streaming_content) if dj.streaming else dj.content
        if dj.get("Content-Encoding") == "gzip":  # as urllib3 does for requests: the app compresses (GZipMiddleware)
            content = gzip.decompress(content)
        response._content = content
        response.url, response.request = request.url, request
        return response

    def close(self):
        pass


@pytest.fixture
def script(monkeypatch):
    spec = importlib.util.spec_from_file_location("plan_and_sweep", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    adapter = DjangoAdapter()
    real_session = requests.Session

    def session():
        s = real_session()
        s.mount("http://", adapter)
        return s

    monkeypatch.setattr(module.requests, "Session", session)

    def worker_step(_seconds):
        chunk = SweepChunk.objects.filter(status=SweepChunk.Status.PENDING).order_by("sweep_id", "index").first()
        if chunk is not None:
            services.chunk_run(sweep_id=chunk.sweep_id, index=chunk.index)

    monkeypatch.setattr(module.time, "sleep", worker_step)
    module.SWEEP["workload"]["spec"]["n"] = 40  # keep the test quick
    module.SWEEP["axes"] = [{"param": "num_gpu_blocks", "values": [300, 3000]}]
    module.adapter = adapter
    return module


def test_sizing_only_needs_no_token(script, capsys):
    assert script.main(["--url", "http://testserver", "--no-sweep"]) == 0
    out = capsys.readouterr().out
    assert out.count("yes") == 3 and "llama-3-1-70b" in out
    assert script.adapter.calls == ["POST /api/plan/"] * 3


def test_sizes_sweeps_waits_and_downloads_the_csv(script, django_user_model, tmp_path, capsys):
    user = django_user_model.objects.create_user("scripter")
    _, token = api_token_create(user=user, name="example")
    csv = tmp_path / "sweep.csv"
    assert script.main(["--url", "http://testserver", "--token", token, "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "2/2 points" in out and "100.0%" in out and "wrote" in out
    assert csv.read_text().startswith("point,num_gpu_blocks,")
    assert any(c.startswith("GET /api/reports/") for c in script.adapter.calls)


def test_api_errors_are_printed_per_field(script, capsys):
    script.DEPLOYMENTS[:] = [{"model": "no-such-model", "gpu": "h100-sxm5-80gb"}]
    assert script.main(["--url", "http://testserver", "--no-sweep"]) == 1
    err = capsys.readouterr().err
    assert "HTTP 404" in err and "model: No model 'no-such-model'" in err
