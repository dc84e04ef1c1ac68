"""A G-Eval judge checked against people, end to end: an agent whose one metric is a G-Eval
judge runs through the launch service (eager Celery), its judge graded through deepeval's real
OpenAI model against the fake chat-completions server on 127.0.0.1; people review its turns;
the calibration pages in Chromium show the metric's confusion matrix and Cohen's kappa, with no
serious axe-core violation at 1400 and at 390 px."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs.core.reviewing.vocabulary import HumanVerdict
from runs.models import AgentProject, CaseRow, MetricRow, Run, TurnRow
from runs.services.projects import project_register
from runs.services.reviews import ReviewInput, review_save
from tests.graders.fake_openai_judge import (
    FakeOpenAIJudge,
    Reply,
    json_reply,
    running_fake_openai_judge,
    scored_reply,
)
from tests.web.chromium import CHROMIUM
from tests.web.factories import make_user
from tests.web.services_helpers import eager_celery
from tests.web.test_browser import login, screenshot
from tests.web.test_browser_a11y import AXE, DESKTOP, PHONE, axe_problems

__all__ = ["eager_celery"]  # a fixture, imported for this module

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"
    ),
]

METRIC = "correctness"
# Each case's answer (the scripted model answers its ground truth), the G-Eval score the fake
# judge gives it (out of 10: 0.8 and 0.6 pass the 0.5 threshold, 0.2 fails), and what a
# reviewer says of its turn.
CASES = [
    ("Paris is the capital of France.", HumanVerdict.AGREES),  # 0.8 passed: people pass
    ("Paris, on the Seine, is the capital.", HumanVerdict.AGREES),  # 0.8 passed: pass
    ("Sorry, Lyon is the capital.", HumanVerdict.AGREES),  # 0.2 failed: fail
    ("Sorry, I cannot say: it is Paris.", HumanVerdict.SHOULD_PASS),  # 0.2 failed: pass
    ("Maybe Marseille is the capital.", HumanVerdict.SHOULD_FAIL),  # 0.6 passed: fail
    ("Sorry, Nice is the capital.", HumanVerdict.AGREES),  # 0.2 failed: fail
]
# Rows the judge, columns people: [[2, 1], [1, 2]]: po = 4/6, pe = (3·3 + 3·3)/36 = 1/2,
# kappa = (2/3 - 1/2) / (1/2) = 1/3. At a threshold of 0.8 the judge would agree on 5 of 6.

AGENT_YAML = """\
name: capital-bot
description: Names capitals.
model: {{provider: scripted, name: scripted-capitals}}
instructions: {{inline: "Name the capital."}}
evaluations:
  model: {{provider: openai, name: gpt-4o-mini, endpoint: "{endpoint}", api_key: test-key}}
  metrics:
    - type: geval
      name: {metric}
      criteria: The answer names Paris as the capital of France, without hedging.
      evaluation_params: [actual_output]
      threshold: 0.5
test_cases:
{cases}"""


def score_of(body: dict[str, Any]) -> Reply:
    """The G-Eval score request: 2 for an answer saying sorry, 6 for a maybe, else 8."""
    text = json.dumps(body["messages"])
    score = 2 if "Sorry" in text else 6 if "Maybe" in text else 8
    return scored_reply(f"scored {score}", score, {score: 1.0})


@pytest.fixture
def axe_page(chromium: Any) -> Iterator[Any]:
    """A fresh page whose context lets axe-core be injected (the pages' CSP forbids inline
    scripts: only this test's context bypasses it, as test_browser_a11y's does)."""
    context = chromium.new_context(viewport=DESKTOP, bypass_csp=True, color_scheme="light")
    context.set_default_timeout(10_000)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def fake_judge() -> Iterator[FakeOpenAIJudge]:
    with running_fake_openai_judge() as fake:
        fake.routes = {
            "Steps": json_reply({"steps": ["Check the capital named.", "Check for hedging."]}),
            "logprobs": score_of,
        }
        yield fake


def capital_project(directory: Path, endpoint: str) -> AgentProject:
    directory.mkdir()
    cases = "".join(
        f"  - name: case {index}\n    input: What is the capital of France?\n"
        f"    ground_truth: {json.dumps(answer)}\n"
        for index, (answer, _) in enumerate(CASES)
    )
    agent = directory / "agent.yaml"
    agent.write_text(AGENT_YAML.format(endpoint=endpoint, metric=METRIC, cases=cases))
    return project_register(agent_path=agent)


def launched(project: AgentProject) -> Run:
    """The run launched through the service, run to its end by eager Celery (in a thread:
    Playwright runs an event loop in this one, and the engine runs its own)."""
    from runs.services import launch

    found: list[Run] = []
    thread = threading.Thread(target=lambda: found.append(launch.run_create(project=project)))
    thread.start()
    thread.join(timeout=120)
    run = Run.objects.get(pk=found[0].pk)
    assert not run.is_active
    return run


def review_every_turn(run: Run) -> None:
    reviewer = make_user("reviewer")
    for index, (_, verdict) in enumerate(CASES):
        case = CaseRow.objects.get(run=run, index=index)
        turn = TurnRow.objects.get(case=case, index=0)
        review_save(user=reviewer, case=case, turn=turn, data=ReviewInput(verdict=verdict.value))


def test_the_calibration_page_of_a_geval_judge_shows_its_confusion_matrix_and_kappa(
    tmp_path: Path,
    live_server: Any,
    axe_page: Any,
    eager_celery: None,
    fake_judge: FakeOpenAIJudge,
) -> None:
    project = capital_project(tmp_path / "capitals", fake_judge.base_url)
    run = launched(project)
    # The judge really graded every turn through deepeval, over HTTP.
    scores = dict(
        MetricRow.objects.filter(run=run, metric_name=METRIC).values_list(
            "turn__case__index", "score"
        )
    )
    assert scores == pytest.approx({0: 0.8, 1: 0.8, 2: 0.2, 3: 0.2, 4: 0.6, 5: 0.2})
    assert "logprobs" in fake_judge.routes_called()
    review_every_turn(run)

    page = axe_page
    login(page, live_server, make_user("viewer"))
    page.goto(f"{live_server.url}{reverse('project_detail', args=[project.pk])}")
    page.click("text=judges checked against people")
    page.wait_for_url(re.compile(r".*/calibration/$"))
    row = page.locator(f"tr[data-metric='{METRIC}']")
    assert row.locator("[data-calibration=n]").inner_text() == "6"
    assert row.locator("[data-calibration=agreement]").inner_text() == "4/6 (67%)"
    assert row.locator("[data-calibration=kappa]").inner_text().startswith("0.33 [")
    screenshot(page, "calibration", docs=True)

    row.locator(f"text={METRIC}").click()
    page.wait_for_url(re.compile(rf".*/calibration/{METRIC}/$"))
    cells = {
        name: page.locator(f"[data-cell={name}]").inner_text()
        for name in ("both_pass", "false_pass", "false_fail", "both_fail")
    }
    assert cells == {"both_pass": "2", "false_pass": "1", "false_fail": "1", "both_fail": "2"}
    assert page.locator("[data-calibration=kappa]").inner_text().startswith("0.33")
    assert re.search(r"95 % interval \[-?\d\.\d\d, \d\.\d\d\]", page.inner_text("main"))
    assert "At 0.80 the metric would agree with people on 5 of 6" in page.inner_text(
        "[data-calibration=best-threshold]"
    )
    links = page.locator("ul.disagreements a")
    assert links.count() == 2
    screenshot(page, "calibration-metric", docs=True)
    links.first.click()
    page.wait_for_url(re.compile(r".*/runs/\d+/cases/\d+/#turn-1$"))

    if not AXE.exists():
        pytest.skip(f"{AXE} is absent (python3 dev.py setup installs it with npm ci)")
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        for url in (
            reverse("project_calibration", args=[project.pk]),
            reverse("project_calibration_metric", args=[project.pk, METRIC]),
        ):
            page.goto(f"{live_server.url}{url}")
            assert axe_problems(page) == [], f"{url} at {viewport['width']} px"
