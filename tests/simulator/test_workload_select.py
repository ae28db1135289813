"""Workload.select: a subset of requests keeps every per-request column (the search's replica shares and
screening leads, and the day's chunks, each built their subset by hand and dropped ``priority``; the leads
also ``parent_len``)."""

from __future__ import annotations

import numpy as np

from simulator.day.chunks import sub_workload
from simulator.search.evaluate import leading_requests
from simulator.workload.requests import Workload


def _conversation() -> Workload:
    # r0 fresh; r1 continues r0 (first 40 tokens of r0's 60-token context); r2 fresh; r3 continues r1 whole
    return Workload(prompt_len=np.array([50, 70, 30, 120]), output_len=np.array([10, 20, 5, 8]),
                    arrival=np.array([0.0, 1.0, 2.0, 3.0]), arrival_unit="s",
                    parent=np.array([-1, 0, -1, 1]), parent_len=np.array([-1, 40, -1, -1]),
                    priority=np.array([3, -2, 7, 1]), ids=("a", "b", "c", "d"))


def test_select_carries_every_column_and_renumbers_parents():
    sub = _conversation().select(np.array([1, 2, 3]))
    assert sub.ids == ("b", "c", "d")
    assert sub.priority.tolist() == [-2, 7, 1]
    assert sub.prompt_len.tolist() == [70, 30, 120]
    # r1's parent r0 is left out: a fresh prompt; r3's parent r1 is now request 0, shared whole
    assert sub.parent.tolist() == [-1, -1, 0]
    assert sub.parent_len.tolist() == [-1, -1, -1]
    assert sub.shared_len().tolist() == [0, 0, 90]


def test_select_keeps_a_partial_parent_share():
    sub = _conversation().select(np.array([0, 1]))
    assert sub.parent.tolist() == [-1, 0]
    assert sub.parent_len.tolist() == [-1, 40]
    assert sub.shared_len().tolist() == [0, 40]


def test_screening_leads_and_day_chunks_keep_priority():
    wl = Workload(prompt_len=np.full(6, 100), output_len=np.full(6, 10), arrival=np.arange(6.0),
                  arrival_unit="s", priority=np.array([5, 4, 3, 2, 1, 0]))
    assert wl.select(np.array([1, 3, 5])).priority.tolist() == [4, 2, 0]  # (a replica's share in a search)
    assert leading_requests(wl, 4).priority.tolist() == [5, 4, 3, 2]
    sub, idx = sub_workload(wl, 2.0, 5.0)
    assert idx.tolist() == [2, 3, 4]
    assert sub.priority.tolist() == [3, 2, 1]
    assert sub.arrival_unit == "s"
