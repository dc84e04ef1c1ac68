"""Live states in a real browser: an open running case gains its turns as they are written, and
a cancelled run (cancelled in place: the case the reader has open stays open) reads the same in
its tiles, progress and rows while its last case stops and once it has — without a reload. The
worker's writes are made here, row by row, as the recorder makes them (tests/web/factories.py),
so each step is deterministic."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from runs.models import CaseRow, Run
from runs.recorder import case_cancel, run_settle
from tests.web.chromium import CHROMIUM
from tests.web.factories import (
    RunSpec,
    build_run,
    make_project,
    make_user,
    running_case,
    write_turn,
)
from tests.web.test_browser import browser_page, expand_case, login, open_run, screenshot

__all__ = ["browser_page"]  # a fixture, imported for this module

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


def mark_page(page: Any) -> None:
    """A mark a reload would lose: the test checks it is still there."""
    page.evaluate("window.__not_reloaded = true")


def not_reloaded(page: Any) -> bool:
    return bool(page.evaluate("window.__not_reloaded === true"))


def test_an_open_running_case_gains_its_next_turn_and_stays_open_when_it_finishes(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    from django.utils import timezone

    page = browser_page
    run = build_run(make_project(), RunSpec(cases=3, turns=3, status=Run.Status.RUNNING, done=1))
    case = running_case(run, 1, written=1)
    login(page, live_server, make_user("watcher"))
    open_run(page, live_server, run)
    row = expand_case(page, case.pk)
    mark_page(page)
    assert row.locator("section.turn").count() == 1
    assert "Turn 2 of 3 running…" in row.locator(".turn-running").inner_text()

    # The worker writes the second turn: it appears in the open row.
    write_turn(case, 1)
    row.locator("section.turn >> nth=1").wait_for()
    row.get_by_text("Turn 3 of 3 running…").wait_for()
    assert row.get_attribute("open") is not None
    screenshot(page, "run-running-case", docs=True)

    # The case finishes: the poll swaps its row in again, and it stays open with all its turns.
    write_turn(case, 2)
    CaseRow.objects.filter(pk=case.pk).update(
        status="done", outcome="passed", passed=True, turns_passed=3, finished_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(cases_done=2, passed_cases=2)
    page.locator(f"details#case-{case.pk}.case-passed").wait_for()
    row = page.locator(f"#case-{case.pk}")
    row.locator("section.turn >> nth=2").wait_for()
    assert row.get_attribute("open") is not None
    assert row.locator(".turn-running").count() == 0
    assert page.locator("#run-progress").inner_text().count("2/3 cases") == 1
    assert not_reloaded(page)


def test_cancel_says_stopping_then_ends_the_case_with_tiles_and_rows_that_agree(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    run = build_run(make_project(), RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=2))
    case = running_case(run, 2, written=1)
    login(page, live_server, make_user("lead", staff=True))
    open_run(page, live_server, run)
    row = expand_case(page, case.pk)  # the reader has the running case open
    mark_page(page)
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#run-header form[action$='/cancel/'] button[type=submit]")
    # In place (htmx), with no reload: the header says so, and the open case stays open.
    page.locator('#run-header .chip[data-status="cancelled"]').wait_for()
    assert f"Run {run.pk} cancelled." in page.locator(".messages").inner_text()
    assert page.url.endswith(reverse("run_detail", args=[run.pk]))
    assert row.get_attribute("open") is not None
    assert row.locator("section.turn").count() == 1

    # Cancelled at once: the pending case is cancelled, the running one says it is stopping.
    assert page.locator("#run-header .chip").first.inner_text() == "cancelled"
    progress = page.locator("#run-progress")
    assert "stopping 1 case after its current turn" in progress.inner_text()
    assert "3/4 cases" in progress.inner_text()
    assert "cancelled · stopping" in page.locator(f"#case-{case.pk}").inner_text()
    pending = run.cases.get(index=3)
    assert "cancelled · not run" in page.locator(f"#case-{pending.pk}").inner_text()
    assert page.locator(".regrade-form").count() == 0  # not until it has stopped
    screenshot(page, "run-stopping")

    # The case stops after its turn (here: as the sweeper stops a dead worker's): the page
    # ends the run by itself.
    assert case_cancel(CaseRow.objects.get(pk=case.pk), running=True) and run_settle(run)
    page.locator("#run-progress.done").wait_for()
    assert not_reloaded(page)
    run.refresh_from_db()
    text = page.locator("#run-progress").inner_text()
    assert "4/4 cases" in text and "stopping" not in text
    tiles = page.locator("#run-tiles")
    assert f"{run.cases_done}/{run.total_cases}" in tiles.inner_text()
    # Every planned turn has a verdict now: the cancelled cases' turns that never ran count as
    # cancelled, so the turns tile adds up to the planned turns.
    assert f"{run.total_turns}/{run.total_turns}" in tiles.inner_text()
    cancelled = tiles.locator(".summary-cases .count-cancelled").inner_text()
    assert (
        cancelled == f"{run.cases.filter(outcome='cancelled').count()} cancelled" == "2 cancelled"
    )
    assert tiles.locator('[data-summary="cases.passed"]').inner_text() == str(run.passed_cases)
    assert "cancelled · stopped" in page.locator(f"#case-{case.pk}").inner_text()
    assert page.locator("#run-progress[hx-trigger]").count() == 0
    assert page.locator(".regrade-form").count() == 1  # now it can be re-graded
    # The case the reader had open is still open, with its turn; nothing was reloaded.
    assert page.locator(f"details#case-{case.pk}[open] section.turn").count() == 1
    assert not_reloaded(page)
