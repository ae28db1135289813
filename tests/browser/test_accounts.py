"""Sign up, sign out, sign in — with the forms a person uses."""

from __future__ import annotations

import re

from playwright.sync_api import expect


def test_sign_up_then_sign_out_and_sign_in_again(page, screenshot, password):
    page.goto("/")
    page.get_by_role("link", name="Sign in").click()
    page.get_by_role("link", name="Sign up").click()
    expect(page).to_have_url(re.compile(r"/accounts/signup/"))

    page.get_by_label("Username").fill("grace")
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_label("Password confirmation").fill(password)
    page.get_by_role("button", name="Create account").click()

    # Back where the person came from (?next=/), signed in.
    expect(page.get_by_text("You are signed in")).to_be_visible()
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="grace")).to_be_visible()

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("link", name="Sign in")).to_be_visible()

    page.get_by_role("link", name="Sign in").click()
    page.get_by_label("Username").fill("grace")
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="grace")).to_be_visible()


def test_sign_in_with_a_wrong_password_shows_an_error(page, user):
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("correct username and password")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))


def test_account_page_creates_an_api_token(signed_in_page, screenshot, user):
    page = signed_in_page
    page.goto("/accounts/")
    expect(page.get_by_role("heading", level=1)).to_have_text(user.username)
    page.get_by_label("Token name").fill("capacity notebook")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#new-token")).to_have_text(re.compile(r"\S{20,}"))
    expect(page.get_by_role("cell", name="capacity notebook", exact=True)).to_be_visible()
    screenshot(page, "account")
