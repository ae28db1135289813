"""docs/moe_parallelism.md's worked examples are what the planner computes: every table row and comparison sentence
of the page is rebuilt here from POST /api/plan/ answers and must appear in the page verbatim."""

from __future__ import annotations

from pathlib import Path

import pytest
from rest_framework.test import APIClient

from planner.api.sizing import PlanCreateApi

pytestmark = pytest.mark.django_db

DOC = Path(__file__).resolve().parents[2] / "docs" / "moe_parallelism.md"

#: (model, GPU, max_model_len, shapes): the page's worked examples.
EXAMPLES = [
    ("deepseek-v3", "h200-sxm-141gb", 32768, [{"tensor_parallel_size": 8},
                                               {"data_parallel_size": 8, "enable_expert_parallel": True},
                                               {"data_parallel_size": 16, "enable_expert_parallel": True}]),
    ("qwen3-30b-a3b", "h100-sxm5-80gb", None, [{"tensor_parallel_size": 8},
                                                {"data_parallel_size": 8, "enable_expert_parallel": True},
                                                {"tensor_parallel_size": 2, "data_parallel_size": 4,
                                                 "enable_expert_parallel": True}]),
]


def row(d: dict) -> str:
    """One table row of the page: shape and the per-GPU / per-rank / per-deployment figures of an answer."""
    shape = d["summary"].split(" at ", 1)[1].split(":", 1)[0]
    m = d["memory_gib"]
    experts = f"{d['local_experts']}" + (" whole" if d["expert_parallel_size"] > 1 else " slices")
    return (f"| {shape} | {m['weights']:.2f} | {m['kv']:.2f} | {experts} | {d['kv_bytes_per_token_per_gpu']:,.0f} | "
            f"{d['num_gpu_blocks']:,} | {d['kv_cache_tokens']:,} | {d['total_kv_cache_tokens']:,} | "
            f"{d['total_max_concurrency']:.2f} |")


def answers() -> list[dict]:
    api = APIClient()
    out = []
    for model, gpu, mml, shapes in EXAMPLES:
        for shape in shapes:
            body = {"model": model, "gpu": gpu, **shape, **({"max_model_len": mml} if mml else {})}
            r = api.post("/api/plan/", body, format="json")
            assert r.status_code == 200, r.content
            out.append(r.json())
    return out


def test_every_worked_example_row_and_sentence_is_in_the_page(monkeypatch):
    monkeypatch.setattr(PlanCreateApi, "throttle_classes", [])
    text = DOC.read_text(encoding="utf-8")
    for d in answers():
        assert d["fits"], d["reason"]
        assert row(d) in text, f"docs/moe_parallelism.md lacks the row\n{row(d)}"
        assert d["shape_comparison"] in text, f"docs/moe_parallelism.md lacks\n{d['shape_comparison']}"
