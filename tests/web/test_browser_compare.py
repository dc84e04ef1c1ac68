"""End to end in a real browser: two runs of one project at two commits, launched from the
browser and run by a real Celery worker; Compare filtered to code graders shows the regression,
then the regressed turn side by side and the config diff."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs.models import Run
from tests.web.factories import make_user
from tests.web.services_helpers import example_project, git
from tests.web.test_browser import CHROMIUM, browser_page, login, screenshot
from tests.web.test_browser_launch import celery_worker_thread

__all__ = ["browser_page", "celery_worker_thread"]  # fixtures, imported for this module

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


def launch_at(page: Any, live_server: Any, project_pk: int, ref: str) -> Run:
    page.goto(f"{live_server.url}{reverse('project_launch', args=[project_pk])}")
    page.fill("input[name=git_ref]", ref)
    page.click("form.launch-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    run_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    page.wait_for_selector("#run-progress:not([hx-trigger])", timeout=90_000)
    return Run.objects.get(pk=run_id)


def test_a_grader_made_stricter_in_a_commit_shows_as_a_code_regression_in_compare(
    tmp_path: Path, live_server: Any, browser_page: Any, celery_worker_thread: Any
) -> None:
    page = browser_page
    project = example_project(tmp_path)
    repo = Path(project.directory)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the example as shipped")
    first = git(repo, "rev-parse", "HEAD")
    grader = repo / "graders" / "program.py"
    grader.write_text(
        grader.read_text()
        .replace("REL_TOL = 0.01", "REL_TOL = 1e-12")
        .replace("ABS_TOL = 1e-4", "ABS_TOL = 0.0")
    )
    agent = repo / "agent.yaml"
    agent.write_text(agent.read_text().replace("name: convfinqa-analyst", "name: convfinqa-strict"))
    git(repo, "commit", "-qam", "exact answers only")
    second = git(repo, "rev-parse", "HEAD")

    login(page, live_server, make_user("lead", staff=True))
    before = launch_at(page, live_server, project.pk, first[:10])
    after = launch_at(page, live_server, project.pk, second[:10])
    assert (before.git_commit, after.git_commit) == (first, second)
    assert (before.status, after.status) == ("failed", "failed")

    # Compare the new run with its baseline: the run of the parent commit, found by the rule.
    page.goto(f"{live_server.url}{reverse('compare')}?runs={after.pk}")
    assert f"run #{before.pk}" in page.locator(".baseline-rule").inner_text()
    assert "parent commit" in page.locator(".baseline-rule").inner_text()
    page.check("input[name=kinds][value=code]")
    page.click("#compare-form button[type=submit]")
    page.wait_for_url(re.compile(r".*kinds=code.*"))
    count = page.locator(".regressions-count[data-kind=code]").inner_text()
    regressed = int(count.split()[0])
    assert regressed >= 3, count
    assert page.locator("tr.has-regression").count() >= 2
    screenshot(page, "compare-code-regressions")

    page.locator("tr.has-regression").first.locator("td.cell a.cv-failed").click()
    page.wait_for_url(re.compile(r".*/compare/case/.*"))
    assert page.locator(".turn-pair.regression").count() >= 1
    assert "is not" in page.locator(".turn-pair.regression").first.inner_text()  # the reasoning
    screenshot(page, "compare-turn-side-by-side")

    page.click("text=config diff")
    page.wait_for_url(re.compile(r".*/compare/config/.*"))
    assert page.locator(".dl-add").filter(has_text="convfinqa-strict").count() == 1
    assert page.locator(".dl-del").filter(has_text="convfinqa-analyst").count() == 1
    screenshot(page, "compare-config-diff")
