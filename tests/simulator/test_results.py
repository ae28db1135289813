"""SimResult: per-request records and the compact JSON text the CLI prints.

``to_json`` writes the requests column by column; what is proved here is that
its text is exactly ``json.dumps`` of ``to_dict()`` (non-finite floats as
null), on real simulations and on a hand-made result with every edge case.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from simulator.batch.runner import simulate
from simulator.engine.config import EngineConfig
from simulator.engine.results import REQUEST_FIELDS, SimResult, jsonable
from simulator.workload.requests import Workload
from simulator.workload.traces import read_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "workloads"


def dumped(result, steps=True):
    d = result.to_dict()
    if not steps:
        d.pop("steps", None)
    return json.dumps(jsonable(d), separators=(",", ":"))


def simulated():
    config = EngineConfig(num_gpu_blocks=64, block_size=16, max_num_seqs=4, max_num_batched_tokens=128)
    chat = read_trace(DATA / "chat.csv")  # arrivals in seconds, a prefix, a conversation
    steps = read_trace(DATA / "steps.jsonl")
    rng = np.random.default_rng(0)
    big = Workload(prompt_len=np.r_[rng.integers(1, 200, 60), 5000], output_len=rng.integers(1, 50, 61),
                   arrival=np.sort(rng.uniform(0, 5, 61)), arrival_unit="s")  # one request never fits
    return [r for w in (chat, steps, big) for r in simulate(w, [config], record_steps=True)]


@pytest.mark.parametrize("index", range(3))
def test_json_text_is_json_dumps_of_the_dict(index):
    result = simulated()[index]
    assert result.to_json() == dumped(result)
    assert result.to_json(steps=False) == dumped(result, steps=False)


@pytest.mark.parametrize("chunk", [1, 7, 61])
def test_records_made_in_chunks_are_the_same_text(chunk, monkeypatch):
    # the records are made a chunk of requests at a time (the CLI writes them piece by piece): a chunk
    # boundary anywhere changes no byte, and the pieces joined are to_json's text
    import simulator.engine.results as results

    result = simulated()[2]  # 61 requests, one unservable
    whole = result.to_json()
    monkeypatch.setattr(results, "_RECORD_CHUNK", chunk)
    assert "".join(result._records_json()) == "".join(result._records_json(10**6))
    assert "".join(result.json_pieces()) == whole == dumped(result)


def test_an_unservable_request_has_null_times_in_the_json():
    result = simulated()[2]
    last = json.loads(result.to_json())["requests"][-1]
    assert last["status"] == "dropped_unservable" and last["first_token_time_s"] is None


def edge_result(n_steps=6):
    nan, inf = float("nan"), float("inf")
    requests = {
        "id": ("plain", 'quote"back\\slash', "naïve ☃", "tab\tnew\nline"),
        "prompt_len": np.array([1, 10**7, 3, 4]),
        "max_tokens": np.array([5, 6, 7, 8]),
        "arrival": np.array([0.0, -0.0, 1e16, 1e-7]),
        "first_scheduled_step": np.array([-1, 0, 2**40, 3]),
        "first_token_step": np.array([-1, 0, 5, 5]),
        "finish_step": np.array([-1, -1, 7, 123456789]),
        "num_preemptions": np.array([0, 0, 0, 2]),
        "prefix_hit_tokens": np.array([-1, 0, 16, 16]),
        "num_output_tokens": np.array([0, 0, 7, 8]),
        "first_token_time_s": np.array([nan, 0.1, inf, 0.30000000000000004]),
        "finish_time_s": np.array([nan, nan, -inf, 2.5]),
        "status": ("waiting", "running", "finished", "finished"),
    }
    steps = {"step": np.arange(n_steps) * 1000, "num_running": np.full(n_steps, 3),
             "kv_usage": np.array([0.0, -0.0, nan, 1 / 3, 1 / 3, inf])[:n_steps].astype(np.float32)}
    return SimResult(totals={"finished": np.int64(2), "hit_rate": nan, "peak": np.float64(0.5), "ok": np.bool_(True)},
                     requests=requests, steps=steps, arrival_unit="s")


def test_edge_values_are_written_as_json_dumps_writes_them():
    result = edge_result()
    assert result.to_json() == dumped(result)
    d = json.loads(result.to_json())
    assert d["requests"][0]["first_scheduled_step"] is None and d["requests"][2]["first_token_time_s"] is None
    assert d["steps"]["kv_usage"][2] is None and d["totals"]["hit_rate"] is None
    steps_unit = SimResult(totals={}, requests=dict(result.requests, arrival=np.array([0.0, 1.0, 2.0, 30.0])),
                           steps=None)
    assert steps_unit.to_json() == dumped(steps_unit)
    assert '"arrival_step":30,' in steps_unit.to_json()


def test_no_requests_and_no_step_points():
    empty = SimResult(totals={"finished": 0}, requests={k: np.zeros(0) for k in REQUEST_FIELDS} | {
        "id": (), "status": ()}, steps=edge_result(0).steps)
    assert empty.to_json() == dumped(empty) == '{"totals":{"finished":0},"requests":[],"steps":' \
        '{"step":[],"num_running":[],"kv_usage":[]}}'


def test_request_records_use_none_where_no_event():
    records = edge_result().request_records()
    assert records[0] == {
        "id": "plain", "prompt_len": 1, "max_tokens": 5, "arrival_time": 0.0, "first_scheduled_step": None,
        "first_token_step": None, "finish_step": None, "num_preemptions": 0, "prefix_hit_tokens": None,
        "num_output_tokens": 0, "status": "waiting", "first_token_time_s": None, "finish_time_s": None}
    assert records[2]["first_token_time_s"] == float("inf")  # only NaN means "no event"
    assert [type(v) for v in records[3].values()] == [str, int, int, float, int, int, int, int, int, int, str,
                                                      float, float]
