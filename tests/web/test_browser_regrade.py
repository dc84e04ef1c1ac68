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


def test_a_regrade_of_a_cancelled_run_grades_only_the_cases_that_ran(
    tmp_path: Path, live_server: Any, browser_page: Any, celery_worker_thread: Any
) -> None:
    from runs.models import CaseResult, TurnResult

    page = browser_page
    original = cli_run(example_project(tmp_path).agent_path)
    # As a run cancelled after its first two cases: the last never started.
    last = original.cases.order_by("-index").first()
    assert last is not None
    TurnResult.objects.filter(case=last).delete()
    CaseResult.objects.filter(pk=last.pk).update(
        status=CaseResult.Status.CANCELLED, outcome="cancelled", started_at=None
    )
    Run.objects.filter(pk=original.pk).update(status=Run.Status.CANCELLED)

    login(page, live_server, make_user("lead", staff=True))
    page.goto(f"{live_server.url}{reverse('run_detail', args=[original.pk])}")
    assert "cancelled · not run" in page.locator(f"#case-{last.pk}").inner_text()
    page.click(".regrade-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    page.wait_for_selector("#run-progress:not([hx-trigger])", timeout=60_000)
    regrade = Run.objects.exclude(pk=original.pk).get()
    # Only the cases that ran are graded; nothing errored for the one that did not.
    assert regrade.total_cases == original.total_cases - 1
    assert not regrade.cases.filter(outcome="error").exists()
    assert page.locator("#case-rows .case").count() == regrade.total_cases
    assert "0 errored" not in page.locator("#run-tiles").inner_text()
    assert page.locator("#run-tiles .count-error").count() == 0

    # A run cancelled before any case ran offers no re-grade.
    TurnResult.objects.filter(run=original).delete()
    Run.objects.filter(pk=original.pk).update(turns_done=0)
    page.goto(f"{live_server.url}{reverse('run_detail', args=[original.pk])}")
    assert page.locator(".regrade-form").count() == 0
    assert "Nothing to re-grade" in page.locator(".no-regrade").inner_text()
