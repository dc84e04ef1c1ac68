"""Searching a case's transcripts in a real browser (static/js/transcripts.js): the case's search
opens every turn's transcript, marks every match and jumps to the first; Enter / Shift+Enter,
F3 / Shift+F3 and the Next / Previous buttons step through them; "Only matching events" hides
the events and turns without one; a turn's own search works the same way; and the page stays
accessible (axe) and still (the controls do not move as the status fills) at 1280 and 390 px."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import reverse

from runs.models import Run
from tests.web.chromium import CHROMIUM
from tests.web.factories import RunSpec, build_run, make_project, make_user
from tests.web.test_browser import login
from tests.web.test_browser_a11y import AXE, axe_problems, sideways_scroll

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
CURRENT = "mark.tx-hit-current"
# Whether the current match is inside the window (not under the case's sticky search bar).
CURRENT_IN_VIEW = """() => {
  const hit = document.querySelector("mark.tx-hit-current");
  if (!hit) return false;
  const box = hit.getBoundingClientRect();
  const bar = document.querySelector(".tx-case-search").getBoundingClientRect();
  return box.top >= bar.bottom && box.bottom <= window.innerHeight && box.width > 0;
}"""
# The turn ("turn-2") and event kind ("tx-user") of the current match.
CURRENT_PLACE = """() => {
  const hit = document.querySelector("mark.tx-hit-current");
  const turn = hit.closest("section.turn").id;
  const kind = [...hit.closest(".tx-ev").classList].find(c => c !== "tx-ev");
  return [turn, kind];
}"""


@pytest.fixture
def three_turns(transactional_db: None) -> Run:
    """A finished run whose case 0 has three sent turns, each with its transcript."""
    return build_run(make_project(), RunSpec(cases=2, turns=3, failing=(), transcripts=True))


@pytest.fixture
def searched_page(chromium: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A page at ``request.param``'s width (default 1280 px); its context may inject axe."""
    viewport = getattr(request, "param", DESKTOP)
    context = chromium.new_context(viewport=viewport, bypass_csp=True)
    context.set_default_timeout(10_000)
    try:
        yield context.new_page()
    finally:
        context.close()


def open_case(page: Any, live_server: Any, run: Run) -> None:
    login(page, live_server, make_user("reader"))
    case = run.cases.get(index=0)
    page.goto(f"{live_server.url}{reverse('case_detail', args=[run.pk, case.pk])}")


def case_search(page: Any, text: str, status: str) -> Any:
    """Type ``text`` into the case's search and wait for its status to read ``status``."""
    box = page.get_by_label("Search the transcripts of every turn")
    box.fill(text)
    page.locator("[data-tx-case-status]", has_text=status).wait_for()
    return box


def status(page: Any) -> str:
    return str(page.locator("[data-tx-case-status]").inner_text())


def test_the_case_search_jumps_to_the_first_match_and_steps_through_them_by_key_and_button(
    live_server: Any, searched_page: Any, three_turns: Run
) -> None:
    page = searched_page
    open_case(page, live_server, three_turns)
    box = case_search(page, "for order 0-", "match 1 of 6 (in 3 turns)")

    # Every match is marked (the message and the answer of each turn); the first is current,
    # scrolled into view below the search bar, which stays on screen.
    assert page.locator("mark.tx-hit").count() == 6
    assert page.locator(CURRENT).count() == 1
    assert page.evaluate(CURRENT_PLACE) == ["turn-1", "tx-user"]
    assert page.evaluate(CURRENT_IN_VIEW)

    box.press("Enter")
    assert status(page) == "match 2 of 6 (in 3 turns)"
    assert page.evaluate(CURRENT_PLACE) == ["turn-1", "tx-assistant"]
    box.press("Enter")
    assert page.evaluate(CURRENT_PLACE) == ["turn-2", "tx-user"]
    assert page.evaluate(CURRENT_IN_VIEW)
    box.press("Shift+Enter")
    assert status(page) == "match 2 of 6 (in 3 turns)"
    box.press("Shift+Enter")
    box.press("Shift+Enter")  # from the first, back to the last
    assert status(page) == "match 6 of 6 (in 3 turns)"
    assert page.evaluate(CURRENT_PLACE) == ["turn-3", "tx-assistant"]
    assert page.evaluate(CURRENT_IN_VIEW)

    # F3 and Shift+F3 from anywhere on the page; the buttons, by their names.
    page.locator("h1").click()
    page.keyboard.press("F3")
    assert status(page) == "match 1 of 6 (in 3 turns)"
    page.keyboard.press("Shift+F3")
    assert status(page) == "match 6 of 6 (in 3 turns)"
    page.get_by_role("button", name="Next match", exact=True).click()
    assert status(page) == "match 1 of 6 (in 3 turns)"
    page.get_by_role("button", name="Previous match", exact=True).click()
    assert status(page) == "match 6 of 6 (in 3 turns)"

    # A text no transcript holds: no match, nothing current, nothing to step to.
    case_search(page, "no such words", "No match for “no such words”")
    assert page.locator(CURRENT).count() == 0
    assert page.get_by_role("button", name="Next match", exact=True).is_disabled()


def test_only_matching_events_hides_the_events_and_turns_without_a_match(
    live_server: Any, searched_page: Any, three_turns: Run
) -> None:
    page = searched_page
    open_case(page, live_server, three_turns)
    case_search(page, "0-1", "match 1 of 3 (in 1 turn)")  # turn 2's message, argument, answer
    every = page.locator("#turn-2-transcript .tx-item").count()
    assert page.locator("#turn-2-transcript .tx-item:visible").count() == every  # all shown

    only = page.get_by_label("Only matching events").first
    only.check()
    assert page.locator("#turn-1").is_hidden() and page.locator("#turn-3").is_hidden()
    shown = page.locator("#turn-2-transcript .tx-item:visible .tx-ev")
    kinds = shown.evaluate_all("els => els.map(e => e.className.split(' ')[1])")
    assert kinds == ["tx-user", "tx-tool_call", "tx-assistant"]
    assert page.evaluate(CURRENT_IN_VIEW)

    only.uncheck()
    assert page.locator("#turn-1").is_visible() and page.locator("#turn-3").is_visible()
    assert page.locator("#turn-2-transcript .tx-item:visible").count() == every


def test_a_turns_own_search_steps_and_filters_the_same_way(
    live_server: Any, searched_page: Any, three_turns: Run
) -> None:
    page = searched_page
    open_case(page, live_server, three_turns)
    section = page.locator("#turn-2-transcript")
    section.locator("summary").click()
    # A model call's full request, as its section draws it once opened: never searched.
    section.locator(".tx-model_call").first.evaluate(
        """ev => ev.insertAdjacentHTML("beforeend", '<details class="tx-collapse tx-request"'
        + ' data-tx-request open><pre class="tx-text" data-tx-copy-source>order 0-1</pre>'
        + '</details>')"""
    )
    own = section.get_by_label("Search in the transcript of turn 2")
    own.fill("0-1")
    said = section.locator("[data-tx-search-status]")
    assert said.inner_text() == "match 1 of 3 (in 3 events)"
    assert section.locator(CURRENT).count() == 1
    own.press("Enter")
    assert said.inner_text() == "match 2 of 3 (in 3 events)"
    assert page.evaluate(CURRENT_PLACE) == ["turn-2", "tx-tool_call"]
    section.get_by_role("button", name="Previous match in the transcript of turn 2").click()
    assert said.inner_text() == "match 1 of 3 (in 3 events)"

    every = section.locator(".tx-item").count()
    section.get_by_label("Only matching events").check()
    assert section.locator(".tx-item:visible").count() == 3 < every
    own.fill("")
    assert said.inner_text() == "" and section.locator(".tx-item:visible").count() == every
    assert section.locator("mark.tx-hit").count() == 0


@pytest.mark.parametrize("searched_page", [DESKTOP, PHONE], ids=["1280px", "390px"], indirect=True)
def test_the_searched_case_page_is_accessible_and_its_controls_do_not_move(
    live_server: Any, searched_page: Any, three_turns: Run
) -> None:
    if not AXE.exists():
        pytest.skip(f"{AXE} is absent (python3 dev.py setup installs it with npm ci)")
    page = searched_page
    open_case(page, live_server, three_turns)
    bar = page.locator(".tx-case-search")
    next_match = page.get_by_role("button", name="Next match", exact=True)
    before = bar.bounding_box(), next_match.bounding_box()
    case_search(page, "0-1", "match 1 of 3 (in 1 turn)")
    after = bar.bounding_box(), next_match.bounding_box()
    assert [box["height"] for box in after] == [box["height"] for box in before]
    assert [(box["x"], box["width"]) for box in after] == [
        (box["x"], box["width"]) for box in before
    ]
    page.get_by_label("Only matching events").first.check()
    page.get_by_label("Search the transcripts of every turn").press("Enter")
    assert axe_problems(page) == []
    assert sideways_scroll(page) is None
