"""Unknown fields are a 400 naming each one, with the closest known name (issue 37 item 5).

The operations come from the live OpenAPI schema, which drf-spectacular builds from the URL conf: a new
POST / PUT / PATCH endpoint is tested here without anyone adding it to a list. Each gets a body with a
field no endpoint has and a misspelling of one of its own fields; the answer must be a 400 in the error
shape naming both, the misspelling with "did you mean" its field. Nested objects the schema describes
(the plan's inline model, GPU and speculative objects) are checked one level down the same way. The JSON
formats of ours that the schema shows only as "any JSON" (a sweep definition's sections, a search's space,
a calibration's deployment) have their own cases below.
"""

from __future__ import annotations

import re

import pytest
from drf_spectacular.generators import SchemaGenerator

from config.strict_input import unknown_field_errors
from gpuprofiles.api import GPU_INPUT_EXAMPLE, MODEL_INPUT_EXAMPLE
from planner.dayplans.api import EXAMPLE_DAY_PLAN as DAY_PLAN

NO_SUCH = "zz_no_such_field"
WRITE_METHODS = ("post", "put", "patch")


def _schema() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _object_properties(schema: dict, node: dict) -> dict:
    """The properties of an object schema, or of the object alternative of a oneOf (a slug or an object)."""
    node = _resolve(schema, node)
    if "properties" in node:
        return node["properties"]
    for alt in node.get("oneOf", []) + node.get("allOf", []):
        props = _object_properties(schema, alt)
        if props:
            return props
    return {}


def write_operations() -> list[tuple[str, str, dict]]:
    """``(method, path, request-body properties)`` of every write operation in the schema."""
    schema = _schema()
    out = []
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            if method not in WRITE_METHODS:
                continue
            content = op.get("requestBody", {}).get("content", {})
            body = content.get("application/json") or next(iter(content.values()), {})
            props = _object_properties(schema, body.get("schema", {})) if body else {}
            nested = {name: _object_properties(schema, prop) for name, prop in props.items()}
            out.append((method, path, {"fields": sorted(props), "nested": {k: v for k, v in nested.items() if v}}))
    return out


OPERATIONS = write_operations()


def misspelt(names: list[str]) -> tuple[str, str] | None:
    """``(field, misspelling)``: the longest field without its last letter (None for an operation without fields)."""
    if not names:
        return None
    field = max(names, key=len)
    return field, field[:-1] if len(field) > 3 else field + "x"


@pytest.fixture
def owned_slugs(token_client):
    """Slugs of a GPU and a model profile of the signed-in user, for the operations on one."""
    gpu = token_client.post("/api/gpus/", GPU_INPUT_EXAMPLE, format="json")
    model = token_client.post("/api/models/", MODEL_INPUT_EXAMPLE, format="json")
    assert gpu.status_code == 201 and model.status_code == 201, (gpu.content, model.content)
    return {"gpus": gpu.json()["slug"], "models": model.json()["slug"]}


def _url(path: str, slugs: dict) -> str:
    def fill(match):
        head = path[: match.start()].rstrip("/").rsplit("/", 1)[-1]
        return slugs.get(head, "999999") if match.group(1) == "slug" else "999999"
    return re.sub(r"\{(\w+)\}", fill, path)


def test_the_schema_has_the_write_operations():
    """The iteration is not empty, and it sees the endpoints of every app (a check that it is the whole URL conf)."""
    paths = {p for _, p, _ in OPERATIONS}
    for expected in ("/api/plan/", "/api/gpus/", "/api/models/import/", "/api/sweeps/", "/api/simulations/",
                     "/api/replicas/", "/api/searches/", "/api/calibrations/", "/api/sweeps/{sweep_id}/cancel/"):
        assert expected in paths
    assert len(OPERATIONS) >= 15


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "shape"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS])
def test_unknown_fields_are_named(token_client, owned_slugs, method, path, shape):
    body = {NO_SUCH: 8}
    typo = misspelt(shape["fields"])
    if typo:
        body[typo[1]] = 1
    response = getattr(token_client, method)(_url(path, owned_slugs), body, format="json")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert NO_SUCH in errors and errors[NO_SUCH][0].startswith("unknown field"), errors
    if typo:
        assert typo[1] in errors, errors
        assert f"did you mean '{typo[0]}'?" in errors[typo[1]][0], errors[typo[1]]


NESTED = [(m, p, name, fields) for m, p, shape in OPERATIONS for name, fields in shape["nested"].items()]


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "name", "fields"), NESTED, ids=[f"{m} {p} {n}" for m, p, n, _ in NESTED])
def test_unknown_nested_fields_are_named(token_client, owned_slugs, method, path, name, fields):
    field, typo = misspelt(sorted(fields))
    response = getattr(token_client, method)(_url(path, owned_slugs), {name: {NO_SUCH: 1, typo: 1}}, format="json")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert f"{name}.{NO_SUCH}" in errors, errors
    assert f"did you mean '{field}'?" in errors[f"{name}.{typo}"][0], errors


def test_the_plan_answers_the_issues_typo(anon_client, db):
    """The issue's case, a field POST /api/plan/ does not have, was a 200 for one GPU; data_parallel_size is a
    field now (issue 34), so its misspelling stands in for it."""
    response = anon_client.post("/api/plan/", {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
                                               "data_parallel_sizes": 8}, format="json")
    assert response.status_code == 400
    message = response.json()["errors"]["data_parallel_sizes"][0]
    assert message.startswith("unknown field; did you mean '") and "data_parallel_size" in message


SWEEP = {"engine": {"num_gpu_blocks": 2000}, "workload": {"spec": {"n": 20}, "seed": 0},
         "axes": [{"param": "max_num_seqs", "values": [8, 16]}]}
SIZED = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "workload": {"spec": {"n": 20}, "seed": 0},
         "axes": [{"param": "max_num_seqs", "values": [8, 16]}]}
SEARCH = {"model": "llama-3-1-8b", "workload": {"spec": {"n": 20, "arrival": {"kind": "poisson", "rate": 2,
                                                                             "unit": "s"}}, "seed": 0},
          "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5}]},
          "space": {"gpus": ["h100-sxm5-80gb"], "tensor_parallel": [1]}}


def _with(base: dict, path: str, value) -> dict:
    """``base`` with ``value`` put at the dotted ``path`` (``axes[0]`` an item), copied."""
    import copy

    out = copy.deepcopy(base)
    node = out
    keys = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    for key in keys[:-1]:
        node = node[int(key[1:-1])] if key.startswith("[") else node.setdefault(key, {})
    last = keys[-1]
    if last.startswith("["):
        node[int(last[1:-1])] = value
    else:
        node[last] = value
    return out


#: (endpoint, body, where the misspelt key goes, the misspelling, the field it should suggest).
SECTIONS = [
    ("/api/sweeps/", SWEEP, "nam", "name"),
    ("/api/sweeps/", SWEEP, "engine.max_num_seq", "max_num_seqs"),
    ("/api/sweeps/", SWEEP, "workload.sed", "seed"),
    ("/api/sweeps/", SWEEP, "workload.spec.promt", "prompt"),
    ("/api/sweeps/", SWEEP, "axes[0].valus", "values"),
    ("/api/sweeps/", SWEEP, "cluster.num_instance", "num_instances"),
    ("/api/sweeps/", SWEEP, "slo.ttft", "ttft_s"),
    ("/api/sweeps/", {**SWEEP, "mode": "cliff", "axes": []}, "cliff.resolutio", "resolution"),
    ("/api/sweeps/", SIZED, "deployment.tensor_parallel_siz", "tensor_parallel_size"),
    ("/api/sweeps/", SIZED, "disaggregated.prefill_instance", "prefill_instances"),
    ("/api/simulations/", {k: v for k, v in SWEEP.items() if k != "axes"}, "engine.block_siz", "block_size"),
    ("/api/replicas/", {k: v for k, v in SIZED.items() if k != "axes"}, "slo.itl", "itl_s"),
    ("/api/searches/", SEARCH, "space.tensor_paralel", "tensor_parallel"),
    ("/api/searches/", SEARCH, "slo.min_goodpt", "min_goodput"),
    ("/api/searches/", SEARCH, "disaggregated.link_gbp", "link_gbps"),
    ("/api/searches/", SEARCH, "slo.targets[0].metricc", "metric"),  # once "each target is {...}" on slo.targets
    ("/api/day-plans/", DAY_PLAN, "policy.targt", "target"),  # once without the closest name
    ("/api/day-plans/", DAY_PLAN, "cold_start.secnds", "seconds"),
    ("/api/day-plans/", DAY_PLAN, "slo.ttft", "ttft_s"),
    ("/api/day-plans/", DAY_PLAN, "workload.spec.promt", "prompt"),
    ("/api/day-plans/", DAY_PLAN, "price_per_gpu_hr", "price_per_gpu_hour"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "body", "where", "expected"), SECTIONS, ids=[f"{u} {w}" for u, _, w, _ in SECTIONS])
def test_unknown_keys_of_our_json_formats(token_client, url, body, where, expected):
    sent = _with(body, where, 1) if "." in where or "[" in where else {**body, where: 1}
    if where.startswith("disaggregated.") and url == "/api/searches/":
        sent["space"] = {**sent["space"], "max_replicas": 4}
    response = token_client.post(url, sent, format="json")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert where in errors, errors
    assert re.match(r"unknown (config )?field", errors[where][0]) and f"did you mean '{expected}'?" in errors[where][0]


@pytest.mark.django_db
def test_a_calibrations_deployment_knobs(token_client):
    response = token_client.post("/api/calibrations/", {
        "name": "c", "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "text": "{}",
        "deployment": {"max_num_seq": 64}}, format="json")
    assert response.status_code == 400
    message = response.json()["errors"]["deployment.max_num_seq"][0]
    assert "did you mean 'max_num_seqs'?" in message


def test_the_helper_names_every_unknown_key_and_only_those():
    errors = unknown_field_errors({"a": 1, "tensor_paralel_size": 2, "zzz": 3}, ["a", "tensor_parallel_size"],
                                  prefix="deployment")
    assert sorted(errors) == ["deployment.tensor_paralel_size", "deployment.zzz"]
    assert "did you mean 'tensor_parallel_size'?" in errors["deployment.tensor_paralel_size"][0]
    assert "did you mean" not in errors["deployment.zzz"][0]
    assert unknown_field_errors({"a": 1}, ["a"]) == {} and unknown_field_errors([1], ["a"]) == {}
