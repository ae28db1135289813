"""``deployment.sampling``: the sampler path the roofline clock charges (simulator.cost_model.SAMPLER_PATHS)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from planner.sweeps.specs import clock_coefficients
from simulator.cost_model import DEFAULT_SAMPLER_PATH, SAMPLER_PATHS, sampling_coefficients

LLAMA_H100 = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"}
WORKLOAD = {"spec": {"n": 120, "prompt": {"kind": "normal", "mean": 1000, "std": 200},
                     "output": {"kind": "normal", "mean": 200, "std": 40},
                     "arrival": {"kind": "poisson", "rate": 8, "unit": "s"}}, "seed": 0}


@pytest.fixture
def client(db):
    c = APIClient()
    c.force_authenticate(get_user_model().objects.create_user("sampler", password="pw-123456789"))
    return c


def _simulate(client, **deployment):
    r = client.post("/api/simulations/", {**LLAMA_H100, "deployment": deployment, "workload": WORKLOAD},
                    format="json")
    assert r.status_code == 200, r.json()
    return r.json()


def test_greedy_requests_decode_faster_than_the_default_top_k_top_p(client):
    default, greedy = _simulate(client), _simulate(client, sampling="greedy")
    temperature = _simulate(client, sampling="temperature")
    assert default["metrics"]["clock"] == greedy["metrics"]["clock"] == "cost_model"
    assert (default["sampling"], greedy["sampling"], temperature["sampling"]) == (DEFAULT_SAMPLER_PATH, "greedy",
                                                                                  "temperature")
    itl = {name: r["metrics"]["itl_p50_s"] for name, r in
           (("default", default), ("greedy", greedy), ("temperature", temperature))}
    print("ITL p50 (s):", itl)
    # The sort costs ~0.1 ms + ~0.14 ns x vocabulary x requests a step; greedy is an argmax.
    assert itl["greedy"] < itl["temperature"] < itl["default"]
    assert itl["default"] - itl["greedy"] > 0.1e-3


def test_naming_the_default_changes_nothing(client):
    default, named = _simulate(client), _simulate(client, sampling=DEFAULT_SAMPLER_PATH)
    assert named["metrics"] == default["metrics"] and named["config"] == default["config"]


@pytest.mark.parametrize("value", ["beam", 3, ""])
def test_an_unknown_path_is_a_400_naming_the_field_and_the_choices(client, value):
    r = client.post("/api/simulations/", {**LLAMA_H100, "deployment": {"sampling": value}, "workload": WORKLOAD},
                    format="json")
    assert r.status_code == 400
    msg = r.json()["errors"]["deployment.sampling"][0]
    assert all(path in msg for path in SAMPLER_PATHS), msg


def test_sampling_without_a_model_and_gpu_is_refused(client):
    r = client.post("/api/simulations/", {"deployment": {"sampling": "greedy"}, "engine": {"num_gpu_blocks": 300},
                                          "workload": {"spec": {"n": 5}}}, format="json")
    assert r.status_code == 400 and "deployment" in r.json()["errors"]


def test_a_calibration_keeps_the_sampler_terms_it_fitted_and_takes_the_others_from_the_path():
    calibration = {"mfu": 0.5, "sampling_step_s": 1e-3, "sampling_vocab_s": 2.068e-9, "sampling_request_vocab_s": 1e-10}
    got = clock_coefficients("greedy", calibration, fitted=["mfu", "sampling_step_s"])
    greedy = sampling_coefficients("greedy")
    assert got["mfu"] == 0.5 and got["sampling_step_s"] == 1e-3  # fitted: the calibration's
    assert got["sampling_vocab_s"] == greedy["sampling_vocab_s"]  # not fitted: the path's
    assert got["sampling_request_vocab_s"] == greedy["sampling_request_vocab_s"]
    assert clock_coefficients(DEFAULT_SAMPLER_PATH, calibration, ["mfu"]) is calibration
    assert clock_coefficients(DEFAULT_SAMPLER_PATH, None) is None
    assert clock_coefficients("greedy", None) == greedy


def test_the_replicas_page_takes_the_path_and_says_which_one_it_assumed(client):
    query = {**LLAMA_H100, "rate": "4", "num_requests": "60", "max_instances": "2"}
    default = client.get("/replicas/", query)
    greedy = client.get("/replicas/", {**query, "sampling": "greedy"})
    assert default.status_code == greedy.status_code == 200
    assert 'with <span id="replicas-sampling">top-k / top-p' in default.content.decode()
    assert 'with <span id="replicas-sampling">greedy (temperature 0)</span> sampling' in greedy.content.decode()
    itl = [float(r.context["answer"]["rows"][0]["itl"]) for r in (default, greedy)]
    assert itl[1] < itl[0], itl


def test_the_replicas_page_names_the_choices_for_an_unknown_path(client):
    r = client.get("/replicas/", {**LLAMA_H100, "rate": "4", "sampling": "beam"})
    assert r.status_code == 200 and r.context["answer"] is None
    errors = r.context["form"].errors["sampling"]
    assert all(path in errors[0] for path in SAMPLER_PATHS), errors
    html = r.content.decode()
    assert "How your requests sample: greedy (temperature 0)" in html


def _report_of(user, monkeypatch, sampling: str | None):
    """A one-axis sweep of Llama 8B on an H100, its chunks run in this process (tests/browser/conftest.py's way)."""
    from planner.models import Report
    from planner.sweeps import services

    monkeypatch.setattr(services, "sweep_enqueue", lambda sweep_id: None)
    deployment = {} if sampling is None else {"sampling": sampling}
    sweep = services.sweep_create(owner=user, definition={
        "name": f"sampling {sampling}", **LLAMA_H100, "deployment": deployment, "workload": WORKLOAD,
        "axes": [{"param": "max_num_seqs", "values": [32, 128]}]})
    for index in range(sweep.num_chunks):
        assert services.chunk_run(sweep_id=sweep.pk, index=index) == "done"
    return Report.objects.get(sweep=sweep)


def test_a_sweep_report_says_its_sampler_and_greedy_points_decode_faster(client, monkeypatch):
    user = get_user_model().objects.get(username="sampler")
    default, greedy = _report_of(user, monkeypatch, None), _report_of(user, monkeypatch, "greedy")
    assert default.snapshot["inputs"]["sampling"] == DEFAULT_SAMPLER_PATH
    assert greedy.snapshot["inputs"]["sampling"] == "greedy"
    itl = [[p["metrics"]["itl_p50_s"] for p in r.snapshot["points"]] for r in (default, greedy)]
    assert all(g < d for d, g in zip(*itl)), itl
    client.force_login(user)
    html = client.get(f"/reports/{greedy.slug}/").content.decode()
    assert '<span id="report-sampling">greedy (temperature 0)</span> sampling' in html  # in words, as the form says it


def test_the_schema_lists_the_sampler_paths(db):
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    components = response.json()["components"]["schemas"]
    knobs = next(v for k, v in components.items() if k.startswith("DeploymentKnobs"))
    sampling = knobs["properties"]["sampling"]
    enum = sampling.get("enum") or components[sampling["allOf"][0]["$ref"].rsplit("/", 1)[1]]["enum"]
    assert enum == list(SAMPLER_PATHS)


def _search_itl(client, **space):
    from planner import tasks
    from planner.search.models import Search

    body = {"model": "llama-3-1-8b", "workload": WORKLOAD,
            "slo": {"targets": [{"metric": "itl", "percentile": "p90", "max_s": 0.05}]},
            "space": {"gpus": ["h100-sxm5-80gb"], "tensor_parallel": [1], "max_replicas": 2, **space}}
    r = client.post("/api/searches/", body, format="json")
    assert r.status_code == 202, r.content
    s = Search.objects.get(pk=r.json()["id"])
    for index in range(s.num_chunks):
        assert tasks.run_search_chunk(s.pk, index) == "done"
    best = client.get(f"/api/searches/{s.pk}/").json()["result"]["best"]
    trial = next(t for t in best["trials"] if t["num_instances"] == 1)
    return trial["values"]["ITL p90"]


def test_a_search_takes_the_path_in_its_space(client):
    default, greedy = _search_itl(client), _search_itl(client, sampling="greedy")
    print("search ITL p90 (s): default", default, "greedy", greedy)
    assert greedy < default
    r = client.post("/api/searches/", {"model": "llama-3-1-8b", "workload": WORKLOAD,
                                       "slo": {"targets": [{"metric": "itl", "percentile": "p90", "max_s": 0.05}]},
                                       "space": {"gpus": ["h100-sxm5-80gb"], "sampling": "beam"}}, format="json")
    assert r.status_code == 400 and all(p in r.json()["errors"]["space.sampling"][0] for p in SAMPLER_PATHS)


def test_with_a_calibration_the_path_moves_the_sampler_terms_the_fit_did_not(client):
    """A stored calibration (the full coefficients, as a fit stores them) used with and without a path."""
    from dataclasses import asdict

    from gpuprofiles.models import GpuProfile, ModelProfile
    from planner.calibration.models import CalibrationProfile
    from simulator.cost_model import RooflineCoefficients

    user = get_user_model().objects.get(username="sampler")
    full = {**asdict(RooflineCoefficients()), "mfu": 0.5}
    sampler = {k: full[k] for k in sampling_coefficients("greedy")}
    rows = {"model": ModelProfile.objects.get(slug=LLAMA_H100["model"]), "gpu": GpuProfile.objects.get(slug=LLAMA_H100["gpu"])}
    CalibrationProfile.objects.create(owner=user, name="mfu only", coefficients=full, fit={"fitted": {"mfu": 0.5}}, **rows)
    CalibrationProfile.objects.create(owner=user, name="with sampler", coefficients=full,
                                      fit={"fitted": {"mfu": 0.5, **sampler}}, **rows)

    def itl(calibration, **deployment):
        r = client.post("/api/simulations/", {**LLAMA_H100, "calibration": calibration, "deployment": deployment,
                                              "workload": WORKLOAD}, format="json")
        assert r.status_code == 200, r.json()
        return r.json()["metrics"]["itl_p50_s"]

    assert itl("mfu only", sampling="greedy") < itl("mfu only")  # the path's sampler terms apply
    assert itl("with sampler", sampling="greedy") == itl("with sampler")  # the fitted ones win
