"""Why a run failed, in a real browser: the header says it in words, and its link lists the
cases it counts (headless Chromium through Playwright; fixtures in test_browser.py)."""

from __future__ import annotations

from typing import Any

import pytest

from runs.models import Run
from tests.web.chromium import CHROMIUM
from tests.web.factories import make_project, make_user, settled_run
from tests.web.test_browser import browser_page, login, open_run, screenshot

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
    run = settled_run(make_project(), cases=8, not_graded=(2, 6), judge_error=NO_KEY)
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
