"""Trace files (CSV/JSONL) into Workloads, and Workloads out as oracle compact JSON."""

import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.workload.distributions import Constant
from simulator.workload.generators import PrefixGroup, TurnSpec, WorkloadSpec, generate_workload, parse_arrival
from simulator.workload.requests import WorkloadError
from simulator.workload.traces import (
    _columnwise,
    _parse_rows,
    apply_parents,
    parse_trace,
    read_trace,
    workload_to_oracle_dict,
    write_oracle_json,
)

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
    from simulator.workload.requests import Workload
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
    from simulator.workload.requests import Workload
    w = Workload(prompt_len=np.array([5, 5]), output_len=np.array([1, 1]), arrival=np.zeros(2), ids=("x", "x"))
    with pytest.raises(WorkloadError, match="unique"):
        workload_to_oracle_dict(w)


# ---------------------------------------------------------------- column by column = row by row

def outcome(text, fmt, *, rows_only=False):
    """The workload's arrays (or the error message) from parse_trace, or from the row-by-row reader alone."""
    try:
        w = _parse_rows(text, fmt, "t") if rows_only else parse_trace(text, fmt=fmt, name="t")
    except WorkloadError as exc:
        return str(exc)
    return (w.arrival_unit, w.ids, w.prefix_names, w.prompt_len.tolist(), w.output_len.tolist(),
            w.arrival.tolist(), np.signbit(w.arrival).tolist(), w.prefix_id.tolist(), w.prefix_len.tolist(),
            w.parent.tolist())


@pytest.mark.parametrize("text", [
    "arrival_step,prompt_tokens,output_tokens\n0,10,5\n3,007,1\n",  # digits only: parsed in one go
    "# a comment\n\narrival_step,prompt_tokens,output_tokens\r\n0,10,5\r\n\r\n2,1e3,5.0\r\n",
    "prompt_tokens, output_tokens ,arrival_time,id\n 10,5,0.5, x \n10,5,-0,y\n3,4,2,1\n",
])
def test_simple_csv_is_read_column_by_column_as_row_by_row(text):
    assert _columnwise(text, "csv") is not None
    assert outcome(text, "csv") == outcome(text, "csv", rows_only=True)


@pytest.mark.parametrize("text", [
    'id,arrival_step,prompt_tokens,output_tokens\n"a,b",0,10,5\n',  # quoted cell
    "arrival_step,prompt_tokens,output_tokens\n0,10,5\n# a note\n1,10,5\n",  # comment row
    "id,arrival_step,prompt_tokens,output_tokens\n#a,0,10,5\nb,1,10,5\n",  # comment row, by its id
    "id,arrival_step,prompt_tokens,output_tokens\n,0,10,5\nx,1,10,5\n",  # id from the row number
    "arrival_step,prompt_tokens,output_tokens\n0,10,5\n , ,\n",  # blank row
    "arrival_time,arrival_step,prompt_tokens,output_tokens\n,0,10,5\n",  # both columns, one used
    "arrival_step,prompt_tokens,output_tokens,prefix_id,prefix_len\n0,40,5,s,32\n",  # a column read row by row
])
def test_other_valid_csv_is_read_row_by_row(text):
    assert _columnwise(text, "csv") is None
    assert not isinstance(outcome(text, "csv"), str)


@pytest.mark.parametrize("text, message", [
    ("arrival_step,prompt_tokens,output_tokens\n0,10,5\n1,10,0\n", "t line 3, column output_tokens: must be between 1"),
    ("arrival_step,prompt_tokens,output_tokens\n0,,5\n", "t line 2, column prompt_tokens: missing"),
    ("arrival_step,prompt_tokens,output_tokens\n0,99999999999999999999,5\n", "t line 2, column prompt_tokens: must be"),
    ("arrival_step,prompt_tokens,output_tokens\n0,10,5\n1,10,5,\n", "t line 3: expected 3 cells, got 4"),
    ("arrival_step,prompt_tokens,output_tokens\n0,10,5\n1,10\n", "t line 3: expected 3 cells, got 2"),
    ("id,arrival_step,prompt_tokens,output_tokens\nx,0,1,1\nx,1,1,1\n", "t line 3, column id: duplicate"),
    ("arrival_time,prompt_tokens,output_tokens\nnan,1,1\n", "t line 2, column arrival_time: must be a finite"),
    ("arrival_step,prompt_tokens,output_tokens\n0,10,5\n-1,10,5\n", "t line 3, column arrival_step: must be"),
])
def test_a_bad_simple_csv_gets_the_row_by_row_message(text, message):
    assert _columnwise(text, "csv") is None
    assert outcome(text, "csv") == outcome(text, "csv", rows_only=True)
    assert message in outcome(text, "csv")


def test_simple_jsonl_is_read_column_by_column_as_row_by_row():
    text = '{"arrival_time": 0.5, "prompt_tokens": 10, "output_tokens": 5.0, "id": 7}\n\n' \
           '{"id": "b", "output_tokens": "3", "prompt_tokens": 1e3, "arrival_time": 0}\n'
    assert _columnwise(text, "jsonl") is not None
    assert outcome(text, "jsonl") == outcome(text, "jsonl", rows_only=True)
    bad = text + '{"arrival_time": 1, "prompt_tokens": true, "output_tokens": 1}\n'
    assert _columnwise(bad, "jsonl") is None
    assert "t line 4, field prompt_tokens: expected a whole number, got True" in outcome(bad, "jsonl")


CELLS = ["0", "7", "007", " 3 ", "1.5", "1e3", "-1", "-0", "", "abc", "#1", "nan", "99999999999999999999"]
VALUES = st.integers(1, 10**6) | st.sampled_from([0, 7, 1.5, 2.0, -1, 1e30, None, True, "3", " 4", "x"])
HEADERS = st.permutations(["arrival_step", "prompt_tokens", "output_tokens", "id"]).flatmap(
    lambda cols: st.sampled_from([cols, cols[:3], [c.replace("arrival_step", "arrival_time") for c in cols]]))


@settings(max_examples=300, deadline=None)
@given(table=HEADERS.flatmap(lambda header: st.tuples(st.just(header), st.lists(
           st.lists(st.integers(1, 10**6).map(str), min_size=len(header), max_size=len(header))
           | st.lists(st.sampled_from(CELLS), min_size=len(header) - 1, max_size=len(header) + 1),
           min_size=1, max_size=6))),
       newline=st.sampled_from(["\n", "\r\n"]))
def test_csv_readers_agree_on_any_cells(table, newline):
    header, rows = table
    text = newline.join([",".join(header)] + [",".join(r) for r in rows]) + newline
    assert outcome(text, "csv") == outcome(text, "csv", rows_only=True)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.fixed_dictionaries(
    {"arrival_step": VALUES, "prompt_tokens": VALUES, "output_tokens": VALUES}, optional={"id": VALUES}),
    min_size=1, max_size=5))
def test_jsonl_readers_agree_on_any_values(rows):
    text = "".join(json.dumps(r) + "\n" for r in rows)
    assert outcome(text, "jsonl") == outcome(text, "jsonl", rows_only=True)
