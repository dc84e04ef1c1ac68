"""A model call's full request in a real browser: the 4-turn case of an OpenAI agent run
through semantic-kernel against the fake server; turn 4's transcript opened, its last model
call's "show the full request" loads every message as sent, the tools and the parameters;
axe-core finds nothing serious at either width."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs.models import CaseRow, Run
from tests.core.backends.fake_llm_servers import FakeOpenAI
from tests.web.chromium import CHROMIUM
from tests.web.factories import make_user
from tests.web.test_browser import login, screenshot
from tests.web.test_browser_reviews import accessibility_problems, browser_page
from tests.web.test_model_requests import QUESTIONS, sk_run

__all__ = ["browser_page"]  # a fixture (one that lets axe-core in), imported for this module

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


def four_turn_run(tmp_path: Path, fake: FakeOpenAI) -> Run:
    """The run, in a thread (Playwright runs an event loop in this one)."""
    done: list[Run] = []
    thread = threading.Thread(
        target=lambda: done.append(sk_run(tmp_path, fake, "You are a careful calculator."))
    )
    thread.start()
    thread.join(timeout=120)
    assert done, "the run did not finish"
    return done[0]


def test_a_reviewer_opens_the_full_request_of_turn_fours_last_model_call(
    tmp_path: Path, live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    fake = FakeOpenAI().start()
    try:
        run = four_turn_run(tmp_path, fake)
    finally:
        fake.stop()
    case = CaseRow.objects.get(run=run)
    login(page, live_server, make_user("reviewer"))
    page.goto(f"{live_server.url}{reverse('case_detail', args=[run.pk, case.pk])}")

    section = page.locator("#turn-4-transcript")
    section.locator("summary").first.click()
    timeline = section.locator(".transcript")
    timeline.locator(".tx-ev").first.wait_for()
    call = timeline.locator(".tx-model_call").last
    assert "messages" in call.inner_text()
    call.locator(".tx-request > summary").click()
    view = call.locator(".tx-request-view")
    view.wait_for()

    messages = view.locator(".tx-request-message")
    assert messages.count() == 1 + 3 * 4 + 3  # every earlier message, as sent
    shown = view.inner_text()
    for question in QUESTIONS:
        assert question in shown
    assert "tools-subtract" in view.locator(".tx-request-tools").inner_text()
    assert "temperature" in view.locator(".tx-request-params").inner_text()
    assert view.locator("button[data-tx-copy]").is_visible()
    screenshot(page, "transcript-full-request", docs=True)
    assert accessibility_problems(page) == []
