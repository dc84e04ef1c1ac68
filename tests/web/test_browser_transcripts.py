"""What the agent saw, in a real browser: a failed turn's transcript opened on its case page,
its tool call followed to its arg diff, searched, then set beside the previous run's.

The transcripts are real: two scripted runs of the support-bot example, the second after the
instructions and the failing case's tool call were edited."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs.models import Run
from tests.web.chromium import CHROMIUM
from tests.web.factories import make_user
from tests.web.services_helpers import example_project
from tests.web.test_browser import browser_page, login, screenshot

__all__ = ["browser_page"]  # a fixture, imported for this module

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]


def two_support_runs(tmp_path: Path) -> tuple[Run, Run]:
    """Two runs of the support-bot example (in a thread: Playwright runs an event loop here);
    before the second, a line is added to the instructions and the failing case calls its tool
    with another order id."""
    from runs.services import execution, launch

    done: list[Run] = []

    def run() -> None:
        project = example_project(tmp_path, "support-bot")
        directory = Path(project.directory)
        for edit in (False, True):
            if edit:
                agent = directory / "agent.yaml"
                agent.write_text(
                    agent.read_text().replace(
                        "never invent order details.\n",
                        "never invent order details.\n    Quote the order id as given.\n",
                    )
                )
                script = directory / "transcript.yaml"
                script.write_text(script.read_text().replace("order_id: a1002", "order_id: A-1002"))
            created = launch.run_create(project=project)
            done.append(execution.run_execute_inline(run_id=created.pk))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=120)
    assert len(done) == 2, "the example runs did not finish"
    return done[0], done[1]


def test_a_reviewer_reads_a_failed_turns_transcript_and_sets_it_beside_the_last_runs(
    tmp_path: Path, live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    before, after = two_support_runs(tmp_path)
    case = after.cases.get(name="processing_order")
    assert case.outcome == "failed"
    login(page, live_server, make_user("reviewer"))
    page.goto(f"{live_server.url}{reverse('case_detail', args=[after.pk, case.pk])}")

    # Opened, the turn's transcript loads: what the agent was sent, its calls, its answer.
    section = page.locator("#turn-1-transcript")
    section.locator("summary").click()
    timeline = section.locator(".transcript")
    timeline.locator(".tx-ev").first.wait_for()
    kinds = timeline.locator(".tx-ev").evaluate_all(
        "els => els.map(e => e.className.split(' ')[1])"
    )
    assert kinds == [
        "tx-system",
        "tx-user",
        "tx-model_call",
        "tx-tool_call",
        "tx-model_call",
        "tx-assistant",
    ]
    call = timeline.locator(".tx-tool_call")
    assert "LookupError: no order 'A-1002'" in call.locator(".tx-field-error").inner_text()
    assert "Quote the order id as given." not in timeline.inner_text()  # collapsed
    timeline.locator(".tx-system summary").click()
    assert timeline.locator(".tx-system pre").is_visible()
    screenshot(page, "transcript", docs=True)

    # The tool call leads to its arg diff in the same turn.
    call.locator("a.tx-diff-link").click()
    page.wait_for_url("**#turn-1-call-0")
    diff = page.locator("#turn-1-call-0")
    assert page.locator(".assertion:target").count() == 1
    assert "A-1002" in diff.inner_text() and "A1002" in diff.inner_text()

    # The search marks the text and goes to its first match; "Only matching events" keeps the
    # events that hold it.
    timeline.locator("input[data-tx-search]").fill("a-1002")
    status = timeline.locator("[data-tx-search-status]")
    assert status.inner_text() == "match 1 of 2 (in 1 event)"
    assert timeline.locator("mark.tx-hit").count() == 2  # the argument and the error
    assert timeline.locator("mark.tx-hit-current").count() == 1
    timeline.get_by_label("Only matching events").check()
    assert timeline.locator(".tx-item:not([hidden])").count() == 1
    timeline.locator("input[data-tx-search]").fill("")
    assert timeline.locator(".tx-item:not([hidden])").count() == 6

    # The compare page of the case links the turn's two transcripts side by side.
    query = f"?runs={before.pk},{after.pk}&key=processing_order"
    page.goto(f"{live_server.url}{reverse('compare_case')}{query}")
    page.locator(".tx-compare-links a").first.click()
    page.wait_for_url("**/compare/transcript/**")
    seen = page.locator(".tx-seen")
    assert "changed" in seen.locator(".tx-seen-changed h3").inner_text()
    assert seen.locator(".tx-seen-diff ins").first.inner_text().startswith("Quote")
    differs = page.locator(".tx-row-differs .tx-row-changes").all_inner_texts()
    assert "differs: arg order_id, result, error" in differs
    screenshot(page, "transcript-side-by-side", docs=True)
