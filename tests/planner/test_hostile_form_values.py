"""No form input gives a 500: nested and huge values in every field of every form page (issue 37 item 4).

The pages' forms are read from their own HTML (every ``<form>``, every ``input``, ``textarea`` and
``select`` with a name), so a field added to a page is tested without a list to keep. For each field,
hypothesis puts a hostile text there, of each of the three kinds in turn (JSON nested thousands of levels, a
whole number of up to 5,000 digits, a number out of a float's range such as ``1e999``; as it is or in a JSONL
or CSV trace line or a measurement holding it; a file input gets it as an uploaded ``.jsonl`` or ``.csv``),
the other fields keep the page's own values, and the form is sent: the answer is never a 5xx.
"""

from __future__ import annotations

import itertools
from html.parser import HTMLParser

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuprofiles.api import GPU_INPUT_EXAMPLE, MODEL_INPUT_EXAMPLE
from tests.api.test_hostile_values import HOLDERS, HOSTILE_KINDS, holding

#: The pages with forms ({gpu} and {model}: the user's own profiles, for the edit pages).
PAGES = ["/", "/replicas/", "/sweeps/new/", "/searches/", "/calibrations/", "/catalog/models/import/",
         "/catalog/gpus/new/", "/catalog/gpus/{gpu}/edit/", "/catalog/models/{model}/edit/", "/accounts/",
         "/catalog/gpus/", "/catalog/models/", "/plans/day/"]
ANONYMOUS_PAGES = ["/accounts/signup/", "/accounts/login/"]


class _Forms(HTMLParser):
    """Every form of a page: ``{"method", "action", "fields": {name: value}, "files": [names]}``."""

    def __init__(self):
        super().__init__()
        self.forms: list[dict] = []
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.forms.append({"method": (a.get("method") or "get").lower(), "action": a.get("action") or "",
                               "fields": {}, "files": []})
        if tag == "option" and self._select and self.forms:
            fields = self.forms[-1]["fields"]
            if fields.get(self._select) is None or "selected" in a:
                fields[self._select] = a.get("value", "")
        if not self.forms or "name" not in a:
            return
        form = self.forms[-1]
        if tag == "input":
            kind = (a.get("type") or "text").lower()
            if kind == "file":
                form["files"].append(a["name"])
            elif kind in ("checkbox", "radio"):
                if "checked" in a:
                    form["fields"][a["name"]] = a.get("value", "on")
            elif kind not in ("submit", "button", "reset", "image"):
                form["fields"][a["name"]] = a.get("value", "")
        elif tag == "textarea":
            self._textarea = a["name"]
            form["fields"][a["name"]] = ""
        elif tag == "select":
            self._select = a["name"]
            form["fields"].setdefault(a["name"], None)

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data):
        if self._textarea and self.forms:
            self.forms[-1]["fields"][self._textarea] += data


def page_forms(client: Client, url: str) -> list[dict]:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    parser = _Forms()
    parser.feed(response.content.decode())
    return [f for f in parser.forms if f["fields"] or f["files"]]


@pytest.fixture
def signed_in(django_user_model):
    from rest_framework.test import APIClient

    user = django_user_model.objects.create_user("hostile", password="pw-hostile-12345")
    api = APIClient()
    api.force_authenticate(user)
    gpu = api.post("/api/gpus/", GPU_INPUT_EXAMPLE, format="json").json()["slug"]
    model = api.post("/api/models/", MODEL_INPUT_EXAMPLE, format="json").json()["slug"]
    client = Client()
    client.force_login(user)
    return client, {"gpu": gpu, "model": model}, {}  # (the forms found, read once per test)


@pytest.fixture
def plain_rendering(monkeypatch):
    """Templates rendered as in production: the test runner's instrumented render (it sends a signal per template
    and the test client keeps a copy of every context, a tenth of each page's time here) is not what is tested."""
    from django.template import Template
    from django.test.utils import _TestState

    monkeypatch.setattr(Template, "_render", _TestState.saved_data.template_render)


@pytest.fixture
def pages_unthrottled(monkeypatch):
    """The pages' rate limit off (``config.throttling.hit``, which the page middleware calls with the client's key
    and the path, never a form's value): on, it cost two cache round trips a request."""
    from config import throttling

    monkeypatch.setattr(throttling, "hit", lambda scope, ident, rate: None)


def _cases(client: Client, pages: list[str], slugs: dict) -> list[tuple[str, dict, str]]:
    out = []
    for page in pages:
        url = page.format(**slugs)
        for form in page_forms(client, url):
            for name in [*form["fields"], *form["files"]]:
                if name != "csrfmiddlewaretoken":
                    out.append((url, form, name))
    return out


def _send(client: Client, url: str, form: dict, name: str, text: str, suffix: str):
    data = {k: v for k, v in form["fields"].items() if v is not None}
    if name in form["files"]:
        data[name] = SimpleUploadedFile(f"hostile{suffix}", text.encode("utf-8", "surrogatepass"))
    else:
        data[name] = text
    target = form["action"] or url
    return client.post(target, data) if form["method"] == "post" else client.get(target, data)


hostile_text = st.one_of(*HOSTILE_KINDS, holding(st.one_of(*HOSTILE_KINDS)))
#: A value of each kind, whether it is sent as it is (else held, by the holder drawn): the signed-in test sends
#: the kind its turn asks for (one strategy for every turn: hypothesis replays a draw the same way).
kind_samples = st.tuples(st.tuples(*HOSTILE_KINDS), st.booleans(), st.sampled_from(HOLDERS))
#: The signed-in test's examples: an eighth of the fields each, one kind in turn, so that every 24 examples
#: (the full budget) give every field one value of each kind (a quick run, 10 examples: every field one).
FIELD_SHARE = 8
_TURN = itertools.count()
_ANONYMOUS_CASES: dict = {}


@pytest.mark.django_db
@settings(max_examples=24, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_no_hostile_value_in_a_signed_in_form_is_a_500(signed_in, plain_rendering, pages_unthrottled, data):
    client, slugs, found = signed_in
    if "cases" not in found:
        found["cases"] = _cases(client, PAGES, slugs)
    cases = found["cases"]
    assert len(cases) > 100  # the forms were found (sizing, replicas, sweeps, searches, calibrations, catalog)
    # An eighth of the fields per example, in turn, and for them one kind of hostile value: turn t sends kind
    # (t // 8) % 3 to the fields of phase t % 8, so any 24 turns in a row send each field each kind once
    # (a random sample of 6 values per field, 1,170 page requests, left a kind out of a field in about a quarter).
    turn = next(_TURN)
    phase, kind = turn % FIELD_SHARE, (turn // FIELD_SHARE) % len(HOSTILE_KINDS)
    for url, form, name in cases[phase::FIELD_SHARE]:
        values, as_it_is, holder = data.draw(kind_samples, label=f"{url} {name}")
        text = values[kind] if as_it_is else holder(values[kind])
        suffix = data.draw(st.sampled_from([".jsonl", ".csv", ".json"]), label="file suffix")
        response = _send(client, url, form, name, text, suffix)
        assert response.status_code < 500, (url, name, text[:200], response.content[:300])


@pytest.mark.django_db
@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_no_hostile_value_in_an_anonymous_form_is_a_500(plain_rendering, data):
    client = Client()
    if "cases" not in _ANONYMOUS_CASES:
        _ANONYMOUS_CASES["cases"] = _cases(client, ANONYMOUS_PAGES, {})
    for url, form, name in _ANONYMOUS_CASES["cases"]:
        text = data.draw(hostile_text, label=f"{url} {name}")
        response = _send(client, url, form, name, text, ".txt")
        assert response.status_code < 500, (url, name, text[:200], response.content[:300])


@pytest.mark.django_db
def test_the_issues_sweep_axis_value(signed_in):
    """``1e999`` as a sweep form's axis value was a 500; it is the form's error now."""
    client, _, _ = signed_in
    form = next(f for f in page_forms(client, "/sweeps/new/") if "axis1_values" in f["fields"])
    for value in ("1e999", "9" * 5000, "-1e999"):
        response = _send(client, "/sweeps/new/", form, "axis1_values", value, "")
        assert response.status_code == 200 and b"not a number (or not a finite one)" in response.content


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["engine", "policy"])
@pytest.mark.parametrize(("text", "words"), [
    ('{"max_num_seqs": ' + "9" * 5000 + "}", "whole number too large"),  # once a 500 (plain json.loads)
    ('{"a": ' * 3000 + "1" + "}" * 3000, "nested too deeply"),
    ('{"kind": "hpa", "target": NaN}', "NaN is not valid JSON"),
    ('{"kind": "hpa", "target": 1e999}', "too large for JSON"),
    ('{"x": [' + ",".join(["1"] * 100_001) + "]}", "at most 100,000 are accepted"),
], ids=["5000-digits", "nested", "nan", "1e999", "too-many-values"])
def test_the_day_plan_pages_json_fields(signed_in, field, text, words):
    """The day plan page's engine and policy fields went through plain ``json.loads``: a 5,000-digit number there
    was a 500 (a hostile pass found it; the random test above had not drawn it). They take the body's checks."""
    client, _, _ = signed_in
    form = next(f for f in page_forms(client, "/plans/day/") if field in f["fields"])
    response = _send(client, "/plans/day/", form, field, text, "")
    assert response.status_code == 200
    assert words in response.content.decode()
