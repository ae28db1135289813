"""One submit shows every error at once, on every form (issue 33 item 5).

Each test fills many bad fields of one form, of every kind of check: the field's own (a range, a whole
number), a cross-field one, and the service's (a TP that does not divide the heads, a prompt longer than the
model, a spec rule), and counts the messages after ONE submit. Before, the sweep form took 6 submits to show 7
bad fields, model edit 3, import 3; sizing hid the TP error behind the length error, search hid max_num_seqs
and PP, the replicas page its service's checks behind the form's.
"""

from __future__ import annotations

import json

from playwright.sync_api import expect

from gpuprofiles import services
from gpuprofiles.models import GpuProfile, ModelProfile


def _messages(page) -> dict[str, str]:
    """``{field id (or "form"): its error text}`` of every error list in the page's main part."""
    out = {}
    for ul in page.locator("main ul.errorlist").all():
        key = (ul.get_attribute("id") or "form").removesuffix("_error").removeprefix("id_")
        out[key] = " ".join(ul.inner_text().split())
    return out


def _check(page, expected: dict[str, str]) -> None:
    # The form posts back to its own address, so wait for the answer page's error lists (auto-retrying)
    # before reading them: reading at once can see the page before the response arrived.
    expect(page.locator("main ul.errorlist")).to_have_count(len(expected))
    errors = _messages(page)
    assert set(errors) == set(expected), errors
    for field, words in expected.items():
        assert words in errors[field], (field, errors[field])
    assert page.locator("main ul.errorlist li").count() == len(expected)


def test_sweep_form_shows_eleven_bad_fields_in_one_submit(signed_in_page, screenshot):
    page = signed_in_page
    page.goto("/sweeps/new/")
    for field, value in {"tensor_parallel_size": "3", "gpu_memory_utilization": "1.5", "block_size": "7",
                         "max_num_seqs": "0", "n": "0", "prompt": "normal:512", "output": "uniform:5",
                         "arrival": "poisson:-1", "axis1_values": "100, lots", "cluster_routing": "telepathy",
                         "slo_ttft_ms": "-5"}.items():
        page.locator(f"#id_{field}").fill(value)
    page.get_by_role("button", name="Start sweep").click()
    summary = page.locator("#error-summary")
    expect(summary.get_by_role("heading")).to_have_text("11 things to fix before the sweep can start")
    _check(page, {"tensor_parallel_size": "does not divide num_attention_heads 32",
                  "gpu_memory_utilization": "1", "block_size": "vLLM's block sizes", "max_num_seqs": "1",
                  "n": "1", "prompt": "“normal” needs 2 numbers", "output": "“uniform” needs 2 numbers",
                  "arrival": "-1", "axis1_values": "'lots' is not a number", "cluster_routing": "telepathy",
                  "slo_ttft_ms": "0.001"})
    expect(summary.get_by_role("link")).to_have_count(11)
    screenshot(page, "sweep-form-every-error")


def test_sizing_form_shows_the_tp_error_beside_the_length_error(page, screenshot):
    page.goto("/")
    page.get_by_label("Tensor parallel size (TP)").fill("64")
    page.get_by_label("Max model length").fill("200000")
    page.get_by_label("GPU memory utilization").fill("1.5")
    page.get_by_label("Max batched tokens").fill("0")
    page.locator("summary", has_text="More options").click()
    page.get_by_label("vLLM version").fill("abc")
    page.locator("summary", has_text="Calibrate with your own vLLM log").click()
    page.get_by_label("Weights per GPU (GiB)").fill("500")
    page.get_by_label("Request lengths (paged vs naive)").fill("normal:5")
    page.get_by_role("button", name="Size it").click()
    _check(page, {"tensor_parallel_size": "64 does not divide num_attention_heads 32",
                  "max_model_len": "beyond Llama 3.1 8B's 131,072 positions",
                  "gpu_memory_utilization": "at most 1", "max_num_batched_tokens": "1",
                  "vllm_version": "'abc'", "weights_gib": "more than the GPU's", "lengths": "normal"})
    screenshot(page, "sizing-every-error")


def test_replicas_form_shows_the_searchs_checks_beside_the_forms(page, screenshot):
    page.goto("/replicas/")
    page.get_by_label("Request rate (requests/s)").fill("0")
    page.get_by_label("Most replicas to try").fill("100")
    page.get_by_label("Prompt length, mean (tokens)").fill("200000")
    page.get_by_label("GPUs per replica (TP)").fill("3")
    page.get_by_label("Inter-token latency target (ms)").fill("-1")
    page.get_by_label("Requests sharing it (fraction)").fill("0.5")
    page.get_by_label("Requests simulated").fill("5000")
    page.get_by_role("button", name="Find replicas").click()
    _check(page, {"rate": "more than 0", "max_instances": "64", "prompt_mean": "131,072 positions",
                  "tensor_parallel_size": "3 does not divide num_attention_heads 32", "itl_ms": "0.001",
                  "prefix_length": "Give the prefix length", "num_requests": "2000"})
    expect(page.locator("#replicas-answer")).to_have_count(0)
    screenshot(page, "replicas-every-error")


def test_search_form_shows_max_num_seqs_and_pp_with_the_others(signed_in_page, screenshot):
    page = signed_in_page
    page.goto("/searches/")
    for field, value in {"rate": "0", "prompt_mean": "200000", "prompt_std": "0", "pipeline_parallel": "0",
                         "max_num_seqs": "0", "max_replicas": "100", "min_goodput_pct": "150"}.items():
        page.locator(f"#id_{field}").fill(value)
    page.get_by_role("button", name="Search", exact=True).click()
    _check(page, {"rate": "0.001", "prompt_mean": "131,072 positions", "pipeline_parallel": "from 1 to 64, got 0",
                  "max_num_seqs": "got 0", "max_replicas": "64", "min_goodput_pct": "100"})
    screenshot(page, "search-every-error")


def test_model_edit_shows_the_specs_checks_beside_the_forms(signed_in_page, user, screenshot):
    own = services.profile_copy(profile=ModelProfile.objects.get(slug="llama-3-1-8b"), owner=user)
    page = signed_in_page
    page.goto(f"/catalog/models/{own.slug}/edit/")
    for field, value in {"name": "", "num_layers": "0", "num_kv_heads": "1.5", "num_experts": "4",
                         "num_experts_per_tok": "8", "num_parameters": "100", "num_active_parameters": "1000",
                         "hidden_size": "20000001"}.items():
        page.locator(f"#id_{field}").fill(value)
    page.get_by_role("button", name="Save").click()
    _check(page, {"name": "required", "num_layers": "1", "num_kv_heads": "whole number",
                  "num_experts_per_tok": "8 is more than num_experts 4",
                  "num_active_parameters": "1,000 is more than num_parameters 100", "hidden_size": "10,000,000"})
    own.refresh_from_db()
    assert own.name == "Llama 3.1 8B (copy)" and own.num_experts == 0  # nothing saved


def test_gpu_edit_shows_every_error_in_one_submit(signed_in_page, user, screenshot):
    own = services.profile_copy(profile=GpuProfile.objects.get(slug="h100-sxm5-80gb"), owner=user)
    page = signed_in_page
    page.goto(f"/catalog/gpus/{own.slug}/edit/")
    for field, value in {"name": "", "memory_gib": "-1", "bandwidth_tbps": "0", "price_per_hour": "-2",
                         "measured": json.dumps({"mfu": 3})}.items():
        page.locator(f"#id_{field}").fill(value)
    page.get_by_role("button", name="Save").click()
    _check(page, {"name": "required", "memory_gib": "0.01", "bandwidth_tbps": "0.001", "price_per_hour": "0",
                  "measured": "mfu"})


def test_model_import_shows_config_generation_config_and_parameters_at_once(signed_in_page, screenshot):
    page = signed_in_page
    page.goto("/catalog/models/import/")
    page.get_by_label("config.json (paste)").fill(json.dumps(
        {"model_type": "llama", "num_hidden_layers": 0, "hidden_size": 4096, "num_attention_heads": 32}))
    page.get_by_label("Parameters (total)").fill("0")
    page.get_by_label("generation_config.json (optional)").fill(json.dumps({"top_p": "x"}))
    page.get_by_role("button", name="Import").click()
    _check(page, {"config_text": "num_hidden_layers", "num_parameters": "1", "generation_config": "top_p"})
    assert not ModelProfile.objects.filter(owner__isnull=False).exists()
    screenshot(page, "import-every-error")
