"""No input gives a 500: nested and huge values in every parsed field of the API (issue 37 item 4).

A deeply nested JSONL trace broke four endpoints; a calibration text nested deeply or holding a 5,000-digit
number broke the calibration API; ``1e999`` as a sweep-axis value was a 500. Every string that is parsed
as JSON, CSV or a number now passes the request body's checks (``simulator.base.json_input``).

A property test: for every write operation of the live schema (so a new endpoint is included without a
list to keep), every field of its body, and the string fields that hold a format of their own (a sweep's
``workload.trace`` as JSONL or CSV, a calibration's ``text`` and ``deployment``), hypothesis puts a hostile
value there: JSON nested 33 to 20,000 levels, a whole number of up to 5,000 digits, ``1e999``, or text
holding those (a JSONL line, a CSV cell, a vllm-bench JSON); each kind in each of these deliveries once per
field (:data:`SLOTS`), the sizes drawn. The answer is never a 5xx, and a 4xx is in the error shape. The
pages' forms have the same test in ``tests/planner/test_hostile_form_values.py``.
"""

from __future__ import annotations

import itertools
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuprofiles.api import GPU_INPUT_EXAMPLE, IMPORT_EXAMPLE, MODEL_INPUT_EXAMPLE
from planner.dayplans.api import EXAMPLE_DAY_PLAN
from tests.api.test_unknown_fields import OPERATIONS, _url
from tests.budget import FULL

PLACE = "__HOSTILE_VALUE__"

#: A body that passes most checks, per path, so that the hostile value is parsed deep down (absent: {}).
BASES = {
    "/api/plan/": {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"},
    "/api/simulations/": {"engine": {"num_gpu_blocks": 2000}, "workload": {"spec": {"n": 20}, "seed": 0}},
    "/api/sweeps/": {"engine": {"num_gpu_blocks": 2000}, "workload": {"spec": {"n": 20}, "seed": 0},
                     "axes": [{"param": "max_num_seqs", "values": [8, 16]}]},
    "/api/replicas/": {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "slo": {"ttft_s": 1.0},
                       "workload": {"spec": {"n": 20, "arrival": {"kind": "poisson", "rate": 2, "unit": "s"}},
                                    "seed": 0}},
    "/api/searches/": {"model": "llama-3-1-8b", "slo": {"targets": [{"metric": "ttft", "percentile": "p90",
                                                                     "max_s": 0.5}]},
                       "workload": {"spec": {"n": 20, "arrival": {"kind": "poisson", "rate": 2, "unit": "s"}},
                                    "seed": 0},
                       "space": {"gpus": ["l4"], "tensor_parallel": [1], "max_replicas": 1}},
    "/api/calibrations/": {"name": "c", "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "text": "{}"},
    "/api/gpus/": GPU_INPUT_EXAMPLE, "/api/models/": MODEL_INPUT_EXAMPLE, "/api/models/import/": IMPORT_EXAMPLE,
    "/api/gpus/{slug}/": GPU_INPUT_EXAMPLE, "/api/models/{slug}/": MODEL_INPUT_EXAMPLE,
    "/api/day-plans/": EXAMPLE_DAY_PLAN,
}
#: Fields inside the JSON formats of ours (the schema shows them as "any JSON"), and text parsed again.
INNER = {
    "/api/sweeps/": ["workload.trace", "axes[0].values", "axes[0].stop", "engine.num_gpu_blocks", "workload.spec.n",
                     "workload.spec.prompt", "workload.seed", "deployment.tensor_parallel_size", "cliff.hi"],
    "/api/simulations/": ["workload.trace", "engine.max_num_seqs", "workload.spec.arrival"],
    "/api/replicas/": ["workload.trace", "slo.ttft_s", "cluster.router_delay_s"],
    "/api/searches/": ["workload.trace", "space.max_replicas", "slo.targets", "space.gpus"],
    "/api/plan/": ["model.config", "speculative.num_speculative_tokens"],
    "/api/calibrations/": ["text", "deployment"],
    "/api/day-plans/": ["workload.trace", "workload.spec.arrival", "policy.target", "cold_start.seconds",
                        "slo.ttft_s", "deployment.tensor_parallel_size"],
}
CASES = [(m, p, f) for m, p, shape in OPERATIONS for f in [*shape["fields"], *INNER.get(p, [])] or ["x"]]


def _deep(depth: int, kind: str) -> str:
    return "[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "1" + "}" * depth


#: The three kinds of hostile JSON text: nested deeply, a huge whole number, a number out of a float's range.
nested_values = st.builds(_deep, st.sampled_from([33, 200, 3000, 20000]), st.sampled_from(["list", "object"]))
digit_values = st.builds(lambda n, sign: sign + "9" * n, st.sampled_from([21, 400, 4300, 5000]),
                         st.sampled_from(["", "-"]))
number_values = st.sampled_from(["1e999", "-1e999", "1e308", "0.1e-999", "123456789012345678901234567890.5"])
HOSTILE_KINDS = (nested_values, digit_values, number_values)


#: Texts holding a value, for the fields that are parsed again (a trace, a measurement); the last: the value alone.
HOLDERS = (
    lambda v: f'{{"arrival_time": 0, "prompt_tokens": {v}, "output_tokens": 4}}\n',
    lambda v: f"arrival_time,prompt_tokens,output_tokens\n0,{v},4\n",
    lambda v: f'{{"completed": {v}, "mean_ttft_ms": 5, "mean_itl_ms": 1, "mean_e2el_ms": 90, '
              f'"total_input_tokens": 100, "total_output_tokens": 50}}',
    lambda v: v,
)


def holding(raw):
    """Text holding ``raw``'s values (:data:`HOLDERS`)."""
    return st.one_of(*(raw.map(holder) for holder in HOLDERS))



def _put(body: dict, path: str, value) -> dict:
    keys = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    node = body
    for key in keys[:-1]:
        if key.startswith("["):
            node = node[int(key[1:-1])]
        else:
            if not isinstance(node.get(key), (dict, list)):
                node[key] = {}
            node = node[key]
    last = keys[-1]
    if last.startswith("["):
        node[int(last[1:-1])] = value
    else:
        node[last] = value
    return body


@pytest.fixture
def hostile_client(django_user_model, monkeypatch):
    """``(client, slugs)``: a client signed in as a user of its own (forced: how a request is authenticated reads
    its headers, never its body, and has tests of its own), with the API's rate limits off (a throttle counts
    requests and never reads a body either; on, they cost a cache round trip per request, a third of each
    case's time); ``slugs()``: the user's own GPU and model (for the ``{slug}`` paths), made at its first call in
    a test: the other paths' cases (most of them) need neither; the third: the example counter of :data:`SLOTS`."""
    from rest_framework.test import APIClient
    from rest_framework.throttling import SimpleRateThrottle

    from tests.api.test_unknown_fields import GPU_INPUT_EXAMPLE as gpu
    from tests.api.test_unknown_fields import MODEL_INPUT_EXAMPLE as model

    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"anon": None, "user": None})
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("hostile-api"))
    made: dict = {}

    def slugs() -> dict:
        if not made:
            made["gpus"] = client.post("/api/gpus/", gpu, format="json").json()["slug"]
            made["models"] = client.post("/api/models/", model, format="json").json()["slug"]
        return made

    turns = itertools.count()
    yield client, slugs, turns
    if FULL:  # the test's examples went through every slot (SLOTS): each kind in each delivery
        assert next(turns) >= len(SLOTS), "fewer examples ran than there are slots"


#: How a hostile value is sent: as it is (JSON text in the body, where the body's checks meet it), or as a string
#: held by each of :data:`HOLDERS` (the value alone first: a string field parsed again as JSON or a number).
DELIVERIES = ("as it is", len(HOLDERS) - 1, *range(len(HOLDERS) - 1))
#: Every (delivery, kind) once: example ``t`` of a case sends ``SLOTS[t % 15]``, so the 15 examples of the full
#: budget put each kind of hostile value in each field in every delivery (a quick run's 10: as it is, alone and
#: in a JSONL line, each kind; in a CSV line, one kind). 24 random examples a case, as before, left a case
#: without some (kind, delivery) in most cases and drew the rest more than once.
SLOTS = [(delivery, kind) for delivery in DELIVERIES for kind in range(len(HOSTILE_KINDS))]
#: A value of each kind, and a trace's format for the holders that are neither trace line (one strategy for
#: every slot: hypothesis replays a draw the same way).
slot_samples = st.tuples(st.tuples(*HOSTILE_KINDS), st.sampled_from(["jsonl", "csv", "auto"]))
TRACE_FORMATS = {0: "jsonl", 1: "csv"}  # the holders that are a trace's line: the trace is read in their format


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES, ids=[f"{m} {p} {f}" for m, p, f in CASES])
@settings(max_examples=len(SLOTS), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_no_hostile_value_is_a_500(hostile_client, case, data):
    client, slugs, turns = hostile_client
    method, path, field = case
    delivery, kind = SLOTS[next(turns) % len(SLOTS)]
    values, fmt = data.draw(slot_samples, label="values, trace format")
    raw = values[kind]
    body = json.loads(json.dumps(BASES.get(path, {})))
    _put(body, field, PLACE)
    if field == "workload.trace":
        body["workload"] = {"trace": PLACE, "format": TRACE_FORMATS.get(delivery, fmt)}
    value = raw if delivery == "as it is" else json.dumps(HOLDERS[delivery](raw))
    sent = json.dumps(body).replace(json.dumps(PLACE), value)
    url = _url(path, slugs() if "{slug}" in path else {})
    response = client.generic(method.upper(), url, sent, content_type="application/json")
    assert response.status_code < 500, (method, path, field, sent[:300], response.content[:500])
    if response.status_code >= 400:
        errors = response.json()["errors"]
        assert errors and all(isinstance(m, list) and m for m in errors.values())


@pytest.mark.django_db
@pytest.mark.parametrize("line", [
    '{"arrival_time": 0, "prompt_tokens": ' + _deep(5000, "list") + ', "output_tokens": 4}',
    '{"arrival_time": 0, "prompt_tokens": ' + "9" * 5000 + ', "output_tokens": 4}',
    '{"arrival_time": 1e999, "prompt_tokens": 3, "output_tokens": 4}',
], ids=["nested-5000", "5000-digits", "1e999"])
@pytest.mark.parametrize("url", ["/api/simulations/", "/api/sweeps/", "/api/replicas/", "/api/searches/",
                                 "/api/day-plans/"])
def test_the_issues_jsonl_traces_are_a_400_naming_the_line(token_client, url, line):
    body = json.loads(json.dumps(BASES[url]))
    body["workload"] = {"trace": line + "\n", "format": "jsonl"}
    response = token_client.post(url, body, format="json")
    assert response.status_code == 400, response.content[:300]
    assert "line 1" in json.dumps(response.json()["errors"])


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/api/simulations/", "/api/sweeps/", "/api/replicas/", "/api/searches/",
                                 "/api/day-plans/"])
def test_a_trace_nested_deeply_in_its_first_line_is_a_400_when_its_format_is_guessed(token_client, url):
    """``"format": "auto"`` guessed the format from the first line with plain ``json.loads``: nested deeply, it was
    a ``RecursionError`` and a 500 (the day plan page's trace upload, found by the form test)."""
    body = json.loads(json.dumps(BASES[url]))
    body["workload"] = {"trace": '{"completed": ' + _deep(3000, "list") + "}\n", "format": "auto"}
    response = token_client.post(url, body, format="json")
    assert response.status_code == 400, response.content[:300]
    assert "nested too deeply" in json.dumps(response.json()["errors"])


@pytest.mark.django_db
@pytest.mark.parametrize("text", [_deep(5000, "object"), '{"completed": ' + "9" * 5000 + "}", "[" * 100000],
                         ids=["nested-5000", "5000-digits", "unclosed-100000"])
def test_the_issues_calibration_texts_are_a_400(token_client, text):
    response = token_client.post("/api/calibrations/", {**BASES["/api/calibrations/"], "text": text}, format="json")
    assert response.status_code == 400, response.content[:300]
    assert "file" in response.json()["errors"]
