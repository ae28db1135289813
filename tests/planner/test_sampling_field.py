"""``deployment.sampling`` / ``space.sampling``: the sampler path the roofline clock charges
(simulator.clock.cost_model.SAMPLER_PATHS). None chosen = each model's own (``ModelProfile.sampling``, from its
generation_config.json; top_k_top_p when not known), and every answer says which path it timed and why."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from planner.sampling_words import sampling_sentence, timed_path
from planner.sweeps.specs import clock_coefficients
from simulator.clock.cost_model import DEFAULT_SAMPLER_PATH, SAMPLER_PATHS, sampling_coefficients

LLAMA_H100 = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"}
WORKLOAD = {"spec": {"n": 120, "prompt": {"kind": "normal", "mean": 1000, "std": 200},
                     "output": {"kind": "normal", "mean": 200, "std": 40},
                     "arrival": {"kind": "poisson", "rate": 8, "unit": "s"}}, "seed": 0}
UNKNOWN_WORDS = "top-k / top-p sampling (the planner's default: this model's sampling defaults are not known)"


@pytest.fixture
def client(db):
    c = APIClient()
    c.force_authenticate(get_user_model().objects.create_user("sampler", password="pw-123456789"))
    return c


def _own_llama(sampling: str) -> dict:
    """The catalog's Llama 3.1 8B as the sampler's own profile, its requests' default path set to ``sampling``
    ("" = not known): the tests do not depend on which catalog models ship generation_config defaults."""
    from gpuprofiles.models import ModelProfile

    row = ModelProfile.objects.get(slug=LLAMA_H100["model"])
    row.pk = None
    row.slug, row.name = f"own-llama-{sampling or 'unknown'}", f"Own Llama ({sampling or 'unknown'})"
    row.is_catalog, row.sampling = False, sampling
    row.owner = get_user_model().objects.get(username="sampler")
    row.save()
    return {"model": row.pk, "gpu": LLAMA_H100["gpu"], "name": row.name, "slug": row.slug}


def _simulate(client, model=None, **deployment):
    model = model or LLAMA_H100
    r = client.post("/api/simulations/", {"model": model["model"], "gpu": model["gpu"], "deployment": deployment,
                                          "workload": WORKLOAD}, format="json")
    assert r.status_code == 200, r.json()
    return r.json()


def test_the_timed_path_and_its_words():
    assert timed_path(None, "temperature") == ("temperature", "model")
    assert timed_path("greedy", "temperature") == ("greedy", "chosen")
    assert timed_path(None, None) == (DEFAULT_SAMPLER_PATH, "default")
    assert sampling_sentence("top_k_top_p", "model", "Own Model 7B") == \
        "top-k / top-p sampling (Own Model 7B's generation_config.json)"
    assert sampling_sentence("temperature", "chosen") == "temperature-only sampling (chosen)"
    assert sampling_sentence("top_k_top_p", "default") == UNKNOWN_WORDS
    assert sampling_sentence("greedy", None) == "greedy decoding"  # stored before sources were
    assert sampling_sentence(None, None) == ""


def test_by_default_a_model_takes_its_own_path_and_a_chosen_one_wins(client):
    temperature, unknown = _own_llama("temperature"), _own_llama("")
    own = _simulate(client, temperature)
    chosen_sort = _simulate(client, temperature, sampling="top_k_top_p")
    chosen_greedy = _simulate(client, temperature, sampling="greedy")
    assert own["metrics"]["clock"] == "cost_model"
    assert (own["sampling"], own["sampling_source"]) == ("temperature", "model")
    assert own["sampling_words"] == f"temperature-only sampling ({temperature['name']}'s generation_config.json)"
    assert (chosen_sort["sampling"], chosen_sort["sampling_source"]) == ("top_k_top_p", "chosen")
    assert chosen_sort["sampling_words"] == "top-k / top-p sampling (chosen)"
    assert chosen_greedy["sampling"] == "greedy"
    itl = {name: r["metrics"]["itl_p50_s"] for name, r in
           (("own", own), ("sort", chosen_sort), ("greedy", chosen_greedy))}
    print("ITL p50 (s):", itl)
    assert itl["greedy"] < itl["own"] < itl["sort"]
    # a model whose defaults are not known times top_k_top_p, exactly as if it were chosen, and says so
    blank = _simulate(client, unknown)
    assert (blank["sampling"], blank["sampling_source"], blank["sampling_words"]) == (
        DEFAULT_SAMPLER_PATH, "default", UNKNOWN_WORDS)
    assert blank["metrics"] == _simulate(client, unknown, sampling=DEFAULT_SAMPLER_PATH)["metrics"]
    assert blank["metrics"] == chosen_sort["metrics"]


def test_null_is_the_models_own_path(client):
    temperature = _own_llama("temperature")
    assert _simulate(client, temperature, sampling=None)["sampling_source"] == "model"


def test_greedy_requests_decode_faster_than_top_k_top_p(client):
    default, greedy = _simulate(client, sampling="top_k_top_p"), _simulate(client, sampling="greedy")
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


def test_naming_the_models_own_path_changes_nothing_but_the_source(client):
    default = _simulate(client)
    named = _simulate(client, sampling=default["sampling"])
    assert named["metrics"] == default["metrics"] and named["config"] == default["config"]
    assert default["sampling_source"] in ("model", "default") and named["sampling_source"] == "chosen"


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
    # no path chosen: the sampler terms the fit did not move are left to the model's own path (from_specs)
    assert clock_coefficients(None, calibration, ["mfu", "sampling_step_s"]) == {"mfu": 0.5, "sampling_step_s": 1e-3}
    assert clock_coefficients(None, None) is None
    assert clock_coefficients("greedy", None) == greedy
    assert clock_coefficients(DEFAULT_SAMPLER_PATH, None) == sampling_coefficients(DEFAULT_SAMPLER_PATH)


def test_the_replicas_page_takes_the_path_and_says_which_one_it_assumed(client):
    temperature = _own_llama("temperature")
    client.force_login(get_user_model().objects.get(username="sampler"))
    query = {"model": temperature["slug"], "gpu": LLAMA_H100["gpu"], "rate": "4", "num_requests": "60",
             "max_instances": "2"}
    own = client.get("/replicas/", query)
    greedy = client.get("/replicas/", {**query, "sampling": "greedy"})
    assert own.status_code == greedy.status_code == 200
    assert own.context["form"]["sampling"].value() in ("", None)  # the select's default: the model's own
    assert (f'with <span id="replicas-sampling">temperature-only sampling ({temperature["name"]}&#x27;s '
            'generation_config.json)</span>') in own.content.decode()
    assert 'with <span id="replicas-sampling">greedy decoding (chosen)</span>' in \
        greedy.content.decode()
    itl = [float(r.context["answer"]["rows"][0]["itl"]) for r in (own, greedy)]
    assert itl[1] < itl[0], itl


def test_the_select_offers_the_models_defaults_first(client):
    client.force_login(get_user_model().objects.get(username="sampler"))
    for url in ("/replicas/", "/sweeps/new/", "/searches/"):
        html = client.get(url).content.decode()
        select = html[html.index('name="sampling"'):]
        first = select[select.index("<option"):select.index("</option>")]
        assert 'value=""' in first and first.endswith(">The model&#x27;s defaults"), (url, first)
        assert "selected" in first, (url, first)


def test_the_replicas_page_names_the_choices_for_an_unknown_path(client):
    r = client.get("/replicas/", {**LLAMA_H100, "rate": "4", "sampling": "beam"})
    assert r.status_code == 200 and r.context["answer"] is None
    errors = r.context["form"].errors["sampling"]
    assert all(path in errors[0] for path in SAMPLER_PATHS), errors
    html = r.content.decode()
    assert "How your requests sample. By default each model&#x27;s own" in html


def _report_of(user, monkeypatch, sampling: str | None, model=None):
    """A one-axis sweep of Llama 8B on an H100, its chunks run in this process (tests/browser/conftest.py's way)."""
    from planner.models import Report
    from planner.sweeps import services

    model = model or LLAMA_H100
    monkeypatch.setattr(services, "sweep_enqueue", lambda sweep_id: None)
    deployment = {} if sampling is None else {"sampling": sampling}
    sweep = services.sweep_create(owner=user, definition={
        "name": f"sampling {sampling}", "model": model["model"], "gpu": model["gpu"], "deployment": deployment,
        "workload": WORKLOAD, "axes": [{"param": "max_num_seqs", "values": [32, 128]}]})
    for index in range(sweep.num_chunks):
        assert services.chunk_run(sweep_id=sweep.pk, index=index) == "done"
    return Report.objects.get(sweep=sweep)


def test_a_sweep_report_says_its_sampler_and_greedy_points_decode_faster(client, monkeypatch):
    user = get_user_model().objects.get(username="sampler")
    temperature = _own_llama("temperature")
    own, greedy = _report_of(user, monkeypatch, None, temperature), _report_of(user, monkeypatch, "greedy", temperature)
    assert (own.snapshot["inputs"]["sampling"], own.snapshot["inputs"]["sampling_source"]) == ("temperature", "model")
    assert (greedy.snapshot["inputs"]["sampling"], greedy.snapshot["inputs"]["sampling_source"]) == ("greedy", "chosen")
    itl = [[p["metrics"]["itl_p50_s"] for p in r.snapshot["points"]] for r in (own, greedy)]
    assert all(g < d for d, g in zip(*itl)), itl
    client.force_login(user)
    words = f"temperature-only sampling ({temperature['name']}'s generation_config.json)"
    html = client.get(f"/reports/{own.slug}/").content.decode()
    assert f'with <span id="report-sampling">{words.replace(chr(39), "&#x27;")}</span>' in html
    html = client.get(f"/reports/{greedy.slug}/").content.decode()
    assert '<span id="report-sampling">greedy decoding (chosen)</span>' in html
    assert json.loads(client.get(f"/reports/{own.slug}/download.json").content)["sampling_words"] == words
    assert client.get(f"/api/reports/{own.slug}/").json()["sampling_words"] == words
    standalone = client.get(f"/reports/{own.slug}/download.html").content.decode()
    assert words.replace("'", "&#x27;") in standalone


def test_a_report_stored_before_the_source_was_kept_still_renders(client, monkeypatch):
    user = get_user_model().objects.get(username="sampler")
    report = _report_of(user, monkeypatch, "greedy")
    report.snapshot["inputs"].pop("sampling_source")
    report.save()
    client.force_login(user)
    r = client.get(f"/reports/{report.slug}/")
    assert r.status_code == 200
    assert '<span id="report-sampling">greedy decoding</span>' in r.content.decode()
    for fmt in ("json", "html", "csv"):
        assert client.get(f"/reports/{report.slug}/download.{fmt}").status_code == 200
    assert client.get(f"/api/reports/{report.slug}/").json()["sampling_words"] == "greedy decoding"


def test_the_schema_lists_the_sampler_paths_and_the_default(db):
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    components = response.json()["components"]["schemas"]
    knobs = next(v for k, v in components.items() if k.startswith("DeploymentKnobs"))
    sampling = knobs["properties"]["sampling"]
    refs = [r["$ref"].rsplit("/", 1)[1] for r in sampling.get("oneOf") or sampling.get("allOf") or []]
    enums = [components[r]["enum"] for r in refs] if refs else [sampling["enum"]]
    assert list(SAMPLER_PATHS) in enums and sampling.get("nullable") is True
    assert "the model's own path" in sampling["description"]


def _search(client, model="llama-3-1-8b", **space):
    from planner import tasks
    from planner.search.models import Search

    body = {"model": model, "workload": WORKLOAD,
            "slo": {"targets": [{"metric": "itl", "percentile": "p90", "max_s": 0.05}]},
            "space": {"gpus": ["h100-sxm5-80gb"], "tensor_parallel": [1], "max_replicas": 2, **space}}
    r = client.post("/api/searches/", body, format="json")
    assert r.status_code == 202, r.content
    s = Search.objects.get(pk=r.json()["id"])
    for index in range(s.num_chunks):
        assert tasks.run_search_chunk(s.pk, index) == "done"
    return s, client.get(f"/api/searches/{s.pk}/").json()


def _itl(answer) -> float:
    trial = next(t for t in answer["result"]["best"]["trials"] if t["num_instances"] == 1)
    return trial["values"]["ITL p90"]


def test_a_search_takes_the_path_in_its_space(client):
    _, sort = _search(client, sampling="top_k_top_p")
    _, greedy = _search(client, sampling="greedy")
    print("search ITL p90 (s): top-k/top-p", _itl(sort), "greedy", _itl(greedy))
    assert _itl(greedy) < _itl(sort)
    assert (greedy["sampling"], greedy["sampling_source"]) == ("greedy", "chosen")
    r = client.post("/api/searches/", {"model": "llama-3-1-8b", "workload": WORKLOAD,
                                       "slo": {"targets": [{"metric": "itl", "percentile": "p90", "max_s": 0.05}]},
                                       "space": {"gpus": ["h100-sxm5-80gb"], "sampling": "beam"}}, format="json")
    assert r.status_code == 400 and all(p in r.json()["errors"]["space.sampling"][0] for p in SAMPLER_PATHS)


def test_a_search_times_each_model_by_its_own_path_and_says_so(client):
    temperature, unknown = _own_llama("temperature"), _own_llama("")
    search, own = _search(client, temperature["model"])
    _, sort = _search(client, temperature["model"], sampling="top_k_top_p")
    _, blank = _search(client, unknown["model"])
    assert (own["sampling"], own["sampling_source"]) == ("temperature", "model")
    assert (blank["sampling"], blank["sampling_source"], blank["sampling_words"]) == (
        "top_k_top_p", "default", UNKNOWN_WORDS)
    assert _itl(own) < _itl(sort) == _itl(blank)
    words = f"temperature-only sampling ({temperature['name']}&#x27;s generation_config.json)"
    client.force_login(get_user_model().objects.get(username="sampler"))
    assert f'<span id="search-sampling">{words}</span>' in client.get(f"/searches/r/{search.slug}/").content.decode()
    assert words in client.get(f"/searches/r/{search.slug}/download.html").content.decode()
    doc = json.loads(client.get(f"/searches/r/{search.slug}/download.json").content)
    assert doc["sampling_words"] == own["sampling_words"] and doc["inputs"]["sampling_source"] == "model"


def test_with_a_calibration_the_path_moves_the_sampler_terms_the_fit_did_not(client):
    """A stored calibration (the full coefficients, as a fit stores them) used with and without a path."""
    from dataclasses import asdict

    from gpuprofiles.models import GpuProfile, ModelProfile
    from planner.calibration.models import CalibrationProfile
    from simulator.clock.cost_model import RooflineCoefficients

    user = get_user_model().objects.get(username="sampler")
    full = {**asdict(RooflineCoefficients()), "mfu": 0.5}
    sampler = {k: full[k] for k in sampling_coefficients("greedy")}
    rows = {"model": ModelProfile.objects.get(slug=LLAMA_H100["model"]), "gpu": GpuProfile.objects.get(slug=LLAMA_H100["gpu"])}
    CalibrationProfile.objects.create(owner=user, name="mfu only", coefficients=full, fit={"fitted": {"mfu": 0.5}}, **rows)
    CalibrationProfile.objects.create(owner=user, name="with sampler", coefficients=full,
                                      fit={"fitted": {"mfu": 0.5, **sampler}}, **rows)

    temperature = _own_llama("temperature")

    def answer(calibration, **deployment):
        r = client.post("/api/simulations/", {"model": temperature["model"], "gpu": temperature["gpu"],
                                              "calibration": calibration, "deployment": deployment,
                                              "workload": WORKLOAD}, format="json")
        assert r.status_code == 200, r.json()
        return r.json()

    def itl(calibration, **deployment):
        return answer(calibration, **deployment)["metrics"]["itl_p50_s"]

    # no path chosen: the model's own for the sampler terms the fit did not move (not the calibration's stored ones)
    assert itl("mfu only") == itl("mfu only", sampling="temperature") < itl("mfu only", sampling="top_k_top_p")
    assert itl("mfu only", sampling="greedy") < itl("mfu only")  # a chosen path's sampler terms apply
    assert itl("with sampler", sampling="greedy") == itl("with sampler") == itl("with sampler",
                                                                                sampling="temperature")  # fitted win
    # the answer says so: the fitted sampler time, not the chosen path's
    fitted = answer("with sampler", sampling="greedy")
    assert (fitted["sampling"], fitted["sampling_source"]) == ("greedy", "calibration")
    assert fitted["sampling_words"] == "greedy decoding (its time fitted by the calibration)"
    assert answer("mfu only", sampling="greedy")["sampling_source"] == "chosen"
