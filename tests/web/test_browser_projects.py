"""End to end in a real browser: register a project from a path on the server (a broken agent
lists the loader's problems, nothing is saved), open its page, launch a limited run that a real
Celery worker runs, see it badged partial, and re-run it from its page with the limit
removed."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs.models import AgentProject, Run
from tests.web.factories import make_user
from tests.web.services_helpers import EXAMPLES
from tests.web.test_browser import CHROMIUM, browser_page, login, screenshot
from tests.web.test_browser_launch import celery_worker_thread

__all__ = ["browser_page", "celery_worker_thread"]  # the fixtures, used by name

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]

BROKEN = """\
name: broken
model: {provider: scripted, name: s}
instructions: {inline: "Be brief."}
test_cases:
  - name: empty
    turns: []
  - input: ""
"""


def wait_finished(page: Any) -> None:
    """Until the run page's progress box stops polling (the run ended)."""
    page.wait_for_selector("#run-progress:not([hx-trigger])", timeout=90_000)


def test_a_project_registered_in_the_browser_runs_partially_then_re_runs_in_full(
    tmp_path: Path, live_server: Any, browser_page: Any, celery_worker_thread: Any
) -> None:
    page = browser_page
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "agent.yaml").write_text(BROKEN)
    agent_dir = tmp_path / "convfinqa"
    shutil.copytree(EXAMPLES / "convfinqa", agent_dir, ignore=shutil.ignore_patterns("results"))
    login(page, live_server, make_user("lead", staff=True))

    # A broken agent: every problem the loader found, next to the form; nothing saved.
    page.click("text=Register a project")
    page.fill("input[name=path]", str(broken))
    page.click("form.project-form button[type=submit]")
    problems = page.locator("section.problems li")
    problems.first.wait_for()
    texts = problems.all_inner_texts()
    assert len(texts) >= 2, texts
    assert any("test case 'empty'" in text and "turns" in text for text in texts), texts
    assert not AgentProject.objects.exists()

    page.fill("input[name=path]", str(agent_dir))
    page.click("form.project-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/projects/\d+/$"))
    project = AgentProject.objects.get()
    assert page.locator("h1").inner_text() == "convfinqa-analyst"
    assert page.locator('[data-config="cases"]').inner_text().startswith("3 ")

    # A limited run: badged partial on its page once it ran.
    page.click("text=Launch…")
    page.fill("input[name=limit]", "1")
    page.click("form.launch-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    wait_finished(page)
    badge = page.locator("#run-header .partial-mark")
    assert badge.inner_text() == "partial: 1 of 3 cases, limit 1"
    assert page.locator('.launched-with [data-option="limit"]').inner_text() == "limit 1"
    first = Run.objects.get()
    screenshot(page, "run-partial")

    # Its project page shows it badged, among its runs.
    page.goto(f"{live_server.url}{reverse('project_detail', args=[project.pk])}")
    assert "partial: 1 of 3 cases" in page.locator(".project-latest").inner_text()
    screenshot(page, "project-page", docs=True)

    # Re-run from the run's page: the form comes filled in; without the limit every case runs.
    page.goto(f"{live_server.url}{reverse('run_detail', args=[first.pk])}")
    page.click("a.rerun")
    page.wait_for_url(re.compile(rf".*/projects/{project.pk}/launch/\?rerun={first.pk}$"))
    assert page.input_value("input[name=limit]") == "1"
    page.fill("input[name=limit]", "")
    page.click("form.launch-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    wait_finished(page)
    second = Run.objects.exclude(pk=first.pk).get()
    assert page.url.endswith(reverse("run_detail", args=[second.pk]))
    assert second.total_cases == 3
    assert page.locator("#run-header .partial-mark").count() == 0
    assert page.locator('.launched-with [data-option="limit"]').inner_text() == "limit none"
