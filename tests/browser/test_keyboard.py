"""The sizing, replicas, sweep and search forms used by keyboard alone (issue 33, "What must be true"): Tab reaches
every control a person sees, in order, each with a visible focus ring; "More options" opens with Enter; typing a
value and pressing Enter asks the question; the answer (or the error summary) is where the eye and the focus go.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import _assert_clean, _new_page, session_cookie

#: The focused element, whether it shows a ring (an outline of 2 px or more at 3:1 or more against the white of
#: the form's card, as WCAG 2.2 asks of a focus indicator; or a box shadow) and whether it is inside the form
#: (the argument: its selector).
FOCUSED = """(form) => { const e = document.activeElement, s = getComputedStyle(e);
  const lum = c => { const v = (c.match(/[\\d.]+/g) || [255, 255, 255]).slice(0, 3).map(x => { x /= 255;
    return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; }); return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
  const onWhite = 1.05 / (lum(s.outlineColor) + 0.05);  // the forms sit on white cards
  const ring = (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2 && onWhite >= 3) ||
               (s.boxShadow && s.boxShadow !== 'none');
  return {id: e.id, tag: e.tagName.toLowerCase(), text: (e.innerText || e.value || '').trim().slice(0, 40), ring,
          inForm: !!e.closest(form)}; }"""
#: The ids of the controls a person sees in the form (a closed "More options" or a hidden mode section hides some).
VISIBLE_CONTROLS = """(form) => [...document.querySelector(form).querySelectorAll('input, select, textarea, button, summary')]
  .filter(e => e.type !== 'hidden' && e.checkVisibility()).map(e => e.id || e.tagName.toLowerCase())"""


def tab_through(page, form: str, limit: int = 200) -> list[dict]:
    """Press Tab from the top of the page until the focus has gone through ``form`` and left it."""
    seen: list[dict] = []
    page.evaluate("document.activeElement && document.activeElement.blur()")
    for _ in range(limit):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUSED, form)
        if focused["inForm"]:
            seen.append(focused)
        elif seen:
            return seen
    raise AssertionError(f"the focus never left {form} after {limit} presses of Tab")


def check_every_control_reached_with_a_ring(page, form: str) -> list[dict]:
    seen = tab_through(page, form)
    controls = ("input", "select", "textarea", "button", "summary")  # links in help texts are reached too
    reached = [s["id"] or s["tag"] for s in seen if s["tag"] in controls]
    visible = page.evaluate(VISIBLE_CONTROLS, form)
    missing = [c for c in visible if c not in reached]
    assert not missing, f"Tab never reaches {missing}"
    assert reached == [c for c in visible if c in reached], "Tab follows the order on screen"
    no_ring = [s for s in seen if not s["ring"]]
    assert not no_ring, f"focused without a visible ring: {no_ring}"
    return seen


def tab_to(page, *, element_id: str | None = None, text: str | None = None) -> None:
    """Move the focus to a control the tab-through above proved reachable (by id, or by its text), as Tab would."""
    if element_id:
        page.locator(f"#{element_id}").focus()
    else:
        page.locator("summary", has_text=text).first.focus()
    assert page.evaluate(FOCUSED, "body")["ring"], f"no focus ring on {element_id or text}"


def type_over(page, text: str) -> None:
    """Replace the focused field's value, as a person would: select all, type."""
    page.keyboard.press("Control+A")
    page.keyboard.type(text)


def answer_in_view(page, selector: str, viewport: dict) -> None:
    """The answer is on the screen after asking (above the form on a phone), or has the focus."""
    answer = page.locator(selector)
    expect(answer).to_be_visible()
    box = answer.bounding_box()
    focused = page.evaluate(f"document.activeElement.matches({selector!r})")
    assert focused or box["y"] + box["height"] <= viewport["height"], f"{selector} is below the first screen: {box}"


VIEWPORTS = pytest.mark.parametrize("viewport", [{"width": 1400, "height": 900}, {"width": 390, "height": 844}],
                                    ids=["1400", "390"])


@pytest.fixture
def keyboard_page(browser, live_server, catalog, user, request):
    viewport = request.node.callspec.params["viewport"]
    context, page, problems = _new_page(browser, live_server, cookies=[session_cookie(live_server, user)],
                                        viewport=viewport)
    page.viewport = viewport
    yield page
    try:
        _assert_clean(page, problems)
    finally:
        context.close()


SIZING_FORM = "form[aria-labelledby=form-h]"


@VIEWPORTS
def test_sizing_form_by_keyboard(keyboard_page, viewport):
    page = keyboard_page
    page.goto("/")
    seen = check_every_control_reached_with_a_ring(page, SIZING_FORM)
    assert len([s for s in seen if s["tag"] in ("input", "select")]) == 12, "the first screen: a dozen inputs"
    # "More options" opens with Enter, and its fields come next in the tab order
    tab_to(page, text="More options")
    page.keyboard.press("Enter")
    expect(page.locator("#more-options")).to_have_attribute("open", "")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.closest('#more-options') !== null")
    # type a value, press Enter: the answer, on the first screen
    tab_to(page, element_id="id_max_model_len")
    type_over(page, "8192")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"max_model_len=8192"))
    expect(page.locator("#summary")).to_contain_text("8K tokens")
    answer_in_view(page, "#summary", viewport)


@VIEWPORTS
def test_replicas_form_by_keyboard(keyboard_page, viewport):
    page = keyboard_page
    page.goto("/replicas/")
    check_every_control_reached_with_a_ring(page, SIZING_FORM)
    tab_to(page, element_id="id_rate")
    type_over(page, "4")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"rate=4"))
    answer_in_view(page, "#replicas-answer", viewport)


DESKTOP_ONLY = pytest.mark.parametrize("viewport", [{"width": 1400, "height": 900}], ids=["1400"])


@DESKTOP_ONLY
def test_sweep_form_by_keyboard(keyboard_page, viewport, monkeypatch):
    from planner.models import Sweep
    from planner.sweeps import services

    monkeypatch.setattr(services, "sweep_enqueue", lambda sweep_id: None)  # stored, never run: the form is tested
    page = keyboard_page
    page.goto("/sweeps/new/")
    form = "form[aria-label='New sweep']"
    check_every_control_reached_with_a_ring(page, form)
    # a wrong value: Enter comes back with the error summary, which takes the focus
    tab_to(page, element_id="id_num_gpu_blocks")
    type_over(page, "-5")
    page.keyboard.press("Enter")
    expect(page.locator("#error-summary")).to_be_focused()
    # fixed, by keyboard: the sweep starts
    tab_to(page, element_id="id_num_gpu_blocks")
    type_over(page, "2000")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/sweeps/\d+/$"))
    assert Sweep.objects.count() == 1


@DESKTOP_ONLY
def test_search_form_by_keyboard(keyboard_page, viewport, monkeypatch):
    from planner.models import Search
    from planner.search import services

    monkeypatch.setattr(services, "search_enqueue", lambda search_id: None)
    page = keyboard_page
    page.goto("/searches/")
    form = "form[aria-label='New deployment search']"
    check_every_control_reached_with_a_ring(page, form)
    tab_to(page, element_id="id_rate")
    type_over(page, "2")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/searches/\d+/$"))
    assert Search.objects.count() == 1
