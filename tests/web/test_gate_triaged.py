"""The CI gate's ``--ignore-triaged CATEGORY[,CATEGORY]`` (issue 39): failures people triaged
into those categories — the gated run's own reviews, or a review carried to it that is known
there (the same turn, defined the same, failing the same way) — leave the verdict and are listed
under their own heading in the Markdown, never silently."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import AgentProject, Run, TurnRow
from runs.review_models import Review
from runs.services.reviews import ReviewInput, review_reopen, review_save
from tests.web.factories import make_user
from tests.web.test_gate import bearer, gate, passing_run, post, regressed_run

pytestmark = pytest.mark.django_db

GROUND_TRUTH = "ground truth wrong"


@pytest.fixture
def reviewer(db: None) -> User:
    return make_user("rita")


def failed_turn(run: Run) -> TurnRow:
    return TurnRow.objects.get(run=run, outcome="failed")


def triage(run: Run, user: User, category: str = GROUND_TRUTH, note: str = "") -> Review:
    turn = failed_turn(run)
    return review_save(
        user=user, case=turn.case, turn=turn,
        data=ReviewInput(verdict="should_pass", category=category,
                         note=note or "the ground truth says **A-123**; the order is A-999"),
    )  # fmt: skip


def test_a_run_whose_only_failures_are_triaged_ground_truth_wrong_passes_with_the_flag(
    project: AgentProject, reviewer: User
) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    triage(run, reviewer)
    without = gate("--run", run.pk, "--baseline", base.pk, "--url", "https://hd.example")
    assert without.code == 1, without.err
    assert "Triaged" not in without.out

    said = gate(
        "--run", run.pk, "--baseline", base.pk, "--url", "https://hd.example",
        "--ignore-triaged", GROUND_TRUTH,
    )  # fmt: skip
    assert said.code == 0, said.out + said.err
    assert said.out.startswith("## ✅ HoloDeck gate passed")
    heading = "### Triaged, ignored (1 regressed turn: ground truth wrong; left out of the verdict)"
    assert heading in said.out
    assert (
        "| refund case 1 | turn 2 | ground truth wrong | rita | the ground truth says "
        "\\*\\*A-123\\*\\*; the order is A-999 | [compare](https://hd.example/compare/case/?"
    ) in said.out
    # The machine's count stays; the regressed cases' table holds only the counted ones.
    assert "| regressed turns | 1 | | |" in said.out
    assert "| regressed turns triaged, ignored | 1 | | |" in said.out
    assert "### Regressed cases" not in said.out


def test_the_pass_rate_checked_leaves_out_the_cases_whose_every_failure_was_triaged(
    project: AgentProject, reviewer: User
) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    triage(run, reviewer)
    args = ("--run", run.pk, "--baseline", base.pk, "--min-pass-rate", 100)
    without = gate(*args)
    assert without.code == 1 and "pass rate 75% is below 100%" in without.out
    said = gate(*args, "--ignore-triaged", f"{GROUND_TRUTH},grader wrong")
    assert said.code == 0, said.out + said.err
    assert "| pass rate without the 1 triaged case | 100% | | |" in said.out
    assert "1 failing case whose every failure was triaged into ground truth wrong, grader " in (
        said.out
    )
    assert "(the run's own: 75%)" in said.out


def test_a_known_review_carried_from_an_earlier_run_counts_and_says_where_it_was_made(
    project: AgentProject, reviewer: User
) -> None:
    earlier = regressed_run(project, minutes=-5)
    review = triage(earlier, reviewer)
    base = passing_run(project)
    run = regressed_run(project)
    said = gate("--run", run.pk, "--baseline", base.pk, "--ignore-triaged", GROUND_TRUTH)
    assert said.code == 0, said.out + said.err
    assert f"| rita (on run #{earlier.pk}) |" in said.out
    # Stale (the turn's definition changed since): it triages nothing here.
    Review.objects.filter(pk=review.pk).update(definition="0" * 32)
    stale = gate("--run", run.pk, "--baseline", base.pk, "--ignore-triaged", GROUND_TRUTH)
    assert stale.code == 1
    assert "**Triaged, ignored** (ground truth wrong): no regressed turn was triaged so." in (
        stale.out
    )


def test_a_carried_review_reopened_on_the_run_triages_nothing(
    project: AgentProject, reviewer: User
) -> None:
    earlier = regressed_run(project, minutes=-5)
    review = triage(earlier, reviewer)
    base = passing_run(project)
    run = regressed_run(project)
    turn = failed_turn(run)
    review_reopen(user=reviewer, case=turn.case, turn=turn, earlier=review)
    said = gate("--run", run.pk, "--baseline", base.pk, "--ignore-triaged", GROUND_TRUTH)
    assert said.code == 1
    assert "1 regressed turn (at most 0 allowed)" in said.out


def test_failures_triaged_into_another_category_still_count(
    project: AgentProject, reviewer: User
) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    triage(run, reviewer, category="agent bug")
    said = gate("--run", run.pk, "--baseline", base.pk, "--ignore-triaged", GROUND_TRUTH)
    assert said.code == 1
    assert "### Regressed cases (1 case, 1 turn)" in said.out
    assert "no regressed turn was triaged so" in said.out


def test_an_unknown_category_exits_2_naming_the_projects_categories(
    project: AgentProject,
) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    said = gate("--run", run.pk, "--baseline", base.pk, "--ignore-triaged", "grond truth wrong")
    assert said.code == 2
    assert "no triage category 'grond truth wrong' in project weather-agent" in said.err
    assert "ground truth wrong" in said.err


def test_the_api_gate_takes_ignore_triaged_and_lists_the_turns_it_left_out(
    client: Client, viewer: User, reviewer: User, project: AgentProject
) -> None:
    base = passing_run(project)
    run = regressed_run(project)
    triage(run, reviewer)
    body: dict[str, Any] = {"run": run.pk, "baseline": base.pk, "ignore_triaged": [GROUND_TRUTH]}
    data = post(client, body, bearer(viewer)).json()
    assert data["passed"] is True and data["reasons"] == []
    assert data["regressions"] == 1 and data["regressed"] == []
    (left_out,) = data["triaged"]
    assert (left_out["key"], left_out["turn"], left_out["category"], left_out["by"]) == (
        "refund case 1", 1, GROUND_TRUTH, "rita",
    )  # fmt: skip
    assert left_out["carried_from_run"] is None
    assert (data["triaged_cases"], data["triaged_pass_rate"]) == (1, 100.0)
    assert "Triaged, ignored" in data["markdown"]
    refused = post(client, {**body, "ignore_triaged": ["nope"]}, bearer(viewer))
    assert refused.status_code == 422 and "no triage category 'nope'" in refused.json()["detail"]
