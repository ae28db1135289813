"""The catalog: browse models and GPUs, import a Hugging Face config.json."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

HF_CONFIGS = Path(__file__).resolve().parents[2] / "gpuprofiles" / "data" / "hf_configs"


def test_catalog_lists_models_and_gpus_with_filters(page, screenshot):
    page.goto("/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Catalog").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Catalog")
    screenshot(page, "catalog")

    page.get_by_role("link", name="Models", exact=True).first.click()
    page.get_by_label("Name contains").fill("Llama 3.1")
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("table tbody tr")
    expect(rows.first).to_contain_text("Llama 3.1")
    for text in rows.all_inner_texts():
        assert "Llama 3.1" in text or "3.1" in text, text
    screenshot(page, "catalog-models")

    page.goto("/catalog/gpus/")
    expect(page.get_by_role("link", name="H100 SXM5 80GB")).to_be_visible()
    page.get_by_role("link", name="H100 SXM5 80GB").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("H100 SXM5 80GB")
    screenshot(page, "catalog-gpu")


def test_import_config_json_upload(signed_in_page, screenshot):
    page = signed_in_page
    page.goto("/catalog/models/import/")
    page.get_by_label("or upload config.json").set_input_files(str(HF_CONFIGS / "Qwen--Qwen3-8B_config.json"))
    page.get_by_label("Name").fill("My Qwen3 8B")
    screenshot(page, "import")
    page.get_by_role("button", name="Import").click()

    expect(page.get_by_text("Imported My Qwen3 8B.")).to_be_visible()
    expect(page.get_by_role("heading", level=1)).to_contain_text("My Qwen3 8B")
    expect(page).to_have_url(re.compile(r"/catalog/models/[-\w]+/$"))


def test_import_shows_a_field_error_for_invalid_json(signed_in_page):
    page = signed_in_page
    page.goto("/catalog/models/import/")
    page.get_by_label("config.json (paste)").fill('{"model_type": "llama", "hidden_size": ')
    page.get_by_role("button", name="Import").click()
    field = page.locator(".field.has-error")
    expect(field).to_have_count(1)
    expect(field.locator("label")).to_contain_text("config.json (paste)")
    expect(field.locator(".errorlist")).to_be_visible()
