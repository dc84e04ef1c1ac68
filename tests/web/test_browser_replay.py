"""End to end in a real browser: from a finished run's page, open the what-if replay form, edit
the system prompt, replay the failed cases (a real Celery worker runs them, their tools
answering from the recording) and land on the side by side, which fills in; axe-core finds no
serious violation on the new pages at 1400 and 390 px."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs.models import Run, WorkerHeartbeat
from tests.web.factories import make_user
from tests.web.services_helpers import example_project
from tests.web.test_browser import CHROMIUM, DOCS_IMAGES, SHOTS, login, screenshot
from tests.web.test_browser_a11y import AXE
from tests.web.test_browser_launch import celery_worker_thread
from tests.web.test_browser_regrade import cli_run
from tests.web.test_browser_reviews import accessibility_problems, browser_page

__all__ = ["browser_page", "celery_worker_thread"]  # fixtures, imported for this module

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]

ADDED = "State the formula you used before the number."


def test_an_edited_prompt_replays_the_failed_cases_and_lands_on_the_side_by_side(
    tmp_path: Path, live_server: Any, browser_page: Any, celery_worker_thread: Any
) -> None:
    if not AXE.exists():
        pytest.skip(f"{AXE} is absent: python3 dev.py setup")
    page = browser_page
    project = example_project(tmp_path)
    original = cli_run(project.agent_path)  # stored with a snapshot of its files
    failed = sorted(original.cases.filter(outcome="failed").values_list("index", flat=True))
    assert failed
    # The worker thread reports no heartbeat: one row, so the pages show no "no worker" banner.
    WorkerHeartbeat.objects.create(name="test:1", host="test", pid=1)

    login(page, live_server, make_user("lead", staff=True))
    page.goto(f"{live_server.url}{reverse('run_detail', args=[original.pk])}")
    page.click("a.replay-link")
    page.wait_for_url(re.compile(rf".*/runs/{original.pk}/replay/\?cases=failed$"))
    editor = page.locator("textarea[name=prompt_text]")
    prompt = editor.input_value()
    assert prompt.startswith("You are a financial analyst")
    checked = page.locator("input[name=cases]:checked")
    assert [int(checked.nth(i).input_value()) for i in range(checked.count())] == failed
    assert page.locator("input[name=tools][value=recorded-only]").is_checked()
    editor.fill(f"{prompt}{ADDED}\n")
    screenshot(page, "replay-form", docs=True)
    assert accessibility_problems(page) == []

    page.click(".replay-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/compare/\?runs=\d+,\d+$"))
    replay = Run.objects.get(rerun_of=original)
    assert page.url.endswith(f"?runs={original.pk},{replay.pk}")
    note = page.locator(".replay-note")
    assert "system prompt edited (+1 −0 lines), tools: recorded-only" in note.inner_text()
    page.wait_for_selector(".live-note", state="detached", timeout=60_000)  # it filled in
    replay.refresh_from_db()
    assert not replay.is_live
    assert sorted(replay.cases.values_list("index", flat=True)) == failed
    screenshot(page, "replay-compare", docs=True)
    assert accessibility_problems(page) == []

    page.click("a.replay-config")
    page.wait_for_url(re.compile(r".*/compare/config/.*"))
    added = page.locator(".prompt-diff .dl-add").all_inner_texts()
    assert added == [f"+{ADDED}"]
    screenshot(page, "replay-prompt-diff", docs=True)

    page.goto(f"{live_server.url}{reverse('run_detail', args=[replay.pk])}")
    line = page.locator(".replay-line").inner_text()
    assert f"of run #{original.pk}" in line and "tools: recorded-only" in line
    assert accessibility_problems(page) == []
    screenshot(page, "replay-run")

    # Its transcripts mark each tool call the recording answered.
    case = replay.cases.get()
    page.goto(f"{live_server.url}{reverse('case_detail', args=[replay.pk, case.pk])}")
    section = page.locator("#turn-1-transcript")
    section.locator("summary").click()
    section.locator(".tx-tool_call .tx-replayed").first.wait_for()
    shot = SHOTS / "replay-transcript.png"
    section.screenshot(path=str(shot))  # the transcript alone: the case page is long
    if os.environ.get("HOLODECK_SCREENSHOTS") == "1":
        shutil.copyfile(shot, DOCS_IMAGES / shot.name)
