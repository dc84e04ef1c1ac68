"""The run page in a real browser: headless Chromium through Playwright's sync API.

Helpers (``browser_page``, ``login``, ``open_run``, ``expand_case``, ``screenshot``) are small
so an end-to-end test (launch → live progress → 100 %) can reuse them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from runs.models import AgentProject, Run
from tests.web.chromium import CHROMIUM
from tests.web.factories import PASSWORD, RunSpec, build_run, failing_case, make_project, make_user

SHOTS = Path("/tmp/holodeck-shots")
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


@pytest.fixture
def browser_page(chromium: Any) -> Iterator[Any]:
    """A fresh page, in a browser context of its own, in headless Chromium."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(10_000)
    try:
        yield context.new_page()
    finally:
        context.close()


def login(page: Any, live_server: Any, user: User) -> None:
    page.goto(f"{live_server.url}{reverse('login')}")
    page.fill("input[name=username]", user.get_username())
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}{reverse('home')}")


def open_run(page: Any, live_server: Any, run: Run, query: str = "") -> None:
    page.goto(f"{live_server.url}{reverse('run_detail', args=[run.pk])}{query}")
    page.wait_for_selector("#case-list")


def expand_case(page: Any, case_pk: int) -> Any:
    """Click a case row open and wait for its turns to load; returns the row."""
    row = page.locator(f"#case-{case_pk}")
    row.locator("summary").click()
    row.locator("section.turn").first.wait_for()
    return row


def screenshot(page: Any, name: str, *, docs: bool = False) -> Path:
    """The page's screenshot in /tmp/holodeck-shots; ``docs``: one of docs/dashboard.md's,
    saved into docs/images/ too when ``HOLODECK_SCREENSHOTS=1``."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if docs and os.environ.get("HOLODECK_SCREENSHOTS") == "1":
        shutil.copyfile(path, DOCS_IMAGES / path.name)
    return path


@pytest.fixture
def finished_run(transactional_db: None) -> tuple[AgentProject, Run]:
    project = make_project()
    return project, build_run(project, RunSpec(cases=8, turns=3, failing=(1, 5)))


def test_a_reviewer_expands_a_failing_case_and_reads_its_diff_and_grader_details(
    live_server: Any, browser_page: Any, finished_run: tuple[AgentProject, Run]
) -> None:
    page = browser_page
    _, run = finished_run
    login(page, live_server, make_user("reviewer"))
    open_run(page, live_server, run)
    assert page.locator("#run-tiles").inner_text().count("75%") == 1  # 6 of 8 cases passed

    case = failing_case(run)
    row = expand_case(page, case.pk)
    turn = f"#case-{case.pk}-turn-"  # expanded turns have anchors unique to their case, from 1
    diff = row.locator(f"{turn}2 table.diff")
    diff_text = diff.inner_text()
    assert "order_id" in diff_text
    assert "A-123" in diff_text and "A-999" in diff_text
    assert diff.locator(".v-bad").count() == 1  # ✗
    assert "no call of orders_lookup matched every argument" in row.inner_text()
    tree = row.locator(f"{turn}2 .grader > ul.tree")
    assert "currency" in tree.inner_text() and "no amount" in tree.inner_text()
    assert "could not grade" in row.locator(f"{turn}2 table.metrics").inner_text()
    assert "skipped" in row.locator(f"{turn}3").inner_text()
    # The passing turn's grader details start collapsed; the chip strip jumps to a turn.
    assert not row.locator(f"{turn}1 .grader > ul.tree").is_visible()
    row.locator(f'.turn-strip a[href="{turn}2"]').click()
    page.wait_for_url(f"**{turn}2")
    assert row.locator(f"{turn}2:target").count() == 1
    screenshot(page, "run_detail_expanded")

    page.click("text=only failures")
    page.wait_for_url("**?failures=1")
    page.locator(f"#case-{case.pk}").wait_for()
    assert page.locator("#case-rows .case").count() == 2

    page.goto(f"{live_server.url}{reverse('case_detail', args=[run.pk, case.pk])}#turn-2")
    assert page.locator("#turn-2").is_visible()
    assert page.locator("#turn-2:target").count() == 1
    assert page.locator("a.next-failed").count() == 1  # case 5 fails too
    screenshot(page, "case_page")


def test_a_running_run_fills_in_live_and_stops_polling_when_it_finishes(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    from django.utils import timezone

    page = browser_page
    run = build_run(make_project(), RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=2))
    login(page, live_server, make_user("watcher"))
    open_run(page, live_server, run)
    assert "2/4 cases" in page.locator("#run-progress").inner_text()
    pending = run.cases.get(index=3)
    assert page.locator(f"div#case-{pending.pk}").count() == 1  # not expandable yet

    # The case finishes: its row is swapped in out-of-band by the next poll.
    run.cases.filter(pk=pending.pk).update(
        status="done", outcome="passed", passed=True, turns_passed=2, finished_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(cases_done=3, turns_done=6, passed_cases=2)
    page.locator(f"details#case-{pending.pk}").wait_for()
    page.get_by_text("3/4 cases").wait_for()

    run.cases.filter(index=2).update(
        status="done", outcome="passed", passed=True, finished_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.FAILED, cases_done=4, turns_done=8, passed_cases=3
    )
    page.get_by_text("4/4 cases").wait_for()
    assert page.locator("#run-progress[hx-trigger]").count() == 0  # polling stopped (286)
    assert page.locator("#run-header .chip").inner_text() == "failed"
    screenshot(page, "run_finished_live")


def test_a_failing_progress_poll_shows_a_banner_and_backs_off(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    run = build_run(make_project(), RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=2))
    login(page, live_server, make_user("watcher"))
    polls: list[str] = []

    def fail(route: Any) -> None:
        polls.append(route.request.url)
        route.fulfill(status=500, body="boom")

    page.route("**/progress/**", fail)
    open_run(page, live_server, run)
    banner = page.locator("#poll-banner")
    banner.wait_for(state="visible")
    assert "Live updates stopped (HTTP 500)" in banner.inner_text()
    assert "reload the page" in banner.inner_text()
    page.wait_for_timeout(2500)
    assert len(polls) <= 3  # backing off: not one request a second
    screenshot(page, "run_poll_error")


def test_polls_that_find_nothing_new_leave_loaded_pages_and_open_cases_alone(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from runs.web.views import CASES_PER_PAGE

    page = browser_page
    cases = CASES_PER_PAGE + 50
    spec = RunSpec(cases=cases, turns=3, status=Run.Status.RUNNING, done=cases - 5)
    run = build_run(make_project(), spec)
    # Finished well before the page is opened: only what finishes later is swapped in.
    run.cases.filter(status="done").update(finished_at=timezone.now() - timedelta(hours=1))
    login(page, live_server, make_user("watcher"))
    polls: list[int] = []
    page.on(
        "response",
        lambda response: polls.append(response.status) if "/progress/" in response.url else None,
    )
    open_run(page, live_server, run)
    assert page.locator("#case-rows .case").count() == CASES_PER_PAGE
    page.click("button.load-more")
    page.locator(f"#case-rows .case >> nth={cases - 1}").wait_for()
    case = failing_case(run)
    row = expand_case(page, case.pk)

    page.wait_for_timeout(2500)  # a few polls: nothing changed
    assert polls and set(polls) == {204}
    assert page.locator("#case-rows .case").count() == cases
    assert row.get_attribute("open") is not None

    # A case on the second page finishes: its row alone is swapped in.
    last = run.cases.get(index=cases - 1)
    run.cases.filter(pk=last.pk).update(
        status="done", outcome="passed", passed=True, turns_passed=3, finished_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(cases_done=cases - 4, turns_done=(cases - 4) * 3)
    page.locator(f"details#case-{last.pk}").wait_for()
    assert page.locator("#case-rows .case").count() == cases
    assert row.get_attribute("open") is not None
    assert f"{cases - 4}/{cases} cases" in page.locator("#run-progress").inner_text()
