"""Speculative decoding as a search dimension and the answer's stability across seeds, at the planner's doors
(issue 32 items 5 and 6): ``space.speculative`` and ``check_seeds`` through POST /api/searches/, the worker's
chunks and last stage, the search page, the report page and its CSV/JSON (``docs/search.md``).

Small Llama 3.1 8B workloads (24 requests on one H100 shape, TP 1, bf16) so a whole search takes about a second.
The stored seed check is held against :func:`simulator.search.check_seeds` called here on workloads generated
here, not against figures written down.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.test import Client
from rest_framework.test import APIClient

from planner.search.definition import build_inputs
from planner.search.models import Search
from simulator.search import Outcome, check_seeds, other_seeds
from simulator.workload import WorkloadSpec, generate_workload
from tests.planner.test_search_api import _run_all

pytestmark = pytest.mark.django_db

DOCS = Path(__file__).resolve().parents[2] / "docs"


def doc_json(page: str, after: str, count: int = 1) -> list:
    """The first ``count`` JSON blocks of ``docs/<page>`` after the line holding ``after``."""
    text = (DOCS / page).read_text(encoding="utf-8")
    start = text.index(after)
    return [json.loads(m) for m in re.findall(r"```json\n(.*?)```", text[start:], re.S)[:count]]


#: docs/search.md's search with speculative decoding and a seed check: every test here starts from it.
EXAMPLE = doc_json("search.md", "**Speculative decoding and the seed check at the planner's doors.**")[0]
SPEC = EXAMPLE["workload"]["spec"]


@pytest.fixture
def api(django_user_model):
    c = APIClient()
    c.force_authenticate(django_user_model.objects.create_user("spec", password="pw-spec-12345"))
    return c


def _body(**extra) -> dict:
    return {**copy.deepcopy(EXAMPLE), **extra}


def test_the_api_pages_refused_request_answers_as_it_says(api):
    request, answer = doc_json("api.md", "Each bad setting is a 400 naming its entry and field", 2)
    r = api.post("/api/searches/", request, format="json")
    assert r.status_code == 400 and r.json() == answer


@pytest.mark.parametrize("change, field, words", [
    ({"speculative": "eagle:3:0.7"}, "space.speculative", "must be a list"),
    ({"speculative": [None, "medusa:3:0.7"]}, "space.speculative[1].method", "must be one of eagle, eagle3, mtp"),
    ({"speculative": [None, {"method": "eagle", "num_speculative_tokens": 0, "acceptance_rate": 0.7}]},
     "space.speculative[1].num_speculative_tokens", "from 1 to 16, got 0"),
    ({"speculative": ["ngram:17:0.5"]}, "space.speculative[0].num_speculative_tokens", "from 1 to 16, got 17"),
    ({"speculative": [None, "eagle:3:0"]}, "space.speculative[1].acceptance_rate", "in (0, 1]"),
    ({"speculative": [None, {"method": "mtp", "num_speculative_tokens": 1, "acceptance_rate": 1.5}]},
     "space.speculative[1].acceptance_rate", "got 1.5"),
    ({"speculative": [None, None]}, "space.speculative", "each setting at most once"),
])
def test_a_bad_speculative_setting_is_a_400_naming_its_field(api, change, field, words):
    body = _body()
    body["space"].update(change)
    r = api.post("/api/searches/", body, format="json")
    assert r.status_code == 400, r.content
    assert any(words in m for m in r.json()["errors"][field]), r.json()


@pytest.mark.parametrize("value", [11, -1, "3", True, 2.5, None])
def test_check_seeds_outside_0_to_10_is_a_400_naming_it(api, value):
    r = api.post("/api/searches/", _body(check_seeds=value), format="json")
    assert r.status_code == 400, r.content
    assert r.json()["errors"]["check_seeds"] == [f"a whole number of seeds from 0 to 10 (0: not checked), got {value!r}"]


def test_every_bad_field_is_named_at_once(api):
    body = _body(check_seeds=12)
    body["space"].update(speculative=[None, "eagle:3:2"], tensor_parallel=[0])
    errors = api.post("/api/searches/", body, format="json").json()["errors"]
    assert {"check_seeds", "space.speculative[1].acceptance_rate", "space.tensor_parallel"} <= set(errors), errors


def _checked_here(search: Search) -> dict:
    """The seed check of ``search``'s answer computed here: its workload drawn on the next seeds by the simulator."""
    _, model, space, slo = build_inputs(search.snapshot)
    best = SimpleNamespace(best=Outcome.from_dict(search.result["best"]))
    k = search.snapshot["check_seeds"]
    return check_seeds(best, lambda s: generate_workload(WorkloadSpec.from_dict(SPEC), seed=s), model, space, slo,
                       other_seeds(0, k)).to_dict()


def test_the_docs_search_runs_on_the_workers_and_stores_its_seed_check(api):
    r = api.post("/api/searches/", _body(), format="json")
    assert r.status_code == 202, r.content
    assert len(r.json()["progress"]["chunks"]) == 2  # the H100's shapes, then the seed check
    s = _run_all(r.json()["id"])
    res = s.result
    specs = [o["candidate"].get("speculative") for o in res["outcomes"]]
    assert specs == [None, {"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.7}]
    assert all(o["trials"] for o in res["outcomes"])  # both shapes simulated (an equal cost is still tried)
    assert res["best"] is not None and res["seed_check"] == _checked_here(s)
    assert res["seed_check"]["seeds"] == [1, 2] and len(res["seed_check"]["meets"]) == 2
    detail = api.get(f"/api/searches/{s.pk}/").json()
    assert detail["result"]["seed_check"] == res["seed_check"]
    assert detail["seed_check_words"] == res["seed_check"]["words"]
    anon = Client()
    page = anon.get(f"/searches/r/{s.slug}/").content.decode()
    assert "Across seeds:" in page and f"meets on {sum(res['seed_check']['meets'])} of 2" in page
    assert "EAGLE k=3 at acceptance 0.7" in page
    rows = list(csv.DictReader(io.StringIO(anon.get(f"/searches/r/{s.slug}/download.csv").content.decode())))
    assert {row["speculative"] for row in rows} == {"none", "eagle:3:0.7"}
    exported = json.loads(anon.get(f"/searches/r/{s.slug}/download.json").content)
    assert exported["result"]["seed_check"] == res["seed_check"]
    assert exported["seed_check_words"] == res["seed_check"]["words"]
    assert "Across seeds:" in anon.get(f"/searches/r/{s.slug}/download.html").content.decode()
    said = " ".join((DOCS / "search.md").read_text(encoding="utf-8").split())  # what the page says it answers
    assert f"answers `{res['best']['replicas']} replica of {res['best']['candidate']['label']} (1 GPU) at $3.78/h`" \
        in said and f"`seed_check_words` `{res['seed_check']['words']}`" in said
    itl = [o["trials"][0]["values"]["ITL p90"] * 1000 for o in res["outcomes"]]
    assert f"ITL p90 {itl[1]:.2f} ms against {itl[0]:.2f} ms" in said


def test_a_search_without_speculation_keeps_its_csv_columns(api):
    body = _body(check_seeds=0)
    del body["space"]["speculative"]
    s = _run_all(api.post("/api/searches/", body, format="json").json()["id"])
    assert s.num_chunks == 1 and "seed_check" not in s.result  # 0: no last stage
    header = Client().get(f"/searches/r/{s.slug}/download.csv").content.decode().splitlines()[0]
    assert "speculative" not in header
    assert "Across seeds" not in Client().get(f"/searches/r/{s.slug}/").content.decode()


def test_no_answer_and_a_trace_say_not_checked(api):
    hopeless = _body()
    hopeless["slo"]["targets"][0]["max_s"] = 0.001  # no shape can give a first token in 1 ms
    s = _run_all(api.post("/api/searches/", hopeless, format="json").json()["id"])
    assert s.result["best"] is None and s.result["seed_check"] is None
    assert "Across seeds:</strong> not checked (no answer)." in Client().get(f"/searches/r/{s.slug}/").content.decode()
    trace = "Timestamp,Model,Request tokens,Response tokens\n" + "".join(
        f"{i * 0.25},ChatGPT,512,64\n" for i in range(12))  # BurstGPT's columns (docs/traffic.md)
    s = _run_all(api.post("/api/searches/", _body(workload={"trace": trace, "format": "auto"}),
                          format="json").json()["id"])
    assert s.num_chunks == 1 and s.result["best"] is not None and "seed_check" not in s.result
    detail = api.get(f"/api/searches/{s.pk}/").json()
    assert detail["seed_check_words"] == "not checked (a trace is one draw)"


def test_the_seed_check_is_priced_into_the_search(api, settings):
    """Its 2 x check_seeds simulations of the largest answer must fit one chunk's time, like every shape's."""
    from planner.search.definition import build_inputs as inputs_of
    from planner.search.pricing import price_search

    ok = api.post("/api/searches/", _body(check_seeds=10), format="json")
    assert ok.status_code == 202
    priced = price_search(*inputs_of(Search.objects.get(pk=ok.json()["id"]).snapshot), seeds=10)
    assert priced.stage.seconds > priced.heaviest.seconds
    settings.KVP_CHUNK_MAX_SECONDS = (priced.stage.seconds + priced.heaviest.seconds) / 2
    r = api.post("/api/searches/", _body(check_seeds=10), format="json")
    assert r.status_code == 400, r.content
    (msg,) = r.json()["errors"]["check_seeds"]
    assert msg.startswith("The seed check (the answer on 10 more seeds, up to 2 replicas, and one fewer) is estimated")
    assert api.post("/api/searches/", _body(check_seeds=0), format="json").status_code == 202
    stage = Search.objects.get(pk=ok.json()["id"]).chunks.get(index=1)
    assert stage.candidates == [] and stage.shapes == [[0.0, round(priced.stage.seconds, 4)]]


def test_the_search_page_takes_speculative_settings_and_the_seed_count(django_user_model):
    web = Client()
    web.force_login(django_user_model.objects.create_user("pia", password="pw-pia-12345"))
    assert all(f'name="{f}"' in web.get("/searches/").content.decode() for f in ("speculative", "check_seeds"))
    form = {"model": "llama-3-1-8b", "gpus": ["h100-sxm5-80gb"], "rate": "10", "duration_s": "2.4",
            "prompt_mean": "1024", "prompt_std": "256", "output_mean": "64", "output_std": "16", "ttft_ms": "500",
            "ttft_pct": "p90", "itl_pct": "p90", "e2e_pct": "p90", "tensor_parallel": "1", "precisions": ["bf16"],
            "max_num_seqs": "256", "max_replicas": "2"}
    bad = web.post("/searches/", {**form, "speculative": "none, medusa:3:0.7", "check_seeds": "11"}).content.decode()
    assert "medusa:3:0.7: method must be one of eagle, eagle3, mtp, ngram" in bad
    assert "Ensure this value is less than or equal to 10." in bad
    assert "acceptance_rate must be a number in (0, 1]" in web.post(
        "/searches/", {**form, "speculative": "eagle:3:0"}).content.decode()
    assert Search.objects.count() == 0
    assert web.post("/searches/", {**form, "speculative": "none, eagle:3:0.7", "check_seeds": "2"}).status_code == 302
    assert web.post("/searches/", form).status_code == 302  # left out: without speculation, 3 seeds
    spec, plain = Search.objects.order_by("id")
    assert spec.definition["space"]["speculative"] == [None, "eagle:3:0.7"] and spec.snapshot["check_seeds"] == 2
    assert "speculative" not in plain.definition["space"] and plain.snapshot["check_seeds"] == 3


def test_a_speculative_shape_is_priced_by_the_one_price_of_a_run():
    """The search's price of a speculative shape is :func:`simulator.batch.budget.price_run`'s, which charges its
    drafted output tokens and requests (the price every simulation of the planner is refused or run by)."""
    from planner.search.pricing import price_search
    from simulator.batch import WorkloadSize, budget
    from simulator.search import SearchSpace, Slo, default_max_model_len, prepare_candidate
    from tests.simulator.test_search import H100, LLAMA_8B

    space = SearchSpace((H100,), tensor_parallel=(1,), precisions=("bf16",), max_replicas=2,
                        speculative=(None, "eagle:3:0.7"))
    wl = generate_workload(WorkloadSpec.from_dict(SPEC), seed=0)
    slo = Slo.from_dict(_body()["slo"])
    priced = price_search(wl, LLAMA_8B, space, slo, seeds=3)
    size, mml = WorkloadSize.of(wl), default_max_model_len(wl, LLAMA_8B)
    plain, eagle = (prepare_candidate(i, c, LLAMA_8B, space, mml, wl, slo) for i, c in enumerate(space.candidates()))
    assert plain.config.speculative is None and eagle.config.speculative is not None
    assert priced.shapes[1][1] == round(budget.price_run(size, eagle.config).seconds, 4)
    drafted = (size.output_tokens * budget.SECONDS_PER_DRAFTED_OUTPUT_TOKEN
               + size.n * budget.SECONDS_PER_SPECULATIVE_REQUEST)
    assert budget.price_run(size, eagle.config).seconds >= drafted
    assert priced.shapes[1][1] > priced.shapes[0][1]  # the drafted tokens cost more than the plain steps
    assert priced.stage.seconds == pytest.approx(max(budget.price_seed_check(size, p.config, 2, 3).seconds
                                                     for p in (plain, eagle)))
    assert budget.price_seed_check(size, eagle.config, 2, 3).seconds == pytest.approx(3 * sum(
        budget.price_run(size, eagle.config, instances=n).seconds for n in (2, 1)))


def test_while_the_seeds_are_checked_the_page_says_so(api):
    from planner import tasks
    from planner.search import selectors

    out = api.post("/api/searches/", _body(), format="json").json()
    assert tasks.run_search_chunk(out["id"], 0) == "done"
    s = Search.objects.get(pk=out["id"])
    p = selectors.search_progress(search=s)
    assert s.status == "running" and p["phase"] == "seeds" and p["fraction"] < 1
    from planner.search.pricing import price_stage  # the stage's estimate is now the answer's, not the heaviest's

    answered = price_stage(*build_inputs(s.snapshot), s.result["best"], None, 2).seconds
    assert s.chunks.get(index=1).shapes == [[0.0, round(answered, 4)]] and answered > 0
    web = Client()
    web.force_login(s.owner)
    assert "checking the answer on more traffic seeds" in web.get(f"/searches/{s.pk}/").content.decode()
    assert tasks.run_search_chunk(out["id"], 1) == "done"
    s.refresh_from_db()
    assert s.status == "done" and selectors.search_progress(search=s)["phase"] == "shapes"
