"""The API docs page renders offline (Swagger UI served locally) and lists the API."""

from __future__ import annotations

from playwright.sync_api import expect


def test_api_docs_render_from_local_assets(page, screenshot):
    page.goto("/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="API docs").click()
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("KV Planner API")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
    # SWAGGER_UI_SETTINGS defaultModelsExpandDepth -1: no wall of schemas under the operations
    expect(page.locator(".swagger-ui section.models")).to_have_count(0)
    screenshot(page, "api-docs")
