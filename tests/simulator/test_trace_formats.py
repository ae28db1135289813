"""Public trace formats (issue 35, item 1): Mooncake, Azure, BurstGPT and vllm bench results read into workloads.

The samples in ``tests/data/traces/`` are real rows of the published traces (see its README for source and
licence), except the vllm-bench file, which is constructed to the keys vLLM's benchmark writes. Prefix
sharing from Mooncake ``hash_ids`` is checked against an independent computation: with an unbounded cache
the engine must hit exactly the blocks the ids say were seen before; with a bounded cache and one request
at a time, exactly what a plain LRU model of vLLM's free queue over the same block ids hits.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from simulator.batch import simulate
from simulator.engine import EngineConfig
from simulator.workload import TraceOptions, WorkloadError, guess_format, read_any_trace, read_public_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
MOONCAKE = DATA / "mooncake_conversation_head600.jsonl"
AZURE_CONV = DATA / "azure_conv_2023_head1500.csv"
AZURE_CODE = DATA / "azure_code_2023_head500.csv"
BURSTGPT = DATA / "burstgpt_readme_rows.csv"
BENCH = DATA / "vllm_bench_detailed_sample.json"


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def mooncake_rows(n: int | None = None) -> list[dict]:
    rows = [json.loads(line) for line in text(MOONCAKE).splitlines() if line.strip()]
    return rows[:n] if n else rows


@pytest.mark.parametrize(("path", "fmt"), [(MOONCAKE, "mooncake"), (AZURE_CONV, "azure"), (AZURE_CODE, "azure"),
                                           (BURSTGPT, "burstgpt"), (BENCH, "vllm-bench")])
def test_every_sample_is_recognised_from_its_content(path, fmt):
    assert guess_format(text(path)) == fmt
    wl, report = read_public_trace(text(path), name=path.name)
    assert report.format == fmt and report.guessed and wl.n == report.requests > 0
    assert np.all(np.diff(wl.arrival) >= 0) and wl.arrival[0] == 0.0 and wl.arrival_unit == "s"


def test_a_planner_csv_or_a_json_object_of_other_keys_is_no_public_format():
    assert guess_format("arrival_time,prompt_tokens,output_tokens\n0,10,5\n") is None
    assert guess_format('{"arrival_time": 0, "prompt_tokens": 3, "output_tokens": 1}\n') is None
    wl, report = read_any_trace("arrival_time,prompt_tokens,output_tokens\n0,10,5\n1.5,20,3\n")
    assert report is None and wl.prompt_len.tolist() == [10, 20]


def test_mooncake_keeps_lengths_and_milliseconds():
    rows = mooncake_rows()
    wl, report = read_public_trace(text(MOONCAKE), "mooncake")
    assert not report.guessed and report.rows == wl.n == len(rows) == 600
    assert wl.prompt_len.tolist() == [r["input_length"] for r in rows]
    assert wl.output_len.tolist() == [r["output_length"] for r in rows]
    assert wl.arrival.tolist() == [(r["timestamp"] - rows[0]["timestamp"]) / 1000 for r in rows]
    assert wl.ids[:2] == ("line-1", "line-2")


def independent_shared_tokens(rows: list[dict], block: int = 512) -> list[int]:
    """For each request, the leading prompt tokens that the ids say an earlier request also has."""
    prompts_by_chain: dict[tuple, int] = {}  # leading ids -> longest prompt seen with them
    out = []
    for r in rows:
        ids, length = r["hash_ids"], r["input_length"]
        k, cap = 0, 0
        while k < len(ids) and tuple(ids[:k + 1]) in prompts_by_chain:
            cap = prompts_by_chain[tuple(ids[:k + 1])]
            k += 1
        out.append(min(k * block, length, cap))
        for j in range(len(ids)):
            key = tuple(ids[:j + 1])
            prompts_by_chain[key] = max(prompts_by_chain.get(key, 0), length)
    return out


def test_an_unbounded_cache_hits_exactly_what_the_hash_ids_share():
    rows = mooncake_rows(300)
    trace = "\n".join(json.dumps(r) for r in rows) + "\n"
    wl, report = read_public_trace(trace, "mooncake")
    shared = independent_shared_tokens(rows)
    assert report.prefix_tokens == sum(shared) > 0
    bs = 16
    expected = sum((min(s, r["input_length"] - 1) // bs) * bs for s, r in zip(shared, rows))  # never the last token
    cfg = EngineConfig(num_gpu_blocks=2_000_000, block_size=bs, max_num_seqs=256, max_num_batched_tokens=8192)
    res = simulate(wl, [cfg])[0]
    assert res.totals["finished"] == 300 and res.totals["preemptions"] == 0
    assert res.totals["prefix_cache_hits"] == expected


def lru_hits(rows: list[dict], usable_blocks: int, bs: int) -> int:
    """Prompt tokens hit by one request at a time on vLLM's free queue, over keys made from the trace's ids.

    An engine block's key is (the ids up to its trace block, its place in that block) while it lies in the
    prompt, else the request's own. Hits: the longest run of leading full prompt blocks cached (at most
    (prompt - 1) // bs). Allocation takes the free queue's head (evicting its key); a finished request's
    blocks go back to the tail, last block first, and only full blocks keep a key.
    """
    per = 512 // bs
    free: OrderedDict[int, tuple | None] = OrderedDict((b, None) for b in range(usable_blocks))
    cached: dict[tuple, int] = {}
    hits = 0
    for r, row in enumerate(rows):
        ids, length, out = row["hash_ids"], row["input_length"], row["output_length"]
        nblocks = -(-(length + out - 1) // bs)
        keys = [(tuple(ids[:j // per + 1]), j % per) if (j + 1) * bs <= length else ("own", r, j)
                for j in range(nblocks)]
        full = (length + out - 1) // bs  # blocks that end up full (the last token's KV is never written)
        mine = []
        for j in range((length - 1) // bs):
            b = cached.get(keys[j])
            if b is None:
                break
            free.pop(b, None)
            mine.append(b)
        hits += len(mine) * bs
        for j in range(len(mine), nblocks):
            b, old = free.popitem(last=False)
            if old is not None and cached.get(old) == b:
                del cached[old]
            if j < full:
                cached.setdefault(keys[j], b)
            mine.append(b)
        for j in reversed(range(nblocks)):
            b = mine[j]
            key = keys[j] if j < full and cached.get(keys[j]) == b else None
            free[b] = key
            if key is None:
                free.move_to_end(b, last=False)  # an unhashed block goes to the head
    return hits


def test_a_bounded_cache_hits_what_an_independent_lru_over_the_same_ids_hits():
    rows = [r for r in mooncake_rows() if r["input_length"] + r["output_length"] <= 40_000]
    wl, _ = read_public_trace("\n".join(json.dumps(r) for r in rows) + "\n", "mooncake")
    bs, shared = 16, sum(independent_shared_tokens(rows))
    found = []
    for blocks in (20_000, 100_000):  # a conversation's next turn comes back after more than 20,000 blocks
        cfg = EngineConfig(num_gpu_blocks=blocks, block_size=bs, max_num_seqs=1, max_num_batched_tokens=8192)
        res = simulate(wl, [cfg])[0]
        assert res.totals["finished"] == len(rows)
        expected = lru_hits(rows, blocks - 1, bs)  # the null block is not usable
        assert res.totals["prefix_cache_hits"] == expected
        found.append(expected)
    assert 0 < found[0] < found[1] < shared  # evictions cost hits, fewer with the larger cache


def test_azure_rows_are_read_with_their_fractional_seconds():
    wl, report = read_public_trace(text(AZURE_CONV), name=AZURE_CONV.name)
    assert report.rows == wl.n == 1500 and not report.dropped
    assert wl.prompt_len[:3].tolist() == [374, 396, 879] and wl.output_len[:3].tolist() == [44, 109, 55]
    assert wl.arrival[1] == pytest.approx(4.314579, abs=1e-9)  # 18:15:50.9951690 - 18:15:46.6805900


def test_burstgpt_keeps_failed_requests_out_and_counts_them():
    wl, report = read_public_trace(text(BURSTGPT), name=BURSTGPT.name)
    assert wl.prompt_len.tolist() == [472, 1087, 417] and wl.arrival.tolist() == [0.0, 40.0, 113.0]
    failed = text(BURSTGPT) + "120,GPT-4,300,0,300,API log\n130,ChatGPT,0,12,12,API log\n"  # constructed rows
    wl2, report2 = read_public_trace(failed, name="constructed.csv")
    assert wl2.n == 3 and report2.dropped == {"failed": 1, "zero_tokens": 1} and report2.rows == 5


def test_vllm_bench_result_keeps_the_measured_latencies_to_compare_with():
    wl, report = read_public_trace(text(BENCH), name=BENCH.name)
    assert wl.n == 5 and report.dropped == {"failed": 1}
    assert wl.prompt_len.tolist() == [512, 640, 1024, 400, 224]
    assert wl.arrival.tolist() == pytest.approx([0.0, 0.42, 1.37, 2.2, 3.05])
    m = report.measured
    assert m["ttft_p50_ms"] == pytest.approx(44.0) and m["itl_p50_ms"] == pytest.approx(10.4)
    assert m["tpot_mean_ms"] == pytest.approx(np.mean([10.2, 10.5, 11.1, 10.4, 9.9]))


def test_options_cut_and_scale_with_every_request_kept_out_counted():
    opts = TraceOptions(window=(20.0, 120.0), max_model_len=32_768, sample=100, speedup=4.0, seed=3)
    wl, report = read_public_trace(text(MOONCAKE), options=opts)
    rows = mooncake_rows()
    t = np.array([r["timestamp"] for r in rows]) / 1000
    in_window = (t >= 20) & (t < 120)
    short = np.array([r["input_length"] + r["output_length"] <= 32_768 for r in rows])
    assert report.dropped["outside_window"] == int((~in_window).sum())
    assert report.dropped["longer_than_max_model_len"] == int((in_window & ~short).sum())
    assert wl.n == 100 == report.requests and report.dropped["sampled_out"] == int((in_window & short).sum()) - 100
    assert wl.arrival.max() < 100 / 4.0 and report.options["speedup"] == 4.0


def test_rate_scale_thins_or_copies_and_copies_share_only_what_their_original_shares():
    base, _ = read_public_trace(text(MOONCAKE))
    thin, rep = read_public_trace(text(MOONCAKE), options=TraceOptions(rate_scale=0.5, seed=1))
    assert 240 < thin.n < 360 and rep.dropped["thinned_by_rate_scale"] == 600 - thin.n
    double, rep2 = read_public_trace(text(MOONCAKE), options=TraceOptions(rate_scale=2.0))
    assert double.n == 1200 and double.arrival[0::2].tolist() == base.arrival.tolist()
    assert double.prompt_len[1::2].tolist() == base.prompt_len.tolist()
    # a copy shares with earlier requests what its original does, so twice the shared tokens
    # plus what the originals now share with the copies of requests before them (none: copies' own blocks are new)
    assert rep2.prefix_tokens == 2 * read_public_trace(text(MOONCAKE))[1].prefix_tokens


@pytest.mark.parametrize(("trace", "message"), [
    ('{"timestamp": 5, "input_length": 10, "output_length": 2}\n{"timestamp": 1, "input_length": 10, '
     '"output_length": 2}\n', "t.jsonl line 2, field timestamp: arrives before the row above it"),
    ('{"timestamp": -1, "input_length": 10, "output_length": 2}\n', "line 1, field timestamp: must be a finite time"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1, 2]}\n',
     "line 1, field hash_ids: 2 block ids for 10 prompt tokens, more than the 1 blocks"),
    ('{"timestamp": 0, "input_length": "ten", "output_length": 2}\n', "line 1, field input_length: expected a whole"),
    ('{"timestamp": 0, "input_length": 10}\n', "line 1, field output_length: missing"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 2\n', "t.jsonl line 1: invalid JSON"),
    ('{"timestamp": 0, "input_length": 0, "output_length": 0}\n', "no requests in the trace"),
])
def test_a_malformed_mooncake_line_names_the_file_line_and_field(trace, message):
    with pytest.raises(WorkloadError, match=message.replace("(", r"\(")):
        read_public_trace(trace, "mooncake", name="t.jsonl")


def test_azure_and_burstgpt_errors_name_the_line_and_column():
    with pytest.raises(WorkloadError, match="a.csv line 3, column TIMESTAMP: not a date and time"):
        read_public_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,3,4\nyesterday,3,4\n",
                          "azure", name="a.csv")
    with pytest.raises(WorkloadError, match="b.csv line 2, column Request tokens: expected a whole number"):
        read_public_trace("Timestamp,Model,Request tokens,Response tokens\n5,ChatGPT,-3,4\n", "burstgpt", name="b.csv")
    with pytest.raises(WorkloadError, match="the header lacks GeneratedTokens"):
        read_public_trace("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.68,3\n", "azure")


def test_a_trace_past_the_size_limit_is_refused_before_it_is_parsed(monkeypatch):
    import simulator.workload.trace_formats as formats

    monkeypatch.setattr(formats, "MAX_TRACE_BYTES", 1000)
    with pytest.raises(WorkloadError, match="more than the 0 GiB limit|GiB of trace"):
        read_public_trace(text(MOONCAKE), "mooncake")


def test_options_that_leave_nothing_or_make_no_sense_say_so():
    with pytest.raises(WorkloadError, match="no request is left after the options"):
        read_public_trace(text(AZURE_CODE), options=TraceOptions(window=(10_000.0, 20_000.0)))
    for bad in ({"speedup": 0}, {"rate_scale": float("nan")}, {"window": (5.0, 1.0)}, {"sample": 0}):
        with pytest.raises(WorkloadError, match="trace "):
            TraceOptions(**bad)
    with pytest.raises(WorkloadError, match="apply to the public formats"):
        read_any_trace("arrival_time,prompt_tokens,output_tokens\n0,3,4\n", "csv", options=TraceOptions(speedup=2))


def test_the_published_layout_read_at_once_equals_the_line_by_line_reader():
    rows = mooncake_rows()
    compact = "\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "\n"  # not the published layout
    fast, fast_report = read_public_trace(text(MOONCAKE), options=TraceOptions(max_model_len=50_000))
    slow, slow_report = read_public_trace(compact, options=TraceOptions(max_model_len=50_000))
    for column in ("prompt_len", "output_len", "arrival", "parent", "parent_len"):
        assert getattr(fast, column).tolist() == getattr(slow, column).tolist(), column
    assert fast.ids == slow.ids and fast_report.to_dict() == slow_report.to_dict()
