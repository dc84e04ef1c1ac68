"""A repeated run in a real browser: one row per case with its repetitions under it, the flaky
filter, the repetition switcher of an opened case (which says in the row which repetition is
shown) and its turns over the repetitions, on a desktop and on a phone."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs.models import Run
from tests.web.chromium import CHROMIUM
from tests.web.factories import make_repetition_fail, make_user
from tests.web.services_helpers import example_project
from tests.web.test_browser import browser_page, login, open_run, screenshot

__all__ = ["browser_page"]  # a fixture, imported for this module

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


def repeated_example(tmp_path: Path) -> Run:
    """The example run, each case 3 times (in a thread: Playwright runs an event loop here);
    then case 0's second repetition failed, as a stochastic agent's would."""
    from runs.services import execution, launch

    done: list[Run] = []

    def run() -> None:
        created = launch.run_create(project=example_project(tmp_path), repeats=3)
        done.append(execution.run_execute_inline(run_id=created.pk))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=120)
    return make_repetition_fail(done[0])


PHONE = {"width": 390, "height": 844}


def test_a_repeated_run_groups_each_cases_repetitions_and_switches_between_them(
    tmp_path: Path, live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    run = repeated_example(tmp_path)
    login(page, live_server, make_user("reviewer"))
    open_run(page, live_server, run)
    assert page.locator("#case-rows .case").count() == 3  # one row per case, not 9
    assert (
        page.locator("#run-tiles .repeat-tile")
        .inner_text()
        .count("1 of 3 cases with 2+ graded repetitions flaky")
        == 1
    )

    page.click("a.filter-flaky")
    page.wait_for_url("**?flaky=1")
    page.locator("#case-rows .case >> nth=0").wait_for()
    page.locator("#case-rows .case >> nth=1").wait_for(state="detached")
    assert page.locator("#case-rows .case").count() == 1

    first, second, third = (run.cases.get(index=0, repetition=r) for r in (0, 1, 2))
    row = page.locator(f"#case-{first.pk}")
    header = row.locator(":scope > summary")
    assert "2/3 reps passed" in header.inner_text() and "flaky" in header.inner_text()
    header.click()
    switch = row.locator(".repetition-switch")
    switch.wait_for()
    # Opened, the row shows the repetition that failed (its second), and says so in its header.
    current = switch.locator('[aria-current="true"]')
    assert current.inner_text().startswith("2") and "current" in (
        current.get_attribute("class") or ""
    )
    assert switch.locator('[aria-current="true"]').count() == 1
    row.locator(":scope > summary .rep-shown").filter(has_text="showing rep 2/3").wait_for()
    assert row.locator("section.turn.turn-failed").count() >= 1
    table = row.locator("table.repeat-stats")
    assert "2/3" in table.locator("tr.row-flaky").inner_text()
    screenshot(page, "run-repeats", docs=True)

    # Repetition 3 of the same case, in the same row: its own (passed) turns, and the header
    # and the switcher say it is the one shown.
    switch.locator("a >> nth=2").click()
    row.locator('.repetition-switch [aria-current="true"]').filter(has_text="3").wait_for()
    row.locator(":scope > summary .rep-shown").filter(has_text="showing rep 3/3").wait_for()
    assert row.locator('.repetition-switch [aria-current="true"]').count() == 1
    assert row.locator("section.turn.turn-failed").count() == 0
    assert row.locator(f'a.turn-link[href*="/cases/{third.pk}/"]').count() >= 1
    assert row.get_attribute("open") is not None
    assert reverse("run_detail", args=[run.pk]) in page.url
    assert second.outcome == "failed"


def test_a_repetition_finishing_updates_its_open_cases_row_which_keeps_the_one_shown(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from runs.models import CaseRow
    from tests.web.factories import make_project, repeated_run

    page = browser_page
    run = repeated_run(make_project(), [1.0, 1.0], repeats=3, seed=1, exact=True)
    earlier = timezone.now() - timedelta(minutes=5)
    run.cases.update(started_at=earlier, finished_at=earlier)
    last = run.cases.get(index=0, repetition=2)
    CaseRow.objects.filter(pk=last.pk).update(
        status="running", outcome="", passed=None, finished_at=None
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, cases_done=5, finished_at=None)
    login(page, live_server, make_user("reviewer"))
    open_run(page, live_server, run)
    first = run.cases.get(index=0, repetition=0)
    row = page.locator(f"#case-{first.pk}")
    assert "2/3 reps done" in row.locator(":scope > summary").inner_text()
    row.locator(":scope > summary").click()
    row.locator(":scope > summary .rep-shown").filter(has_text="showing rep 3/3").wait_for()
    row.locator(".repetition-switch a >> nth=0").click()  # the reader looks at repetition 1
    row.locator(":scope > summary .rep-shown").filter(has_text="showing rep 1/3").wait_for()
    page.evaluate("window.__not_reloaded = true")

    # Repetition 3 fails: the poll swaps the case's row in again; it stays open on repetition 1.
    CaseRow.objects.filter(pk=last.pk).update(
        status="done", outcome="failed", passed=False, finished_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(cases_done=6)
    row.locator(":scope > summary .flaky-mark").wait_for()
    assert "2/3 reps passed" in row.locator(":scope > summary").inner_text()
    assert row.get_attribute("open") is not None
    assert "showing rep 1/3" in row.locator(":scope > summary .rep-shown").inner_text()
    assert row.locator('.repetition-switch [aria-current="true"]').inner_text().startswith("1")
    assert page.evaluate("window.__not_reloaded === true")


# The right edge of the case list's widest part, outside the boxes that scroll or clip their
# content (an open case's tables scroll inside their own region).
CASE_LIST_RIGHT = """() => {
  const list = document.querySelector("#case-list");
  const clipped = el => {
    for (let box = el.parentElement; box && box !== list; box = box.parentElement)
      if (getComputedStyle(box).overflowX !== "visible") return true;
    return false;
  };
  const parts = [list, ...list.querySelectorAll("*")].filter(el => !clipped(el));
  return Math.max(...parts.map(el => el.getBoundingClientRect().right));
}"""


def test_a_repeated_runs_rows_fit_a_phone_with_a_case_open(
    tmp_path: Path, live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    run = repeated_example(tmp_path)
    login(page, live_server, make_user("reviewer"))
    page.set_viewport_size(PHONE)
    open_run(page, live_server, run)
    # The rows wrap their chips under the case's name rather than push it off the screen.
    assert page.evaluate(CASE_LIST_RIGHT) <= PHONE["width"]
    row = page.locator(f"#case-{run.cases.get(index=0, repetition=0).pk}")
    name = row.locator(":scope > summary .name")
    box = name.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    row.locator(":scope > summary").click()
    row.locator(":scope > summary .rep-shown").filter(has_text="showing rep").wait_for()
    row.locator("section.turn").first.wait_for()
    assert page.evaluate(CASE_LIST_RIGHT) <= PHONE["width"]
    screenshot(page, "run-repeats-390")


def test_compare_of_two_repeated_runs_shows_which_change_is_significant(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    from tests.web.factories import make_project, repeated_run

    page = browser_page
    project = make_project()
    steady = [0.9] * 9
    before = repeated_run(project, [0.9, *steady], repeats=30, seed=1, exact=True)
    after = repeated_run(project, [0.5, *steady], repeats=30, seed=2, commit="b" * 40, exact=True)
    login(page, live_server, make_user("reviewer"))
    page.goto(f"{live_server.url}{reverse('compare')}?runs={before.pk},{after.pk}")
    page.locator("table.headline").wait_for()
    row = page.locator('tr.matrix-row[data-key="case 0"]')
    assert row.locator(".sig-worse").inner_text() == "significantly worse"
    assert row.locator(".rep-frac").last.inner_text() == "15/30"
    assert page.locator("tr.matrix-row .sig-worse").count() == 1
    headline = page.locator("table.headline").inner_text()
    assert "1 worse · 0 better" in headline and "pass-rate change" in headline
    screenshot(page, "compare-repeats", docs=True)
