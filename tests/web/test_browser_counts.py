"""Numbers that hold, in a real browser (issue 38): the live tiles add up at every poll and
agree with the progress box while cases settle; a cancelled run counts its cancelled cases
once, the same on the page and in the API; compare's words follow time against a newer
baseline."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from runs.models import CaseRow, Run
from runs.recorder.cases import case_claim, case_fail
from tests.compare.test_compare import later, same_names
from tests.web.chromium import CHROMIUM
from tests.web.factories import RunSpec, build_run, make_project, make_user
from tests.web.test_browser import browser_page, login, open_run, screenshot

__all__ = ["browser_page"]  # a fixture, imported for this module

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]

_NUMBER = re.compile(r"(\d+) (passed|failed|errored|not graded|skipped|cancelled|pending)")


def tile(page: Any, scope: str) -> tuple[int, int, dict[str, int]]:
    """A tile's "done/total" and the counts it lists under it, as the reader sees them."""
    done, total = page.locator(f'[data-count="{scope}"]').inner_text().split("/")
    listed = page.locator(f".summary-{scope}").inner_text()
    return int(done), int(total), {word: int(n) for n, word in _NUMBER.findall(listed)}


def progress(page: Any, scope: str) -> tuple[int, int]:
    text = page.locator(f'[data-progress="{scope}"]').inner_text()
    done, total = text.split(" ")[0].split("/")
    return int(done), int(total)


def assert_adds_up(page: Any) -> None:
    for scope in ("cases", "turns"):
        done, total, counts = tile(page, scope)
        assert sum(counts.values()) == total, (scope, counts)
        assert total - counts.get("pending", 0) == done, (scope, counts)
        assert progress(page, scope) == (done, total)


def test_the_live_tiles_add_up_and_agree_with_the_progress_box_at_every_poll(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    run = build_run(make_project(), RunSpec(cases=6, turns=2, status=Run.Status.RUNNING, done=1))
    login(page, live_server, make_user("watcher"))
    open_run(page, live_server, run)
    assert_adds_up(page)
    pending = list(run.cases.filter(status=CaseRow.Status.PENDING).order_by("index"))
    for settled, case in enumerate(pending[:3], start=2):
        attempt = case_claim(case)
        assert attempt is not None
        case_fail(case, attempt, "WorkerLostError: the worker died")
        page.locator('[data-count="cases"]', has_text=f"{settled}/6").wait_for()
        assert_adds_up(page)
    assert tile(page, "cases")[2] == {"passed": 1, "failed": 0, "errored": 3, "pending": 2}
    screenshot(page, "run-live-tiles")


def test_a_cancelled_run_counts_its_cancelled_cases_once_on_the_page_and_in_the_api(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    from runs.recorder import run_settle
    from runs.services.launch import run_cancel

    page = browser_page
    run = build_run(make_project(), RunSpec(cases=5, turns=1, failing=(1,), done=2,
                                            status=Run.Status.RUNNING))  # fmt: skip
    assert run_cancel(run=Run.objects.get(pk=run.pk))
    run_settle(Run.objects.get(pk=run.pk))
    login(page, live_server, make_user("reader"))
    open_run(page, live_server, run)
    done, total, counts = tile(page, "cases")
    assert (done, total) == (5, 5)
    assert counts == {"passed": 1, "failed": 1, "cancelled": 3}
    api = page.evaluate(f"fetch('/api/v1/runs/{run.pk}').then(r => r.json())")
    assert (api["cases"]["total"], api["cases"]["cancelled"]) == (5, 3)
    assert api["summary"]["cases"]["cancelled"] == 3 and api["failed_cases"] == 1
    assert (
        "HoloDeck's own summary says 1 passed and 1 failed of 2"
        in page.locator(".holodeck-summary").inner_text()
    )


def test_an_older_run_against_a_newer_baseline_reads_forward_in_time(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    project = make_project()
    older = build_run(project, RunSpec(cases=3, turns=1, failing=(1,)))
    newer = build_run(project, RunSpec(cases=3, turns=1, failing=()), created_at=later(5))
    same_names(older, newer)
    login(page, live_server, make_user("reviewer"))
    page.goto(
        f"{live_server.url}{reverse('compare')}?runs={older.pk},{newer.pk}&baseline={newer.pk}"
    )
    head = page.locator(f'.older-note[data-older-than="{newer.pk}"]').first
    assert head.text_content() == f"older: read #{older.pk} → #{newer.pk}"
    counts = page.locator(".regressions-count").first.locator("xpath=..").inner_text()
    assert "0 regressed" in counts and "1 fixed" in counts
    assert "read forward in time" in page.locator(".baseline-rule").inner_text()
    screenshot(page, "compare-older-than-baseline")
