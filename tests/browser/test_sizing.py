"""Sizing a deployment: the home page's form, its answer, its charts, the GPU comparison."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from gpuprofiles.models import GpuProfile, ModelProfile


def _number(text: str) -> float:
    return float(re.sub(r"[^\d.]", "", text))


def _slug(model, name: str) -> str:
    return model.objects.get(is_catalog=True, name=name).slug


def _wait_for_figure(page, fig_id: str) -> None:
    """Plotly has drawn the figure (its SVG is there)."""
    expect(page.locator(f"#fig-{fig_id} .main-svg").first).to_be_attached()


def test_home_page_defaults_to_llama_8b_on_one_h100_and_answers(page):
    page.goto("/")
    expect(page.get_by_label("Model", exact=True)).to_have_value(_slug(ModelProfile, "Llama 3.1 8B"))
    expect(page.get_by_label("GPU", exact=True)).to_have_value(_slug(GpuProfile, "H100 SXM5 80GB"))
    expect(page.get_by_label("Tensor parallel size (TP)")).to_have_value("1")
    expect(page.get_by_label("GPU memory utilization")).to_have_value("0.9")
    # An answer straight away, for the defaults.
    expect(page.locator("#summary")).to_contain_text("Llama 3.1 8B")
    assert _number(page.locator("#kpi-kv-tokens").inner_text()) > 0


def test_size_a_catalog_model_on_a_catalog_gpu_and_read_the_answer(page, screenshot):
    page.goto("/")
    page.get_by_label("Model", exact=True).select_option(_slug(ModelProfile, "Llama 3.1 70B"))
    page.get_by_label("GPU", exact=True).select_option(_slug(GpuProfile, "H200 SXM 141GB"))
    page.get_by_label("Tensor parallel size (TP)").fill("2")
    page.get_by_label("Max model length").fill("32768")
    page.get_by_role("button", name="Size it").click()

    # The answer is a link: everything is in the query string.
    expect(page).to_have_url(re.compile(r"tensor_parallel_size=2"))
    summary = page.locator("#summary")
    expect(summary).to_contain_text("Llama 3.1 70B")
    expect(summary).to_contain_text("H200")
    expect(summary).not_to_have_class(re.compile(r"\bbad\b"))
    kv_tokens = _number(page.locator("#kpi-kv-tokens").inner_text())
    blocks = _number(page.locator("#kpi-blocks").inner_text())
    concurrency = _number(page.locator("#kpi-concurrency").inner_text())

    # The page says what the API says for the same deployment.
    api = page.request.post(
        "/api/plan/",
        data={
            "model": _slug(ModelProfile, "Llama 3.1 70B"),
            "gpu": _slug(GpuProfile, "H200 SXM 141GB"),
            "tensor_parallel_size": 2,
            "max_model_len": 32768,
        },
    )
    assert api.ok, api.text()
    plan = api.json()
    assert kv_tokens == plan["total_kv_cache_tokens"]
    assert blocks == plan["num_gpu_blocks"]
    assert abs(concurrency - plan["total_max_concurrency"]) < 0.01
    assert kv_tokens == blocks * 16

    for fig in ("memory", "concurrency", "fragmentation"):
        _wait_for_figure(page, fig)
    table = page.get_by_role("table", name="Sizing figures")
    expect(table.get_by_role("row", name=re.compile("KV blocks per GPU"))).to_contain_text(f"{int(blocks):,}")
    screenshot(page, "sizing")


def _pick_gpus(page, names) -> None:
    picker = page.get_by_role("group", name="GPUs to compare")
    for box in picker.get_by_role("checkbox").all():
        box.uncheck()
    for name in names:
        picker.get_by_role("checkbox", name=re.compile(r"^" + re.escape(name) + " · ")).check()


def test_compare_three_gpus(page, screenshot):
    page.goto("/?model=" + _slug(ModelProfile, "Llama 3.1 8B"))
    page.get_by_role("link", name="Compare this model on other GPUs").click()
    expect(page).to_have_url(re.compile(r"/compare/\?"))

    # At the model's full 128K context one request does not fit an L4's KV cache: that row says so
    # and shows no token, concurrency, block or price figure.
    wanted = ["H100 SXM5 80GB", "H200 SXM 141GB", "L4"]
    _pick_gpus(page, wanted)
    page.get_by_role("button", name="Compare").click()
    rows = page.get_by_role("table", name="GPU comparison").locator("tbody tr")
    expect(rows).to_have_count(3)
    l4 = rows.nth(2)
    expect(l4.get_by_role("rowheader")).to_contain_text("L4")
    expect(l4).to_contain_text("Does not fit")
    expect(l4).to_contain_text("131,072 tokens")
    expect(l4.locator("td.num")).to_have_count(0)
    expect(page.locator("#fig-compare")).to_contain_text("does not fit")
    screenshot(page, "compare-does-not-fit")

    # At 16K it fits everywhere, and more memory holds more KV cache: H200 > H100 > L4. (At 32K the L4 is
    # 5 blocks short since vLLM 0.21 subtracts its CUDA-graph estimate, the default rules.)
    page.get_by_label("Max model length").fill("16384")
    page.get_by_role("button", name="Compare").click()
    expect(page).to_have_url(re.compile(r"max_model_len=16384"))
    expect(rows).to_have_count(3)
    for row, name in zip(rows.all(), wanted):
        expect(row.get_by_role("rowheader")).to_contain_text(name)
        expect(row).not_to_contain_text("Does not fit")
    tokens = [_number(r.locator("td").first.inner_text()) for r in rows.all()]
    assert tokens[1] > tokens[0] > tokens[2] > 0
    _wait_for_figure(page, "compare")
    screenshot(page, "compare")


def test_invalid_value_shows_a_field_error(page, screenshot):
    page.goto("/")
    field = page.get_by_label("GPU memory utilization")
    field.fill("1.5")
    page.get_by_role("button", name="Size it").click()

    field = page.get_by_label("GPU memory utilization")
    expect(field).to_have_value("1.5")  # what the person typed is kept
    box = page.locator(".field.has-error")
    expect(box).to_have_count(1)
    expect(box.get_by_role("alert")).to_contain_text("at most 1")
    expect(page.locator("#summary")).to_contain_text("Fix the fields")
    screenshot(page, "sizing-field-error")


def test_import_a_config_json_and_size_it(signed_in_page, screenshot):
    from pathlib import Path

    page = signed_in_page
    config = Path(__file__).resolve().parents[2] / "gpuprofiles" / "data" / "hf_configs" / "Qwen--Qwen3-8B_config.json"
    page.goto("/catalog/models/import/")
    page.get_by_label("config.json (paste)").fill(config.read_text())
    page.get_by_label("Name").fill("Pasted Qwen3 8B")
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_text("Imported Pasted Qwen3 8B.")).to_be_visible()
    # The import's result is no dead end: it shows the KV bytes per token (36 layers x 8 KV heads x 128 x K and V
    # x 2 bytes) and leads on to sizing the model.
    expect(page.locator("#kv-bytes-per-token")).to_contain_text("147,456 bytes in bf16")
    expect(page.locator("#size-this-model")).to_be_visible()

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Sizing").click()
    page.get_by_label("Model", exact=True).select_option(label="Pasted Qwen3 8B (yours)")
    page.get_by_role("button", name="Size it").click()
    expect(page.locator("#summary")).to_contain_text("Pasted Qwen3 8B")
    assert _number(page.locator("#kpi-kv-tokens").inner_text()) > 0
    _wait_for_figure(page, "memory")


def test_sizing_form_works_without_javascript(browser, live_server, catalog):
    context = browser.new_context(java_script_enabled=False, base_url=live_server.url)
    try:
        page = context.new_page()
        page.goto("/")
        page.get_by_label("Max model length").fill("8192")
        page.get_by_role("button", name="Size it").click()
        expect(page.locator("#summary")).to_contain_text("Llama 3.1 8B")
        expect(page.get_by_role("table", name="Sizing figures")).to_contain_text("8,192")
        # a chart says what it would show, instead of an empty box
        expect(page.locator("#fig-memory")).to_contain_text("Per-GPU memory budget (needs JavaScript")
    finally:
        context.close()


def test_sizing_form_is_keyboard_usable(page):
    page.goto("/")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.get_by_label("Max model length").focus()
    page.keyboard.type("16384")
    page.keyboard.press("Enter")  # submits the form
    expect(page).to_have_url(re.compile(r"max_model_len=16384"))
    expect(page.locator("#summary")).to_contain_text("Llama 3.1 8B")
