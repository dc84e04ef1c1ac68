"""A repeated run in a real browser: each repetition's row, the flaky filter, the repetition
switcher of an expanded case and its turns over the repetitions."""

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


def test_a_repeated_run_filters_its_flaky_case_and_switches_between_repetitions(
    tmp_path: Path, live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    run = repeated_example(tmp_path)
    login(page, live_server, make_user("reviewer"))
    open_run(page, live_server, run)
    assert page.locator("#case-rows .case").count() == 9
    assert page.locator("#run-tiles .repeat-tile").inner_text().count("1 of 3 cases flaky") == 1

    page.click("a.filter-flaky")
    page.wait_for_url("**?flaky=1")
    page.locator("#case-rows .case >> nth=2").wait_for()
    assert page.locator("#case-rows .case").count() == 3
    assert page.locator("#case-rows .flaky-mark").count() == 3

    first, second = (run.cases.get(index=0, repetition=r) for r in (0, 1))
    row = page.locator(f"#case-{first.pk}")
    row.locator("summary").click()
    switch = row.locator(".repetition-switch")
    switch.wait_for()
    assert switch.locator('[aria-current="true"]').inner_text().startswith("1")
    table = row.locator("table.repeat-stats")
    assert "2/3" in table.locator("tr.row-flaky").inner_text()
    screenshot(page, "run-repeats", docs=True)

    # Repetition 2 of the same case, in the same row: its own (failed) turns.
    switch.locator("a >> nth=1").click()
    row.locator('.repetition-switch [aria-current="true"]').filter(has_text="2").wait_for()
    assert row.locator("section.turn.turn-failed").count() >= 1
    assert row.locator(f'a.turn-link[href*="/cases/{second.pk}/"]').count() >= 1
    assert reverse("run_detail", args=[run.pk]) in page.url


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
