"""The compare tray in a real browser: runs picked on the runs list and on a run page gather in
a sticky tray that survives pages and reloads, and links to the compare page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import reverse

from runs.models import Run
from tests.web.factories import RunSpec, build_run, make_project, make_user
from tests.web.test_browser import CHROMIUM, browser_page, login, open_run, screenshot

__all__ = ["browser_page"]  # the fixture, used by name

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


@pytest.fixture
def page_without_js(chromium: Any) -> Iterator[Any]:
    """Like ``browser_page``, with JavaScript off: what the page does on its own."""
    context = chromium.new_context(java_script_enabled=False)
    context.set_default_timeout(10_000)
    try:
        yield context.new_page()
    finally:
        context.close()


def tray_ids(page: Any) -> list[str]:
    return page.locator("#compare-tray .tray-chip").evaluate_all(
        "items => items.map(item => item.dataset.trayRun)"
    )


def row_box(page: Any, run: Run) -> Any:
    return page.locator(f'input[data-compare-run="{run.pk}"]')


def test_runs_picked_on_the_list_and_a_run_page_gather_in_a_tray_that_survives_a_reload(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    problems: list[str] = []  # a CSP violation or a script error shows up here
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda err: problems.append(str(err)))
    project = make_project()
    first, second, third = (build_run(project, RunSpec(cases=2, turns=1)) for _ in range(3))
    login(page, live_server, make_user("reviewer"))

    page.goto(f"{live_server.url}{reverse('run_list')}")
    tray = page.locator("#compare-tray")
    assert tray.is_hidden()
    assert page.locator("[data-compare-fallback]").is_hidden()  # the tray replaces the form
    row_box(page, first).check()
    assert tray.is_visible()
    go = tray.locator("[data-compare-go]")
    assert go.inner_text() == "Compare 1 run"
    assert go.get_attribute("aria-disabled") == "true" and go.get_attribute("href") is None
    row_box(page, second).check()
    assert tray_ids(page) == [str(first.pk), str(second.pk)]
    assert go.inner_text() == "Compare 2 runs"
    screenshot(page, "compare-tray-run-list")

    open_run(page, live_server, third)
    toggle = page.locator(f'[data-compare-toggle="{third.pk}"]')
    assert toggle.inner_text() == "+ compare"
    toggle.click()
    assert toggle.get_attribute("aria-pressed") == "true"
    assert tray_ids(page) == [str(first.pk), str(second.pk), str(third.pk)]
    assert go.inner_text() == "Compare 3 runs"
    assert go.get_attribute("href") == f"/compare/?runs={first.pk},{second.pk},{third.pk}"
    baseline = page.locator("a", has_text="Compare with baseline")
    assert baseline.get_attribute("href") == f"/compare/?runs={third.pk}"
    screenshot(page, "compare-tray-run-page")

    tray.locator(f'[data-compare-remove="{second.pk}"]').click()
    assert tray_ids(page) == [str(first.pk), str(third.pk)]
    page.reload()
    page.wait_for_selector("#compare-tray .tray-chip")
    assert tray_ids(page) == [str(first.pk), str(third.pk)]
    assert go.get_attribute("href") == f"/compare/?runs={first.pk},{third.pk}"

    page.goto(f"{live_server.url}{reverse('run_list')}?status=failed")  # another filter, same pick
    assert row_box(page, first).is_checked() and row_box(page, third).is_checked()
    assert not row_box(page, second).is_checked()
    row_box(page, first).uncheck()
    assert tray_ids(page) == [str(third.pk)]
    tray.locator("[data-compare-clear]").click()
    assert tray.is_hidden()
    assert not row_box(page, third).is_checked()
    assert problems == []


def test_without_javascript_the_checked_rows_submit_to_the_compare_page(
    live_server: Any, page_without_js: Any, transactional_db: None
) -> None:
    page = page_without_js
    project = make_project()
    first, second = (build_run(project, RunSpec(cases=1, turns=1)) for _ in range(2))
    login(page, live_server, make_user("reviewer"))
    page.goto(f"{live_server.url}{reverse('run_list')}")
    assert page.locator("#compare-tray").count() == 0
    row_box(page, first).check()
    row_box(page, second).check()
    with page.expect_navigation():
        page.click("#compare-form [type=submit]")
    # Rows are newest first; the compare page takes repeated runs= as well as a comma list.
    assert page.url.endswith(f"/compare/?runs={second.pk}&runs={first.pk}")


def test_the_run_page_button_survives_the_live_header_swaps_of_a_running_run(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    run = build_run(make_project(), RunSpec(cases=4, turns=1, status=Run.Status.RUNNING, done=2))
    login(page, live_server, make_user("reviewer"))
    open_run(page, live_server, run)
    page.locator(f'[data-compare-toggle="{run.pk}"]').click()
    with page.expect_response(lambda response: "/progress/" in response.url):
        pass  # the poll swaps in a new header, whose button starts hidden
    page.wait_for_timeout(100)
    toggle = page.locator(f'[data-compare-toggle="{run.pk}"]')
    assert toggle.is_visible()
    assert toggle.get_attribute("aria-pressed") == "true"


def test_the_tray_holds_at_most_as_many_runs_as_the_compare_page_takes_and_says_so(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    from runs.compare.reads.comparison import MAX_RUNS

    page = browser_page
    project = make_project()
    runs = [build_run(project, RunSpec(cases=1, turns=1)) for _ in range(MAX_RUNS + 1)]
    picked, extra = runs[:MAX_RUNS], runs[MAX_RUNS]
    login(page, live_server, make_user("reviewer"))
    page.goto(f"{live_server.url}{reverse('run_list')}")
    page.evaluate(
        "ids => window.localStorage.setItem('holodeck.compareTray', JSON.stringify(ids))",
        [run.pk for run in picked],
    )
    page.reload()
    tray = page.locator("#compare-tray")
    page.wait_for_selector("#compare-tray .tray-chip")
    assert tray.locator(".tray-limit").inner_text() == f"{MAX_RUNS} of at most {MAX_RUNS} runs"

    row_box(page, extra).click()  # the tray refuses it: the box unticks again
    note = tray.locator(".tray-full")
    assert f"Run #{extra.pk} not added: the tray holds at most {MAX_RUNS} runs" in note.inner_text()
    assert not row_box(page, extra).is_checked()
    assert len(tray_ids(page)) == MAX_RUNS

    tray.locator(f'[data-compare-remove="{picked[0].pk}"]').click()
    assert note.inner_text() == ""
    row_box(page, extra).check()
    assert tray_ids(page)[-1] == str(extra.pk)
    with page.expect_navigation():
        tray.locator("[data-compare-go]").click()
    assert page.locator("h1").inner_text() == f"Compare {MAX_RUNS} runs"
