"""Why a run failed, in a real browser: the header says it in words, and its link lists the
cases it counts; the filters a reviewer reaches for then (tool assertions failed, a text in the
responses) and the tool assertions tile (headless Chromium through Playwright; fixtures in
test_browser.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from runs.models import Run
from tests.web.chromium import CHROMIUM
from tests.web.factories import make_project, make_tool_args_failed, make_user, settled_run
from tests.web.test_browser import browser_page, expand_case, login, open_run, screenshot

__all__ = ["browser_page"]  # the fixture, used by name

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]

NO_KEY = "AuthenticationError: the judge has no api_key"


def test_a_reader_learns_why_a_run_at_a_full_pass_rate_failed_and_opens_those_cases(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    project = make_project()
    run = settled_run(project, cases=8, not_graded=(2, 6), judge_error=NO_KEY)
    assert run.status == Run.Status.FAILED and run.pass_rate == 100.0
    login(page, live_server, make_user("reader"))
    open_run(page, live_server, run)

    reason = page.locator("#run-header .status-reason")
    assert reason.inner_text() == (f"failed: 2 cases could not be graded ({NO_KEY}); none failed")
    # The bar is drawn as not graded, not as failing tests.
    assert page.locator("#run-progress .progress.progress-not_graded").count() == 1
    screenshot(page, "run-status-reason", docs=True)

    reason.get_by_role("link", name="2 cases could not be graded").click()
    page.wait_for_url("**?outcome=not_graded")
    rows = page.locator("#case-rows .case")
    rows.first.wait_for()
    assert rows.count() == 2
    assert [rows.nth(n).get_attribute("class") for n in range(2)] == [
        "case case-not_graded",
        "case case-not_graded",
    ]
    toolbar = page.locator(".case-toolbar")
    assert toolbar.locator("a.filter.on").inner_text() == "not graded only"

    toolbar.get_by_role("link", name="errored only").click()
    page.wait_for_url("**?outcome=error")
    page.get_by_text("No case errored.").wait_for()
    assert page.locator("#case-rows .case").count() == 0

    # A run whose case 4 failed a tool assertion and its metrics, case 2 only a tool's arguments:
    # the tile counts the turns and links their failures to the cases.
    tools = settled_run(project, cases=6, failing=(4,))
    case = make_tool_args_failed(tools, 2)
    open_run(page, live_server, tools)
    tile = page.locator("#run-tiles .tools-tile")
    assert tile.locator('[data-summary="tools.total"]').inner_text() == "12"
    tile.get_by_role("link", name="2 failed").click()
    page.wait_for_url("**?tools=failed")
    assert page.locator("#case-rows .case").count() == 2
    assert toolbar.locator("a.filter.on").inner_text() == "tool assertions failed"
    # Red and marked "tools" in its row and in its turn, though every metric passed.
    row = expand_case(page, case.pk)
    assert row.get_attribute("class") == "case case-failed"
    assert row.locator("summary .tools-failed").is_visible()
    assert row.locator(".turn-head .tools-failed").count() == 1

    # A text in the responses, on Enter, keeps the tool filter; one found nowhere says so.
    search = page.get_by_label("Search the responses and transcripts")
    search.fill("ORDER 4-1")
    search.press("Enter")
    page.wait_for_url(re.compile(r".*tools=failed.*text=ORDER(%20|\+)4-1"))
    page.get_by_text("1 case with “ORDER 4-1” in a response or transcript").wait_for()
    assert page.locator("#case-rows .case").count() == 1
    search = page.get_by_label("Search the responses and transcripts")
    search.fill("no such words")
    search.press("Enter")
    empty = "No case has “no such words” in a response or transcript among these cases."
    page.get_by_text(empty).wait_for()
