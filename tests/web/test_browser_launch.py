"""End to end in a real browser: log in, launch a run, a real Celery worker runs it while the
page shows live progress up to 100 %, then review the failing case's arg-match diff and the code
grader's details."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs.models import CaseRow, Run
from tests.web.factories import make_user
from tests.web.services_helpers import example_project
from tests.web.test_browser import CHROMIUM, browser_page, expand_case, login, screenshot

__all__ = ["browser_page"]  # the fixture, imported for this module

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


@pytest.fixture
def celery_worker_thread(transactional_db: None, settings: Any) -> Iterator[Any]:
    """A real Celery worker consuming the configured broker (Redis in CI, else the embedded
    file-system broker), running in a thread of this process so it shares the test database."""
    from celery.contrib.testing.worker import start_worker

    from holodeck_web.celery import app

    settings.HOLODECK_SWEEP_SECONDS = 0  # no background sweeper thread inside the test process
    app.control.purge()
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30) as worker:
        yield worker


def test_a_run_launched_in_the_browser_fills_in_live_and_explains_its_failures(
    tmp_path: Path, live_server: Any, browser_page: Any, celery_worker_thread: Any
) -> None:
    page = browser_page
    project = example_project(tmp_path)
    text = project.agent_path.read_text()
    # Simulated model latency, so the page can be seen filling in while the worker runs.
    project.agent_path.write_text(
        text.replace("provider: scripted", "provider: scripted\n  latency_ms: 120", 1)
    )
    login(page, live_server, make_user("lead", staff=True))

    page.goto(f"{live_server.url}{reverse('project_launch', args=[project.pk])}")
    page.fill("input[name=parallel]", "1")
    page.click("form.launch-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    run = Run.objects.get()

    # While it runs, the progress bar moves without a reload; polling stops at the end.
    page.wait_for_function(
        "() => /\\b([1-9]|[1-9][0-9])%/.test(document.querySelector('#run-progress').innerText)",
        timeout=60_000,
    )
    screenshot(page, "launch-running")
    page.wait_for_selector("#run-progress:not([hx-trigger])", timeout=90_000)
    assert "100%" in page.locator("#run-progress").inner_text()
    assert page.locator("#run-header .chip").inner_text() == "failed"
    run.refresh_from_db()
    assert (run.status, run.cases_done, run.turns_done) == ("failed", 3, 10)

    failing = CaseRow.objects.get(run=run, passed=False)
    row = expand_case(page, failing.pk)
    turn = row.locator("section.turn").filter(has=page.locator("table.diff .v-bad")).first
    diff = turn.locator("table.diff").filter(has=page.locator(".v-bad")).first
    assert diff.locator(".v-bad").count() >= 1
    diff_text = diff.inner_text()
    assert "expected" in diff_text.lower() and "actual" in diff_text.lower()
    grader = turn.locator(".grader ul.tree")
    assert grader.count() >= 1 and grader.first.inner_text().strip()
    screenshot(page, "launch-failing-case")
