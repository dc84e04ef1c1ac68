"""End to end in a real browser: re-grade a finished run from its page with a stricter
agent.yaml (a real Celery worker grades it), then open the compare with the original."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs.models import Run
from tests.web.factories import make_user
from tests.web.services_helpers import example_project
from tests.web.test_browser import CHROMIUM, browser_page, login, screenshot
from tests.web.test_browser_launch import celery_worker_thread

__all__ = ["browser_page", "celery_worker_thread"]  # fixtures, imported for this module

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


def cli_run(agent: Path) -> Run:
    """The run the CLI stores of ``agent`` (in a thread: Playwright runs an event loop here)."""
    from django.core.management import call_command

    def cli() -> None:
        with pytest.raises(SystemExit):
            call_command("run_agent", str(agent), "--quiet", "--no-results-file")

    thread = threading.Thread(target=cli)
    thread.start()
    thread.join(timeout=120)
    return Run.objects.get()


def test_a_run_regraded_from_its_page_compares_with_its_original(
    tmp_path: Path, live_server: Any, browser_page: Any, celery_worker_thread: Any
) -> None:
    page = browser_page
    project = example_project(tmp_path)
    original = cli_run(project.agent_path)
    # The team makes numeric answers exact: no tolerance.
    agent = project.agent_path
    agent.write_text(
        agent.read_text()
        .replace("absolute_tolerance: 0.0001", "absolute_tolerance: 0.0")
        .replace("relative_tolerance: 0.005", "relative_tolerance: 0.0")
    )
    login(page, live_server, make_user("lead", staff=True))
    page.goto(f"{live_server.url}{reverse('run_detail', args=[original.pk])}")
    page.click(".regrade-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    regrade = Run.objects.exclude(pk=original.pk).get()
    assert page.url.endswith(f"/runs/{regrade.pk}/")
    page.wait_for_selector("#run-progress:not([hx-trigger])", timeout=60_000)
    regrade.refresh_from_db()
    assert regrade.regrade_of_id == original.pk and not regrade.is_active
    assert f"run #{original.pk}" in page.locator("a.regrade-of").inner_text()
    screenshot(page, "regrade-run")

    page.click("#run-header >> text=compare")
    page.wait_for_url(re.compile(r".*/compare/.*"))
    assert "the run it re-grades" in page.locator(".baseline-rule").inner_text()
    assert page.locator("table.headline").is_visible()
    screenshot(page, "regrade-compare")
    page.goto(f"{live_server.url}{reverse('run_detail', args=[original.pk])}")
    assert page.locator("a.regraded-as").inner_text() == f"#{regrade.pk}"


def test_a_regrade_of_a_cancelled_run_reads_as_its_original(
    tmp_path: Path, live_server: Any, browser_page: Any, celery_worker_thread: Any
) -> None:
    from runs.models import TurnRow
    from tests.web.test_regrade import cancelled_mid_case

    page = browser_page
    made: list[Run] = []
    # Cancelled for real in its second case, after two of its three turns: that case stops,
    # the third never starts. (In a thread: Playwright runs an event loop here.)
    thread = threading.Thread(
        target=lambda: made.append(
            cancelled_mid_case(example_project(tmp_path), case_index=1, after_turns=2)
        )
    )
    thread.start()
    thread.join(timeout=120)
    (original,) = made
    stopped, never = original.cases.get(index=1), original.cases.get(index=2)

    login(page, live_server, make_user("lead", staff=True))
    page.goto(f"{live_server.url}{reverse('run_detail', args=[original.pk])}")
    assert "cancelled · stopped" in page.locator(f"#case-{stopped.pk}").inner_text()
    assert "cancelled · not run" in page.locator(f"#case-{never.pk}").inner_text()
    before = run_page_reading(page)
    page.click(".regrade-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    page.wait_for_selector("#run-progress:not([hx-trigger])", timeout=60_000)
    regrade = Run.objects.exclude(pk=original.pk).get()
    # Read as its original: the same status, pass rate, counts and case verdicts; the stopped
    # case stays stopped (no invented failure), the one that never ran stays not run.
    assert run_page_reading(page) == before
    assert not re.search(r"[1-9]\d* failed", page.locator("#run-tiles .summary-cases").inner_text())
    stopped_again = regrade.cases.get(index=1)
    assert "cancelled · stopped" in page.locator(f"#case-{stopped_again.pk}").inner_text()

    # Compare: no row changed, under every filter.
    for show in ("changed", "regressions", "fixes"):
        page.goto(
            f"{live_server.url}{reverse('compare')}?runs={original.pk},{regrade.pk}&show={show}"
        )
        assert page.locator("tr.matrix-row").count() == 0, show

    # A run cancelled before any case ran offers no re-grade.
    TurnRow.objects.filter(run=original).delete()
    Run.objects.filter(pk=original.pk).update(turns_done=0)
    page.goto(f"{live_server.url}{reverse('run_detail', args=[original.pk])}")
    assert page.locator(".regrade-form").count() == 0
    assert "Nothing to re-grade" in page.locator(".no-regrade").inner_text()


def run_page_reading(page: Any) -> dict[str, Any]:
    """What a reviewer reads of a finished run's page: its status, pass rate, counts and each
    case's verdict (not its ids, times or costs)."""
    return {
        "status": page.locator("#run-header h1 .chip").first.inner_text(),
        "pass rate": page.locator("[data-summary=pass_rate]").inner_text(),
        "cases": page.locator("#run-tiles .summary-cases").inner_text(),
        "turns": page.locator("#run-tiles .summary-turns").inner_text(),
        "rows": [
            row.locator("summary, .case-sum").first.inner_text().split("\n")[0]
            for row in page.locator("#case-rows .case").all()
        ],
    }
