"""Public trace formats (Mooncake, Azure, BurstGPT, vLLM bench) as the planner's workload, through the API
(issue 35 item 2): the same answer as the command line for the same trace, options applied, errors at the
field. Samples from tests/data/traces/ (their README gives each file's source and licence)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from simulator.cli import commands as cli

pytestmark = pytest.mark.django_db
TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
MOONCAKE = "".join((TRACES / "mooncake_conversation_head600.jsonl").read_text().splitlines(True)[:120])
AZURE = (TRACES / "azure_code_2023_head500.csv").read_text()
ENGINE = {"num_gpu_blocks": 60_000, "block_size": 16, "max_num_seqs": 128, "max_num_batched_tokens": 8192,
          "max_model_len": 131_072, "enable_prefix_caching": True}


@pytest.fixture
def client():
    c = APIClient()
    c.force_authenticate(get_user_model().objects.create_user("tracer", password="pw-123456789"))
    return c


def simulate(client, workload: dict):
    return client.post("/api/simulations/", {"engine": ENGINE, "workload": workload}, format="json")


def cli_totals(capsys, tmp_path, text: str, *extra: str) -> dict:
    (tmp_path / "t.txt").write_text(text)
    (tmp_path / "c.json").write_text(json.dumps(ENGINE))
    assert cli.main(["run", "--workload", str(tmp_path / "t.txt"), "--config", str(tmp_path / "c.json"), *extra]) == 0
    return json.loads(capsys.readouterr().out)["totals"]


def test_a_mooncake_trace_is_guessed_and_answers_as_the_command_line_does(client, capsys, tmp_path):
    r = simulate(client, {"trace": MOONCAKE, "format": "auto"})
    assert r.status_code == 200, r.json()
    totals = r.json()["totals"]
    expected = cli_totals(capsys, tmp_path, MOONCAKE)
    assert totals["prefix_cache_hits"] == expected["prefix_cache_hits"] > 0  # the hash_ids' shared blocks
    for key in ("finished", "num_steps", "preemptions", "total_prefill_tokens"):
        assert totals[key] == expected[key], key


def test_options_cut_and_speed_the_trace_as_on_the_command_line(client, capsys, tmp_path):
    options = {"window": [0, 30], "speedup": 2}
    r = simulate(client, {"trace": MOONCAKE, "format": "mooncake", "options": options})
    assert r.status_code == 200, r.json()
    expected = cli_totals(capsys, tmp_path, MOONCAKE, "--trace-window", "0:30", "--trace-speedup", "2")
    assert r.json()["totals"]["finished"] == expected["finished"] < 120
    assert r.json()["totals"]["num_steps"] == expected["num_steps"]


def test_an_azure_csv_is_guessed_beside_the_planner_s_own_csv(client):
    r = simulate(client, {"trace": AZURE})  # format left out: the planner's own CSV, which this is not
    assert r.status_code == 400
    r = simulate(client, {"trace": AZURE, "format": "auto"})
    assert r.status_code == 200, r.json()
    assert r.json()["totals"]["finished"] == 500


@pytest.mark.parametrize(("workload", "field", "words"), [
    ({"trace": MOONCAKE, "format": "parquet"}, "workload.format", "must be one of auto, csv, jsonl, mooncake"),
    ({"trace": MOONCAKE, "format": "mooncake", "options": {"windw": [0, 5]}}, "workload.options",
     "windw: unknown trace option"),
    ({"trace": MOONCAKE, "format": "mooncake", "options": {"window": [5]}}, "workload.options", "window: give"),
    ({"trace": MOONCAKE, "format": "mooncake", "options": {"speedup": 0}}, "workload.options", "speedup"),
    ({"trace": AZURE, "format": "csv", "options": {"speedup": 2}}, "workload.options",
     "apply to the public formats"),
    ({"trace": MOONCAKE, "format": "azure"}, "workload.trace", ""),
])
def test_bad_trace_input_is_a_400_at_its_field(client, workload, field, words):
    r = simulate(client, workload)
    assert r.status_code == 400, r.json()
    errors = r.json()["errors"]
    assert field in errors, errors
    assert words in " ".join(errors[field])


SWEEP_FORM = {"name": "mooncake day", "mode": "grid", "tensor_parallel_size": 1, "gpu_memory_utilization": 0.9,
              "block_size": 16, "num_gpu_blocks": 60000, "enable_prefix_caching": "on", "n": 20,
              "prompt": "normal:100,20", "output": "normal:30,5", "arrival": "poisson:2", "arrival_unit": "s",
              "seed": 0, "axis1_param": "num_gpu_blocks", "axis1_values": "20000, 60000", "axis1_scale": "linear",
              "cliff_metric": "preemptions_per_request", "cliff_param": "num_gpu_blocks"}


@pytest.mark.parametrize(("fmt", "expected"), [("auto", "mooncake"), ("mooncake", "mooncake")])
def test_the_sweep_form_takes_a_public_trace_file(fmt, expected):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    from planner.models import Sweep

    c = Client()
    c.force_login(get_user_model().objects.create_user("former", password="pw-123456789"))
    upload = SimpleUploadedFile("conversation.jsonl", MOONCAKE.encode(), content_type="application/jsonl")
    r = c.post("/sweeps/new/", {**SWEEP_FORM, "trace": upload, "trace_format": fmt})
    assert r.status_code == 302, r.content.decode()[:3000]
    workload = Sweep.objects.get(name="mooncake day").snapshot["workload"]
    assert workload["format"] == expected and workload["n"] == 120
    assert workload["trace_report"]["format"] == "mooncake" and workload["trace_report"]["trace_shared_prompt_tokens"] > 0


def test_the_sweep_form_names_a_trace_in_the_wrong_format_at_its_field():
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    c = Client()
    c.force_login(get_user_model().objects.create_user("former2", password="pw-123456789"))
    upload = SimpleUploadedFile("code.csv", AZURE.encode(), content_type="text/csv")
    r = c.post("/sweeps/new/", {**SWEEP_FORM, "trace": upload, "trace_format": "burstgpt"})
    assert r.status_code == 200
    html = r.content.decode()
    assert 'id="id_trace_error"' in html and "burstgpt" in html.lower()


@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_scaled_prompts_keep_what_a_public_trace_s_turns_share(scale):
    """Mooncake turns share their parent's leading blocks (``parent_len``), not its whole context: scaled, each
    keeps sharing those tokens, at most the parent's new context, and stays a valid workload."""
    import numpy as np

    from planner.sweeps.runner import scale_lengths
    from simulator.workload import read_public_trace

    wl, _ = read_public_trace(MOONCAKE, "mooncake")
    partial = (wl.parent >= 0) & (wl.parent_len >= 0)
    assert partial.any()
    out = scale_lengths(wl, scale, 1.0)
    p = out.parent[partial]
    ctx = out.prompt_len[p] + out.output_len[p]
    assert np.array_equal(out.parent_len[partial], np.minimum(wl.parent_len[partial], ctx))
    unique = out.prompt_len - out.shared_len()
    assert np.array_equal(unique, np.maximum(1, np.round((wl.prompt_len - wl.shared_len()) * scale)))
