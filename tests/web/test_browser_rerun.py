"""End to end in a real browser: re-run a finished run's failed cases from its page (a real
Celery worker runs them, from the run's snapshot), and follow the links between the two runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs.models import Run
from tests.web.factories import make_user
from tests.web.services_helpers import example_project
from tests.web.snapshot_helpers import edit_prompt
from tests.web.test_browser import CHROMIUM, browser_page, login, screenshot
from tests.web.test_browser_launch import celery_worker_thread
from tests.web.test_browser_regrade import cli_run

__all__ = ["browser_page", "celery_worker_thread"]  # fixtures, imported for this module

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


def test_the_failed_cases_of_a_run_rerun_from_its_page_as_a_linked_run(
    tmp_path: Path, live_server: Any, browser_page: Any, celery_worker_thread: Any
) -> None:
    page = browser_page
    project = example_project(tmp_path)
    original = cli_run(project.agent_path)  # stored with a snapshot of its files
    failed = sorted(
        original.cases.filter(outcome__in=("failed", "error")).values_list("index", flat=True)
    )
    assert failed and len(failed) < original.total_cases
    edit_prompt(Path(project.directory))  # the re-run runs the snapshot, not this

    login(page, live_server, make_user("lead", staff=True))
    page.goto(f"{live_server.url}{reverse('run_detail', args=[original.pk])}")
    button = page.locator(".rerun-form button[type=submit]")
    assert button.inner_text() == f"Re-run failed cases ({len(failed)})"
    button.click()
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    rerun = Run.objects.get(rerun_of=original)
    assert page.url.endswith(f"/runs/{rerun.pk}/")
    page.wait_for_selector("#run-progress:not([hx-trigger])", timeout=60_000)
    rerun.refresh_from_db()
    assert not rerun.is_active and rerun.snapshot_id == original.snapshot_id
    assert sorted(rerun.cases.values_list("index", flat=True)) == failed
    assert page.locator("#case-rows .case").count() == len(failed)
    origin = page.locator(".rerun-origin").inner_text()
    assert f"re-run of run #{original.pk} (failed cases)" in origin
    screenshot(page, "rerun-run")

    page.click("a.rerun-of")
    page.wait_for_url(re.compile(rf".*/runs/{original.pk}/$"))
    assert page.locator("a.rerun-link").inner_text() == f"#{rerun.pk}"
