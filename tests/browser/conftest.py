"""Fixtures for the end-to-end browser tests (headless Chromium through Playwright).

- ``browser``: one Chromium per package run, Debian's binary (``chromium_path``), never a download.
- ``page``: a fresh context at laptop size whose JavaScript console errors, page errors,
  failed or 4xx/5xx local static files, server errors and requests to other hosts (CDNs) are
  collected and fail the test at teardown.
- ``signed_in_page``: the same, signed in as a new user (session cookie from Django's test client).
- ``screenshot``: saves a full-page PNG under ``artifacts/screenshots/`` (ignored by git).
- ``catalog`` (used by every page fixture): reloads the GPU/model catalog for every test, because ``live_server``
  runs on a transactional database that is flushed between tests.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

# Real Celery workers for the sweep flow: the sweeps' integration fixtures, reused as they are.
# Importing them also points SQLite's test database at a file, so that a worker process and the
# live server share it (PostgreSQL's test database is shared anyway).
from tests.integration.conftest import sender_on_redis, worker_factory  # noqa: F401
from tests.search_definitions import two_gpu_search, xpyd_search

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"


def screenshots_wanted() -> bool:
    """Whether this run writes its screenshots: only when ``KVP_SCREENSHOTS=1`` asks. No assertion reads a PNG
    (they are for a person's review, docs/browser-tests.md), so every run, CI's full budget included, runs every
    check without them; a full-page screenshot costs about 0.4 s a page."""
    return os.environ.get("KVP_SCREENSHOTS", "") == "1"

# Laptop screen: charts and tables must be readable at this size.
VIEWPORT = {"width": 1366, "height": 860}
# Every wait is bounded: actions and assertions give up after these (milliseconds).
ACTION_TIMEOUT_MS = 10_000
NAVIGATION_TIMEOUT_MS = 20_000

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="package")
def browser(chromium_path):
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=ACTION_TIMEOUT_MS)

    # Playwright's sync API keeps an asyncio loop in this thread; Django's ORM refuses to run
    # under a running loop unless told otherwise. Allowed only while the browser is up.
    saved = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as pw:
            chromium = pw.chromium.launch(executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS)
            try:
                yield chromium
            finally:
                chromium.close()
    finally:
        if saved is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = saved


@dataclass
class PageProblems:
    """What went wrong in the browser while a test ran; must be empty at teardown."""

    origin: str
    problems: list[str] = field(default_factory=list)
    allowed: list[re.Pattern] = field(default_factory=list)

    def allow(self, pattern: str) -> None:
        """Accept one expected console message (a regular expression), e.g. a deliberate 4xx."""
        self.allowed.append(re.compile(pattern))

    def add(self, text: str) -> None:
        if not any(p.search(text) for p in self.allowed):
            self.problems.append(text)

    def is_local(self, url: str) -> bool:
        return url.startswith(self.origin)

    def watch(self, page) -> None:
        def on_console(msg):
            if msg.type == "error":
                loc = msg.location or {}
                self.add(f"console error: {msg.text} ({loc.get('url', '')}:{loc.get('lineNumber', '')})")

        def on_pageerror(exc):
            self.add(f"page error: {exc}")

        def on_request(request):
            url = request.url
            if urlsplit(url).scheme in {"data", "blob", "about"}:
                return
            if not self.is_local(url):
                self.add(f"request to another host (no CDN allowed): {request.method} {url}")

        def on_requestfailed(request):
            url = request.url
            # ERR_ABORTED is the browser cancelling a load because the test navigated on;
            # a missing file shows up as a 4xx response (on_response).
            if self.is_local(url) and "/static/" in url and request.failure != "net::ERR_ABORTED":
                self.add(f"static file failed: {url} ({request.failure})")

        def on_response(response):
            url = response.url
            if not self.is_local(url):
                return
            if "/static/" in url and response.status >= 400:
                self.add(f"static file {response.status}: {url}")
            elif response.status >= 500:
                self.add(f"server error {response.status}: {response.request.method} {url}")

        page.on("console", on_console)
        page.on("pageerror", on_pageerror)
        page.on("request", on_request)
        page.on("requestfailed", on_requestfailed)
        page.on("response", on_response)


def _new_page(browser, live_server, cookies=(), viewport=None):
    context = browser.new_context(viewport=viewport or VIEWPORT, base_url=live_server.url, accept_downloads=True)
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
    origin = live_server.url.rstrip("/")
    if cookies:
        context.add_cookies(list(cookies))
    page = context.new_page()
    # No allowance for /favicon.ico: base.html declares an icon (a data: URI), so Chromium does not probe.
    problems = PageProblems(origin=origin)
    problems.watch(page)
    page.problems = problems
    return context, page, problems


def _assert_clean(page, problems: PageProblems) -> None:
    # Let late scripts (Plotly drawing, polling) finish reporting before judging.
    try:
        page.wait_for_load_state("load", timeout=5_000)
    except Exception:  # noqa: BLE001 - a page that never loads has reported its own problems
        pass
    assert not problems.problems, "browser problems:\n" + "\n".join(problems.problems)


@pytest.fixture
def page(browser, live_server, catalog):
    context, page, problems = _new_page(browser, live_server)
    yield page
    try:
        _assert_clean(page, problems)
    finally:
        context.close()


@pytest.fixture
def password() -> str:
    return "correct-horse-battery-42"


@pytest.fixture
def user(django_user_model, password):
    return django_user_model.objects.create_user(username="ada", email="ada@example.com", password=password)


def session_cookie(live_server, user) -> dict:
    """The session cookie of ``user`` signed in through Django's test client, for a browser context."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    host = urlsplit(live_server.url).hostname
    return {"name": settings.SESSION_COOKIE_NAME, "value": session, "domain": host, "path": "/", "httpOnly": True}


@pytest.fixture
def signed_in_page(browser, live_server, catalog, user):
    """A page whose context carries a session for ``user`` (made by Django's test client)."""
    context, page, problems = _new_page(browser, live_server, cookies=[session_cookie(live_server, user)])
    yield page
    try:
        _assert_clean(page, problems)
    finally:
        context.close()


@pytest.fixture
def screenshot():
    """``screenshot(page, "name")`` saves ``artifacts/screenshots/name.png`` (the full page)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        if screenshots_wanted():
            page.screenshot(path=str(path), full_page=True)
        return path

    return take


#: The catalog's rows as ``load_catalog`` left them in this process's first ``catalog`` fixture, without the
#: columns the database sets (id, times): {model class: [row values]}.
_CATALOG_ROWS: dict = {}
_DATABASE_SETS = {"id", "created_at", "updated_at"}


@pytest.fixture
def catalog(transactional_db):
    """The GPU/model catalog as the data migration loads it (flushed between live-server tests).

    ``load_catalog`` the first time in a process and whenever rows are there; into an empty (flushed)
    database, the rows it made the first time, in one insert per table (its 65 rows one by one, a few
    queries each, cost about 0.3 s per test)."""
    from gpuprofiles.catalog import load_catalog
    from gpuprofiles.models import GpuProfile, ModelProfile

    tables = (GpuProfile, ModelProfile)
    if not _CATALOG_ROWS or any(table.objects.exists() for table in tables):
        counts = load_catalog(GpuProfile, ModelProfile)
        if not _CATALOG_ROWS:
            rows = {table: [{k: v for k, v in row.items() if k not in _DATABASE_SETS}
                            for row in table.objects.filter(is_catalog=True).values()] for table in tables}
            whole = [len(rows[t]) for t in tables] == [counts["gpus"], counts["models"]]
            if whole and not any(row["copied_from_id"] for t in tables for row in rows[t]):
                _CATALOG_ROWS.update(rows)
        return
    for table, rows in _CATALOG_ROWS.items():
        table.objects.bulk_create([table(**row) for row in rows])


#: The KV blocks of the sweep behind ``finished_report`` (the same as the worker flow in test_sweeps.py).
REPORT_BLOCKS = [150, 300, 600, 1200, 2400]


def _grid_report_here(user, monkeypatch, definition: dict):
    """Create a grid sweep of ``definition`` and run its chunks in this process (nothing goes to a broker): its report."""
    from planner.models import Report
    from planner.sweeps import services

    monkeypatch.setattr(services, "sweep_enqueue", lambda sweep_id: None)
    sweep = services.sweep_create(owner=user, definition=definition)
    for index in range(sweep.num_chunks):
        assert services.chunk_run(sweep_id=sweep.pk, index=index) == "done"
    return Report.objects.get(sweep=sweep)


@pytest.fixture
def finished_report(user, monkeypatch):
    """A KV-blocks sweep like the worker flow's (test_sweeps.py), run in this process (no worker): its report."""
    return _grid_report_here(user, monkeypatch, {
        "name": "KV cliff in the browser",
        "engine": {"num_gpu_blocks": 2000},
        "workload": {"spec": {"n": 150, "prompt": "normal:256,64", "output": "normal:128,32",
                              "arrival": {"kind": "poisson", "rate": 2.0, "unit": "step"}}, "seed": 0},
        "axes": [{"param": "num_gpu_blocks", "values": REPORT_BLOCKS}],
    })


@pytest.fixture
def replicas_report(user, monkeypatch):
    """A sweep over request rate x replicas with latency targets, run in this process: its report.

    Its points table is wider than a laptop screen (it must scroll inside its box, not the page) and
    it draws the latency-against-replicas figure with the targets: at 4 requests/s one replica meets
    them, at 16 requests/s four do.
    """
    return _grid_report_here(user, monkeypatch, {
        "name": "Replicas for two rates in the browser",
        "engine": {"num_gpu_blocks": 3000, "step_time_model": {"base_s": 0.01, "per_token_s": 4e-5}},
        "workload": {"spec": {"n": 80, "prompt": "normal:2000,200", "output": "normal:200,20",
                              "arrival": {"kind": "poisson", "rate": 8.0, "unit": "s"}}, "seed": 0},
        "slo": {"ttft_s": 0.25, "itl_s": 0.05},
        "axes": [{"param": "rate", "values": [4.0, 16.0]}, {"param": "num_instances", "values": [1, 2, 4]}],
    })


@pytest.fixture
def cliff_report(user, monkeypatch):
    """A KV-blocks cliff search of Llama 8B on an H100, run in this process: its report."""
    from planner.models import Report
    from planner.sweeps import services

    monkeypatch.setattr(services, "sweep_enqueue", lambda sweep_id: None)
    sweep = services.sweep_create(owner=user, definition={
        "name": "Cliff for the chart labels", "mode": "cliff", "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
        "workload": {"spec": {"n": 60, "prompt": "normal:256,32", "output": "normal:512,64",
                              "arrival": {"kind": "poisson", "rate": 20.0, "unit": "s"}}, "seed": 0},
        "cliff": {"param": "num_gpu_blocks", "metric": "preemptions_per_request", "lo": 60, "hi": 4000,
                  "resolution": 100, "threshold": 0.02}})
    assert services.cliff_run(sweep_id=sweep.pk) == "done"
    return Report.objects.get(sweep=sweep)


@pytest.fixture
def search_report(user, monkeypatch, catalog):
    """A small deployment search (two GPU types), run in this process: the finished search."""
    from planner.search import services

    monkeypatch.setattr(services, "search_enqueue", lambda search_id: None)
    search = services.search_create(owner=user, definition=two_gpu_search())
    search = services.search_run_here(search=search)
    assert search.status == search.Status.DONE, search.error
    return search


@pytest.fixture
def disaggregated_report(user, monkeypatch):
    """A sweep over the prefill and decode pools of an xPyD deployment (Llama 8B on H100s), run here: its report."""
    return _grid_report_here(user, monkeypatch, {
        "name": "Prefill and decode pools", "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
        "workload": {"spec": {"n": 30, "prompt": "normal:1024,128", "output": "normal:64,16",
                              "arrival": {"kind": "poisson", "rate": 10.0, "unit": "s"}}, "seed": 0},
        "disaggregated": {"routing": "least-loaded", "link_gbps": 25},
        "axes": [{"param": "prefill_instances", "values": [1, 2]}, {"param": "decode_instances", "values": [1, 2]}]})


@pytest.fixture
def speculative_report(user, monkeypatch):
    """A sweep over the speculative tokens of EAGLE (Llama 8B on an H100), run here: its report."""
    return _grid_report_here(user, monkeypatch, {
        "name": "Speculative tokens", "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
        "engine": {"speculative": {"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.7}},
        "workload": {"spec": {"n": 30, "prompt": "normal:512,64", "output": "normal:128,16",
                              "arrival": {"kind": "poisson", "rate": 4.0, "unit": "s"}}, "seed": 0},
        "axes": [{"param": "num_speculative_tokens", "values": [0, 1, 3]}]})


@pytest.fixture
def queued_search(user, monkeypatch):
    """A deployment search stored and never sent to a worker: its page shows the progress at 0."""
    from planner.search import services

    monkeypatch.setattr(services, "search_enqueue", lambda search_id: None)
    return services.search_create(owner=user, definition={
        **two_gpu_search(precisions=["bf16"]), "name": "A search waiting for a worker"})


@pytest.fixture
def xpyd_search_report(user, monkeypatch):
    """A deployment search with its xPyD stage (Llama 8B on H100s, 40 requests at 16/s), run here: the search."""
    from planner.search import services

    monkeypatch.setattr(services, "search_enqueue", lambda search_id: None)
    search = services.search_create(owner=user, definition=xpyd_search(name="Aggregated or xPyD"))
    search = services.search_run_here(search=search)
    assert search.status == search.Status.DONE and search.result.get("disaggregated"), search.error
    return search


@pytest.fixture
def day_plan(user, monkeypatch):
    """A small day plan (docs/autoscaling.md's body: three chunks, an HPA), run in this process: the plan."""
    from planner.dayplans import services
    from planner.dayplans.api import EXAMPLE_DAY_PLAN

    monkeypatch.setattr(services, "chunk_enqueue", lambda plan_id, index: None)
    plan = services.dayplan_run_here(plan=services.dayplan_create(owner=user, definition=EXAMPLE_DAY_PLAN))
    assert plan.status == plan.Status.DONE and plan.answer, plan.error
    return plan


@pytest.fixture
def queued_day_plan(user, monkeypatch):
    """A day plan stored and never sent to a worker: its page shows the progress at 0."""
    from planner.dayplans import services
    from planner.dayplans.api import EXAMPLE_DAY_PLAN

    monkeypatch.setattr(services, "chunk_enqueue", lambda plan_id, index: None)
    return services.dayplan_create(owner=user, definition={**EXAMPLE_DAY_PLAN, "name": "A day waiting for a worker"})
