"""'Run it' on the sizing answer: the vllm serve line and the manifests, each copied by its button."""

from __future__ import annotations

from playwright.sync_api import expect


def test_the_copy_buttons_copy_the_command_and_the_manifests(page):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto("/")
    cmd = page.locator("#launch-cmd")
    expect(cmd).to_contain_text("vllm serve meta-llama/Llama-3.1-8B")
    page.get_by_role("button", name="Copy the command").click()
    status = page.locator("#launch-cmd-status")
    expect(status).not_to_be_empty()
    if status.inner_text() == "Copied.":  # the clipboard holds the line, exactly as shown
        assert page.evaluate("navigator.clipboard.readText()") == cmd.inner_text()
    else:  # no clipboard here: the block is selected for Ctrl+C
        assert page.evaluate("window.getSelection().toString()") == cmd.inner_text()
    page.get_by_role("button", name="Copy the manifests").click()
    expect(page.locator("#launch-k8s-status")).not_to_be_empty()
    assert "kind: \"Deployment\"" in page.locator("#launch-k8s").inner_text()
