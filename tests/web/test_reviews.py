"""Reviews (issue 39): a review of a turn keeps every change and writes the audit log; it
follows the turn to later runs by its identity — known when the turn fails the same way,
another failure when not, stale when its definition changed; a project's triage categories; who
may do what in a project."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser, User

from runs.core.reviewing.vocabulary import Role
from runs.models import AgentProject, CaseRow, Run, TurnRow
from runs.review_models import AuditEntry, Review, TriageCategory
from runs.selectors.access import project_role, user_can
from runs.selectors.reviews import (
    KNOWN,
    OTHER_FAILURE,
    STALE,
    carried_reviews,
    run_review_tally,
)
from runs.services.reviews import (
    ReviewError,
    ReviewInput,
    review_confirm,
    review_reopen,
    review_save,
    role_set,
)
from tests.web.factories import RunSpec, build_run, identify, make_user

pytestmark = pytest.mark.django_db


def failing_turn(run: Run) -> TurnRow:
    failures = TurnRow.objects.filter(run=run, outcome__in=("failed", "error"))
    turn = failures.order_by("case__index").first()
    assert turn is not None
    return turn


def reviewed(project: AgentProject, user: User, **data: str) -> tuple[Run, TurnRow, Review]:
    run = build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))
    turn = failing_turn(run)
    review = review_save(
        user=user, case=turn.case, turn=turn,
        data=ReviewInput(verdict=data.get("verdict", "agrees"),
                         category=data.get("category", "agent bug"),
                         note=data.get("note", "the refund tool was **not called**")),
    )  # fmt: skip
    return run, turn, review


def test_a_review_keeps_every_change_and_writes_the_audit_log(
    project: AgentProject, staff: User
) -> None:
    _, turn, review = reviewed(project, staff)
    assert review.machine_outcome == "failed" and review.category is not None
    assert TriageCategory.objects.filter(project=project).count() == 5  # the defaults
    changed = review_save(
        user=staff, case=turn.case, turn=turn,
        data=ReviewInput(verdict="should_pass", category="ground truth wrong", note="fixed"),
    )  # fmt: skip
    assert changed.pk == review.pk and Review.objects.count() == 1
    changes = list(changed.changes.order_by("at", "id"))
    assert [c.after["category"] for c in changes] == ["agent bug", "ground truth wrong"]
    assert changes[1].before["category"] == "agent bug"
    audit = list(AuditEntry.objects.order_by("id").values_list("action", "username"))
    assert audit == [("review.save", staff.username)] * 2
    # The machine's verdict is never touched.
    assert TurnRow.objects.get(pk=turn.pk).outcome == "failed"


def test_a_review_with_an_unknown_category_verdict_or_link_is_refused_and_writes_nothing(
    project: AgentProject, staff: User
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=1, failing=(1,)))
    turn = failing_turn(run)
    for data, field in (
        (ReviewInput(verdict="maybe"), "verdict"),
        (ReviewInput(verdict="agrees", category="nope"), "category"),
        (ReviewInput(verdict="agrees", link="javascript:alert(1)"), "link"),
    ):
        with pytest.raises(ReviewError) as refused:
            review_save(user=staff, case=turn.case, turn=turn, data=data)
        assert refused.value.field == field
    assert not Review.objects.exists() and not AuditEntry.objects.exists()


def later_run(
    project: AgentProject, *, ground_truth: str | None = None, errored: bool = False
) -> Run:
    run = build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))
    turn = failing_turn(run)
    if ground_truth is not None:
        turn.ground_truth = ground_truth
    if errored:
        turn.outcome, turn.errors = "error", ["TimeoutError"]
    identify(turn, turn.case)
    turn.save()
    return run


def test_a_later_runs_same_failure_shows_the_review_as_known_a_changed_turn_as_stale(
    project: AgentProject, staff: User
) -> None:
    _, _, review = reviewed(project, staff)
    for run, state in (
        (later_run(project), KNOWN),
        (later_run(project, errored=True), OTHER_FAILURE),
        (later_run(project, ground_truth="43.00 EUR"), STALE),
    ):
        turn = failing_turn(run)
        carried = carried_reviews(run=run, turns=[turn])[turn.pk]
        assert (carried.review.pk, carried.state) == (review.pk, state)


def test_a_carried_review_confirmed_counts_as_triaged_and_a_reopened_one_does_not(
    project: AgentProject, staff: User
) -> None:
    _, _, earlier = reviewed(project, staff, category="ground truth wrong")
    run = later_run(project)
    turn = failing_turn(run)
    before = run_review_tally(run=run)
    assert (before.triaged, before.known) == (0, 1)
    confirmed = review_confirm(user=staff, case=turn.case, turn=turn, earlier=earlier)
    assert confirmed.carried_from_id == earlier.pk
    after = run_review_tally(run=run)
    assert (after.triaged, after.known, after.by_category) == (1, 0, {"ground truth wrong": 1})
    review_reopen(user=staff, case=turn.case, turn=turn, earlier=earlier)
    reopened = run_review_tally(run=run)
    assert (reopened.triaged, reopened.untriaged) == (0, reopened.failures)


def test_roles_give_their_rights_and_each_change_is_audited(
    project: AgentProject, staff: User
) -> None:
    someone = make_user("someone")
    assert project_role(user=AnonymousUser(), project_id=project.pk) is None
    assert project_role(user=someone, project_id=project.pk) is Role.VIEWER
    assert not user_can(user=someone, project_id=project.pk, needed=Role.REVIEWER)
    role_set(by=staff, project_id=project.pk, user_id=someone.pk, role="runner")
    assert user_can(user=someone, project_id=project.pk, needed=Role.REVIEWER)
    assert not user_can(user=someone, project_id=project.pk, needed=Role.ADMIN)
    assert user_can(user=staff, project_id=project.pk, needed=Role.ADMIN)
    role_set(by=staff, project_id=project.pk, user_id=someone.pk, role="")
    assert project_role(user=someone, project_id=project.pk) is Role.VIEWER
    audit = list(AuditEntry.objects.order_by("id").values_list("action", "before", "after"))
    assert audit == [
        ("role.set", None, {"user": someone.pk, "role": "runner"}),
        ("role.set", {"user": someone.pk, "role": "runner"}, None),
    ]
    with pytest.raises(ReviewError):
        role_set(by=staff, project_id=project.pk, user_id=someone.pk, role="owner")


def test_a_run_without_a_project_cannot_be_reviewed(staff: User) -> None:
    run = build_run(None, RunSpec(cases=2, turns=1, failing=(1,)))
    turn = failing_turn(run)
    case = CaseRow.objects.get(pk=turn.case_id)
    with pytest.raises(ReviewError, match="no project"):
        review_save(user=staff, case=case, turn=turn, data=ReviewInput(verdict="agrees"))


def test_pruning_a_reviewed_run_deletes_its_reviews_and_keeps_a_later_confirmation(
    project: AgentProject, staff: User
) -> None:
    from runs.services.retention import runs_delete

    old, _, earlier = reviewed(project, staff)
    run = later_run(project)
    turn = failing_turn(run)
    confirmed = review_confirm(user=staff, case=turn.case, turn=turn, earlier=earlier)
    counts = runs_delete(runs=Run.objects.filter(pk=old.pk))
    assert counts.runs == 1 and not Review.objects.filter(run=old).exists()
    confirmed.refresh_from_db()
    assert confirmed.carried_from_id is None and confirmed.category is not None


def test_confirming_a_carried_review_keeps_whom_the_turn_is_assigned_to(
    project: AgentProject, staff: User
) -> None:
    from runs.services.reviews import review_assign

    _, _, earlier = reviewed(project, staff)
    run = later_run(project)
    turn = failing_turn(run)
    someone = make_user("someone")
    review_assign(user=staff, case=turn.case, turn=turn, assignee_id=someone.pk)
    confirmed = review_confirm(user=staff, case=turn.case, turn=turn, earlier=earlier)
    assert confirmed.assignee_id == someone.pk and confirmed.carried_from_id == earlier.pk


def test_a_runs_review_tally_is_counted_in_four_queries_whatever_its_reviews(
    project: AgentProject, staff: User, django_assert_num_queries: object
) -> None:
    from runs.recorder import run_finish

    _, _, earlier = reviewed(project, staff)
    run = build_run(project, RunSpec(cases=8, turns=2, failing=(1, 3, 5)))
    for turn in TurnRow.objects.filter(run=run, outcome="failed").exclude(case__index=1):
        review_save(user=staff, case=turn.case, turn=turn,
                    data=ReviewInput(verdict="should_pass", category="grader wrong"))  # fmt: skip
    with django_assert_num_queries(4):  # type: ignore[operator]
        tally = run_review_tally(run=run)
    assert (tally.failures, tally.triaged, tally.known, tally.disagrees) == (3, 2, 1, 2)
    assert tally.by_category == {"grader wrong": 2} and earlier.turn_key
    # Once it has ended, its failing turns are its stored summary's: one query fewer.
    run_finish(run.pk)
    run.refresh_from_db()
    with django_assert_num_queries(3):  # type: ignore[operator]
        assert run_review_tally(run=run) == tally
