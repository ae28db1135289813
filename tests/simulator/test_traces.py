"""Trace files (CSV/JSONL) into Workloads, and Workloads out as oracle compact JSON."""

import io
import json
from pathlib import Path

import numpy as np
import pytest

from simulator.distributions import Constant
from simulator.generators import PrefixGroup, TurnSpec, WorkloadSpec, generate_workload, parse_arrival
from simulator.traces import apply_parents, parse_trace, read_trace, workload_to_oracle_dict, write_oracle_json
from simulator.workload import WorkloadError

DATA = Path(__file__).resolve().parents[1] / "data" / "workloads"


def test_csv_trace_with_prefix_and_conversation():
    w = read_trace(DATA / "chat.csv")
    assert w.ids == ("a", "b", "c", "d", "e") and w.arrival_unit == "s"
    assert w.arrival.tolist() == [0.0, 0.25, 0.5, 1.5, 2.0]
    assert w.prompt_len.tolist() == [100, 80, 50, 130, 64]
    assert w.output_len.tolist() == [20, 10, 5, 12, 8]
    assert w.prefix_names == ("sys",) and w.prefix_len.tolist() == [32]
    assert w.prefix_id.tolist() == [0, 0, -1, -1, 0]
    assert w.parent.tolist() == [-1, -1, -1, 1, -1]
    assert w.shared_len().tolist() == [32, 32, 0, 90, 32]


def test_jsonl_trace_in_steps_matches_the_csv_shape():
    w = read_trace(DATA / "steps.jsonl")
    assert w.arrival_unit == "step" and w.arrival.tolist() == [0, 1, 2, 30]
    assert w.parent.tolist() == [-1, -1, -1, 1]


def csv_error(text):
    with pytest.raises(WorkloadError) as info:
        parse_trace(text, fmt="csv", name="t.csv")
    return str(info.value)


@pytest.mark.parametrize("text, message", [
    ("arrival_time,prompt_tokens,output_tokens\n0,10,5\n0.5,abc,5\n", "t.csv line 3, column prompt_tokens: expected a whole number, got 'abc'"),
    ("arrival_time,prompt_tokens,output_tokens,colour\n", "t.csv line 1, column colour: unknown column"),
    ("arrival_time,prompt_tokens\n0,10\n", "t.csv line 2, column output_tokens: missing"),
    ("arrival_time,prompt_tokens,output_tokens\n-1,10,5\n", "line 2, column arrival_time: must be a finite time >= 0 s"),
    ("arrival_step,prompt_tokens,output_tokens\n1.5,10,5\n", "line 2, column arrival_step: expected a whole number"),
    ("arrival_time,arrival_step,prompt_tokens,output_tokens\n0,0,10,5\n", "line 2: give exactly one of arrival_time"),
    ("arrival_time,prompt_tokens,output_tokens\n0,10,0\n", "line 2, column output_tokens: must be between 1"),
    ("arrival_time,prompt_tokens,output_tokens\n0,10\n", "line 2: expected 3 cells, got 2"),
    ("arrival_time,prompt_tokens,output_tokens,prefix_id\n0,10,5,s\n", "line 2, column prefix_len: missing"),
    ("arrival_time,prompt_tokens,output_tokens,prefix_id,prefix_len\n0,10,5,s,32\n", "line 2, column prompt_tokens: 10 tokens, shorter than its 32-token prefix"),
    ("arrival_time,prompt_tokens,output_tokens,prefix_id,prefix_len\n0,40,5,s,32\n1,40,5,s,16\n", "line 3, column prefix_len: prefix 's' was 32 tokens"),
    ("arrival_time,prompt_tokens,output_tokens,conversation_id\n0,40,5,c\n1,44,5,c\n", "line 3, column prompt_tokens: 44 tokens, fewer than the 45-token context"),
    ("arrival_time,prompt_tokens,output_tokens,conversation_id\n2,40,5,c\n1,50,5,c\n", "line 3, column arrival_time: arrives before the previous turn"),
    ("id,arrival_time,prompt_tokens,output_tokens\nx,0,1,1\nx,0,1,1\n", "line 3, column id: duplicate request id 'x'"),
    ("", "t.csv: empty trace"),
    ("arrival_time,prompt_tokens,output_tokens\n", "t.csv: no requests"),
])
def test_csv_errors_name_line_and_column(text, message):
    assert message in csv_error(text)


def test_jsonl_errors_name_line_and_field():
    with pytest.raises(WorkloadError, match=r"t.jsonl line 2: invalid JSON"):
        parse_trace('{"arrival_step":0,"prompt_tokens":1,"output_tokens":1}\n{oops\n', fmt="jsonl", name="t.jsonl")
    with pytest.raises(WorkloadError, match=r"t.jsonl line 1, field speed: unknown field"):
        parse_trace('{"arrival_step":0,"prompt_tokens":1,"output_tokens":1,"speed":3}\n', fmt="jsonl", name="t.jsonl")
    with pytest.raises(WorkloadError, match=r"line 1, field prompt_tokens: expected a whole number, got True"):
        parse_trace('{"arrival_step":0,"prompt_tokens":true,"output_tokens":1}\n', fmt="jsonl", name="t.jsonl")


def test_missing_file_and_unknown_extension(tmp_path):
    with pytest.raises(WorkloadError, match="no such file"):
        read_trace(tmp_path / "absent.csv")
    (tmp_path / "t.txt").write_text("x")
    with pytest.raises(WorkloadError, match="unknown trace format"):
        read_trace(tmp_path / "t.txt")


def test_oracle_compact_json_shape():
    w = read_trace(DATA / "chat.csv")
    d = workload_to_oracle_dict(w, seed=3, meta={"source": "chat.csv"})
    assert d["generator"] == {"source": "chat.csv"} and d["seed"] == 3
    assert list(d["prefixes"]) == ["sys"] and len(d["prefixes"]["sys"]) == 32
    assert all(3 <= t < 32000 for t in d["prefixes"]["sys"])
    assert d["requests"][0] == {"id": "a", "arrival_time": 0.0, "max_tokens": 20, "prompt_len": 100, "prefix": "sys"}
    assert d["requests"][3] == {"id": "d", "arrival_time": 1.5, "max_tokens": 12, "prompt_len": 130, "parent": "b"}
    assert d["requests"][2] == {"id": "c", "arrival_time": 0.5, "max_tokens": 5, "prompt_len": 50}


def test_written_json_is_compact_and_parents_come_back():
    spec = WorkloadSpec(n=30, arrival=parse_arrival("poisson:1"), prefixes=(PrefixGroup(16, 0.5),),
                        turns=TurnSpec(turns=Constant(3)))
    w = generate_workload(spec, 0)
    buf = io.StringIO()
    write_oracle_json(w, buf, seed=0)
    text = buf.getvalue()
    assert text.endswith("\n") and "\": " not in text
    d = json.loads(text)
    assert [r["arrival_step"] for r in d["requests"]] == w.arrival.astype(int).tolist()
    # a reader that ignores "parent" plus apply_parents gives back the links
    from simulator.workload import Workload
    plain = Workload(prompt_len=w.prompt_len, output_len=w.output_len, arrival=w.arrival,
                     prefix_id=w.prefix_id, prefix_len=w.prefix_len, ids=w.ids, prefix_names=w.prefix_names)
    back = apply_parents(plain, d)
    assert np.array_equal(back.parent, w.parent)
    assert np.array_equal(back.shared_len(), w.shared_len())


def test_apply_parents_rejects_a_forward_reference():
    w = read_trace(DATA / "chat.csv")
    d = workload_to_oracle_dict(w)
    d["requests"][1]["parent"] = "e"
    with pytest.raises(WorkloadError, match=r"requests\[1\].parent"):
        apply_parents(w, d)


def test_duplicate_ids_cannot_be_written():
    from simulator.workload import Workload
    w = Workload(prompt_len=np.array([5, 5]), output_len=np.array([1, 1]), arrival=np.zeros(2), ids=("x", "x"))
    with pytest.raises(WorkloadError, match="unique"):
        workload_to_oracle_dict(w)
