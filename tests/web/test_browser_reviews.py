"""Reviews in a real browser (issue 39): label a failed turn with a category and a note; re-run
its case and find the review carried to the new run's failure as known, and confirm it there;
change that turn's ground truth in the agent's files, run again, and find the review shown as
stale; triage ten failures in the review queue with the keyboard only.

The runs are the example agent's, launched as the dashboard launches them (eager Celery: each
runs to its end inside ``run_create``) and re-run through ``run_rerun`` from its snapshot."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs.models import AgentProject, Run, TurnRow
from runs.review_models import Review
from runs.services import launch
from runs.services.rerun import run_rerun
from runs.services.reviews import ReviewInput, review_save, role_set
from tests.web.factories import RunSpec, build_run, make_project, make_user
from tests.web.services_helpers import example_project
from tests.web.test_browser import CHROMIUM, login, screenshot
from tests.web.test_browser_a11y import AXE, DESKTOP, PHONE, axe_problems, sideways_scroll

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]

# The example's failing turn: the fourth of northwind_capex_decline.
FAILING_CASE = "northwind_capex_decline"
GROUND_TRUTH = 'ground_truth: "0.07829"'


@pytest.fixture
def browser_page(chromium: Any) -> Iterator[Any]:
    """A fresh page in a context of its own that lets axe-core in (the pages' CSP forbids
    inline scripts: only this context bypasses it, as test_browser_a11y's does)."""
    context = chromium.new_context(viewport=DESKTOP, bypass_csp=True)
    context.set_default_timeout(10_000)
    try:
        yield context.new_page()
    finally:
        context.close()


def accessibility_problems(page: Any) -> list[str]:
    """axe-core's serious violations and a sideways scroll, at 1400 and at 390 px."""
    if not AXE.exists():
        pytest.skip(f"{AXE} is absent: python3 dev.py setup")
    found = []
    for size in (PHONE, DESKTOP):
        page.set_viewport_size(size)
        found += [f"{size['width']} px: {line}" for line in axe_problems(page)]
        scroll = sideways_scroll(page)
        if scroll:
            found.append(f"{size['width']} px: {scroll}")
    return found


def failing_turn(run: Run) -> TurnRow:
    turn = TurnRow.objects.select_related("case").get(
        run=run, case__name=FAILING_CASE, outcome="failed"
    )
    return turn


def open_case(page: Any, live_server: Any, turn: TurnRow) -> Any:
    """The case page of ``turn``; its review panel."""
    page.goto(f"{live_server.url}{reverse('case_detail', args=[turn.run_id, turn.case_id])}")
    panel = page.locator(f"#review-turn-{turn.pk}")
    panel.wait_for()
    return panel


@dataclass(frozen=True)
class ThreeRuns:
    project: AgentProject
    first: Run  # its failing turn is labelled
    rerun: Run  # its failed case re-run from its snapshot: the same failure
    changed: Run  # after that turn's ground truth changed in the agent's files


@pytest.fixture
def three_runs(tmp_path: Path, transactional_db: None, eager_celery: None) -> ThreeRuns:
    """The runs, launched before the browser starts (the engine runs an event loop of its own,
    which Playwright's in this thread would refuse); a review is read onto a run when its page
    is drawn, so the later runs can exist before the first one's review. A browser an earlier
    test left running is stopped first (the next browser fixture starts it again)."""
    from tests.web.chromium import SHARED_CHROMIUM

    SHARED_CHROMIUM.stop()
    project = example_project(tmp_path)
    first = launch.run_create(project=project)
    first.refresh_from_db()  # eager: it ran to its end meanwhile
    rerun = run_rerun(original=first, cases="failed")
    agent = project.agent_path
    agent.write_text(agent.read_text().replace(GROUND_TRUTH, 'ground_truth: "0.0783"', 1))
    changed = launch.run_create(project=project)
    return ThreeRuns(project, first, rerun, changed)


def test_a_review_is_labelled_carried_to_a_rerun_confirmed_and_then_stale_once_the_turn_changed(
    three_runs: ThreeRuns, live_server: Any, browser_page: Any
) -> None:
    page = browser_page
    project, first = three_runs.project, three_runs.first
    rita = make_user("rita")
    role_set(by=None, project_id=project.pk, user_id=rita.pk, role="reviewer")
    login(page, live_server, rita)

    # Label the failed turn from the run page's expanded row.
    turn = failing_turn(first)
    page.goto(f"{live_server.url}{reverse('run_detail', args=[first.pk])}")
    row = page.locator(f"#case-{turn.case_id}")
    row.locator("summary").click()
    panel = row.locator(f"#review-turn-{turn.pk}")
    panel.wait_for()
    assert "not reviewed yet" in panel.inner_text()
    panel.get_by_label("should have passed").check()
    panel.get_by_label("Triage category").select_option("ground truth wrong")
    panel.get_by_label("Note").fill("The filing rounds to **0.0783**: the ground truth is wrong.")
    panel.get_by_label("Link").fill("https://issues.example.com/42")
    panel.get_by_role("button", name="Save review").click()
    saved = row.locator(f"#review-turn-{turn.pk}.review-done")
    saved.wait_for()
    text = saved.inner_text()
    assert "should have passed" in text and "ground truth wrong" in text and "by rita" in text
    assert saved.locator(".review-note strong").inner_text() == "0.0783"
    assert "History (1 change)" in text
    page.locator("#review-tile", has_text="1 triaged:").wait_for()  # counted again
    tile = page.locator("#review-tile").inner_text()
    assert "1 failed · 1 triaged: 1 ground truth wrong" in tile
    assert "1 human disagrees" in tile
    screenshot(page, "review-panel", docs=True)
    assert accessibility_problems(page) == []

    # The failed case re-run from the run's snapshot: the same failure, known.
    again = failing_turn(three_runs.rerun)
    panel = open_case(page, live_server, again)
    known = panel.locator(".review-known")
    assert re.search(rf"known \(by rita, \d{{4}}-\d\d-\d\d, run #{first.pk}\)", known.inner_text())
    assert "not reviewed yet" in panel.inner_text()  # shown as known, not as this run's
    page.locator("#review-tile, .tiles").first.wait_for()
    screenshot(page, "review-known", docs=True)
    assert accessibility_problems(page) == []
    panel.get_by_role("button", name="Confirm for this run").click()
    confirmed = page.locator(f"#review-turn-{again.pk}.review-done")
    confirmed.wait_for()
    assert f"confirmed from run #{first.pk}" in confirmed.inner_text()
    assert Review.objects.get(turn=again).carried_from is not None

    # The turn's ground truth changed in the agent's files: the review is stale there.
    later = failing_turn(three_runs.changed)
    panel = open_case(page, live_server, later)
    stale = panel.locator(".review-stale")
    assert "stale" in stale.inner_text() and "the turn changed since" in stale.inner_text()
    assert panel.get_by_role("button", name="Confirm for this run").count() == 0
    assert "not reviewed yet" in panel.inner_text()
    screenshot(page, "review-stale", docs=True)
    assert accessibility_problems(page) == []


def test_ten_failures_are_triaged_in_the_queue_with_the_keyboard_only(
    live_server: Any, browser_page: Any, transactional_db: None
) -> None:
    page = browser_page
    project = make_project()
    lead = make_user("lead", staff=True)
    earlier = build_run(project, RunSpec(cases=12, turns=2, failing=range(12)))
    known = TurnRow.objects.select_related("case__run").get(
        run=earlier, case__index=0, outcome="failed"
    )
    review_save(user=lead, case=known.case, turn=known,
                data=ReviewInput(verdict="agrees", category="agent bug"))  # fmt: skip
    run = build_run(project, RunSpec(cases=12, turns=2, failing=range(12)))
    login(page, live_server, lead)
    page.goto(f"{live_server.url}{reverse('review_queue', args=[project.pk])}")
    progress = page.locator("[data-queue=progress]")
    assert progress.inner_text() == "0 of 12 triaged"
    assert page.locator("[data-queue-item]").count() == 12
    screenshot(page, "review-queue", docs=True)

    def triaged(count: int) -> None:
        page.locator("[data-queue=progress]", has_text=f"{count} of 12 triaged").wait_for()
        page.locator("[data-queue-list]:not([data-busy])").wait_for()  # the next one is current

    keys = page.keyboard
    keys.press("y")  # the first failure carries a known review: confirmed
    triaged(1)
    keys.press("j")  # skip one, then back to it with k
    keys.press("k")
    keys.press("2")  # should have passed
    keys.press("g")  # ground truth wrong
    triaged(2)
    keys.press("n")
    keys.type("the judge misread the table")
    keys.press("Escape")
    keys.press("r")  # grader wrong, with the note
    triaged(3)
    for count, key in zip(range(4, 11), "afcafca", strict=True):
        keys.press(key)
        triaged(count)

    reviews = Review.objects.filter(run=run).select_related("category")
    assert reviews.count() == 10
    assert reviews.filter(carried_from__isnull=False).count() == 1
    by_category = sorted((r.category.name if r.category else "") for r in reviews)
    assert by_category.count("agent bug") == 4  # the confirmed one and three by key
    noted = reviews.get(category__name="grader wrong")
    assert noted.note == "the judge misread the table"
    assert reviews.get(category__name="ground truth wrong").verdict == "should_pass"
    assert page.locator("[data-queue-item].queue-done").count() == 10
    current = page.locator("[data-queue-item].current")
    assert current.count() == 1 and "queue-done" not in (current.get_attribute("class") or "")
    screenshot(page, "review-queue-triaged")
    assert accessibility_problems(page) == []
