"""Every destructive action asks first (issue 33 item 4): a report deleted in one click, a token revoked in one
click, are now a page that says what is lost, with the action's button and a way back that changes nothing.

The actions: deleting a report (from its page and from the reports list), revoking an API token, deleting one
of your catalog profiles. Sign-out destroys nothing; cancelling a run is the service engineer's (issue 33 item 6).
"""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.gpuprofiles.factories import make_gpu


def _confirm_page(page, heading: str):
    expect(page.locator("h1")).to_have_text(re.compile(heading))
    expect(page.get_by_text("This cannot be undone.")).to_be_visible()
    return page.locator("#confirm-button")


def test_deleting_a_report_asks_first_and_keep_it_changes_nothing(signed_in_page, finished_report):
    from planner.models import Report

    page = signed_in_page
    page.goto(f"/reports/{finished_report.slug}/")
    page.get_by_role("link", name="Delete report…").click()
    _confirm_page(page, "Delete the report")
    expect(page.locator(".consequences")).to_contain_text("link stops working for everyone you shared it with")
    page.get_by_role("link", name="No, keep it").click()
    expect(page).to_have_url(re.compile(rf"/reports/{finished_report.slug}/$"))
    assert Report.objects.filter(pk=finished_report.pk).exists()

    # from the list, by keyboard: the link, then the confirmation's button
    page.goto("/reports/")
    page.get_by_role("link", name=f"Delete report {finished_report.title}…").focus()
    page.keyboard.press("Enter")
    button = _confirm_page(page, "Delete the report")
    assert Report.objects.filter(pk=finished_report.pk).exists(), "opening the confirmation deletes nothing"
    button.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/reports/$"))
    expect(page.locator(".messages")).to_contain_text("deleted")
    assert not Report.objects.filter(pk=finished_report.pk).exists()


def test_revoking_a_token_asks_first(signed_in_page, user):
    from accounts.models import ApiToken
    from accounts.services import api_token_create

    token, _ = api_token_create(user=user, name="laptop")
    page = signed_in_page
    page.goto("/accounts/")
    page.get_by_role("link", name="Revoke token laptop…").click()
    _confirm_page(page, "Revoke the API token “laptop”")
    expect(page.locator(".consequences")).to_contain_text(token.prefix)
    assert ApiToken.objects.filter(pk=token.pk).exists()
    page.get_by_role("link", name="No, keep it").click()
    expect(page).to_have_url(re.compile(r"/accounts/$"))
    page.get_by_role("link", name="Revoke token laptop…").click()
    page.locator("#confirm-button").click()
    expect(page.locator(".messages")).to_contain_text("Token revoked")
    assert not ApiToken.objects.filter(pk=token.pk).exists()


def test_deleting_a_profile_asks_first(signed_in_page, user):
    from gpuprofiles.models import GpuProfile

    gpu = make_gpu(user, name="My lab GPU")
    page = signed_in_page
    page.goto("/catalog/mine/")
    page.get_by_role("link", name="Delete").first.click()
    expect(page.locator("h1")).to_have_text("Delete My lab GPU?")
    assert GpuProfile.objects.filter(pk=gpu.pk).exists()
    page.get_by_role("button", name="Delete").click()
    assert not GpuProfile.objects.filter(pk=gpu.pk).exists()
