"""The reviews API (issue 39): a run's reviews and the reviews its turns carry, a turn's review
written, a carried review confirmed or reopened, a project's review queue. Tried with the tokens
of a viewer, a reviewer and staff: every accepted write is in the audit log, a refused one
writes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import AgentProject, Run, TurnRow
from runs.review_models import AuditEntry, Review
from runs.services.reviews import ReviewInput, review_save, role_set
from runs.services.tokens import token_create
from tests.web.factories import RunSpec, build_run, make_user

pytestmark = pytest.mark.django_db

BODY = {"verdict": "should_pass", "category": "ground truth wrong", "note": "A-123 is right"}


@pytest.fixture
def reviewer(project: AgentProject, staff: User) -> User:
    user = make_user("rita")
    role_set(by=staff, project_id=project.pk, user_id=user.pk, role="reviewer")
    return user


def bearer(user: User) -> dict[str, str]:
    _, secret = token_create(user=user, name="api")
    return {"Authorization": f"Bearer {secret}"}


def failing(run: Run) -> TurnRow:
    return TurnRow.objects.select_related("case").get(run=run, outcome="failed")


def review_url(turn: TurnRow, action: str = "") -> str:
    url = f"/api/v1/runs/{turn.run_id}/cases/{turn.case_id}/turns/{turn.index}/review"
    return f"{url}/{action}" if action else url


def put(client: Client, turn: TurnRow, user: User | None, body: dict[str, Any]) -> Any:
    headers = bearer(user) if user else {}
    return client.put(review_url(turn), body, content_type="application/json", headers=headers)


def post(client: Client, url: str, user: User, body: dict[str, Any] | None = None) -> Any:
    return client.post(url, body or {}, content_type="application/json", headers=bearer(user))


def writes() -> tuple[int, int]:
    return Review.objects.count(), AuditEntry.objects.filter(object_type="review").count()


def test_a_reviewer_writes_a_turns_review_and_each_write_is_audited(
    client: Client, project: AgentProject, reviewer: User
) -> None:
    turn = failing(build_run(project, RunSpec(cases=3, turns=2, failing=(1,))))
    created = put(client, turn, reviewer, BODY)
    assert created.status_code == 201, created.content
    data = created.json()
    assert (data["verdict"], data["category"], data["note"]) == (
        "should_pass", "ground truth wrong", "A-123 is right",
    )  # fmt: skip
    assert data["machine_outcome"] == "failed" and data["disagrees"] and data["triaged"]
    assert (data["turn_index"], data["case_id"], data["created_by"]) == (1, turn.case_id, "rita")
    changed = put(client, turn, reviewer, {**BODY, "verdict": "agrees", "category": "agent bug"})
    assert changed.status_code == 200 and changed.json()["id"] == data["id"]
    assert writes() == (1, 2)
    # The machine's verdict is never touched.
    assert TurnRow.objects.get(pk=turn.pk).outcome == "failed"


def test_a_viewer_is_refused_with_a_clear_403_and_nothing_is_written(
    client: Client, project: AgentProject, viewer: User
) -> None:
    turn = failing(build_run(project, RunSpec(cases=3, turns=2, failing=(1,))))
    refused = put(client, turn, viewer, BODY)
    assert refused.status_code == 403
    assert refused.json()["detail"] == (
        "You need the reviewer role in project weather-agent to review runs; ask a project admin."
    )
    assert put(client, turn, None, BODY).status_code == 401
    assert writes() == (0, 0)


def test_a_session_write_without_its_csrf_token_is_refused(
    project: AgentProject, reviewer: User
) -> None:
    turn = failing(build_run(project, RunSpec(cases=3, turns=2, failing=(1,))))
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(reviewer)
    refused = browser.put(review_url(turn), BODY, content_type="application/json")
    assert refused.status_code == 403
    assert writes() == (0, 0)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"category": "no such category"}, "category"),
        ({"link": "ftp://issues.example/7"}, "link"),
        ({"verdict": "maybe"}, "verdict"),
    ],
)
def test_a_refused_review_is_a_422_naming_its_field_and_writes_nothing(
    client: Client, project: AgentProject, reviewer: User, change: dict[str, str], field: str
) -> None:
    turn = failing(build_run(project, RunSpec(cases=3, turns=2, failing=(1,))))
    refused = put(client, turn, reviewer, {**BODY, **change})
    assert refused.status_code == 422, refused.content
    assert refused.json()["detail"][0]["loc"][-1] == field
    assert writes() == (0, 0)


def test_staff_review_anywhere_but_a_run_of_no_project_takes_no_review(
    client: Client, project: AgentProject, staff: User, reviewer: User
) -> None:
    turn = failing(build_run(project, RunSpec(cases=3, turns=2, failing=(1,))))
    assert put(client, turn, staff, BODY).status_code == 201
    orphan = failing(build_run(None, RunSpec(cases=3, turns=2, failing=(1,))))
    refused = put(client, orphan, reviewer, BODY)
    assert refused.status_code == 403
    assert refused.json()["detail"] == "Only staff can review runs that belong to no project."
    said = put(client, orphan, staff, BODY)
    assert said.status_code == 422 and "belongs to no project" in said.json()["detail"][0]["msg"]
    assert writes() == (1, 1)


def test_an_unknown_turn_is_a_404(client: Client, project: AgentProject, reviewer: User) -> None:
    turn = failing(build_run(project, RunSpec(cases=3, turns=2, failing=(1,))))
    url = f"/api/v1/runs/{turn.run_id}/cases/{turn.case_id}/turns/9/review"
    answer = client.put(url, BODY, content_type="application/json", headers=bearer(reviewer))
    assert answer.status_code == 404


def earlier_and_later(project: AgentProject, user: User) -> tuple[Review, TurnRow]:
    """A review of a failing turn, and the same turn failing the same way on a later run."""
    before = failing(build_run(project, RunSpec(cases=3, turns=2, failing=(1,))))
    review = review_save(user=user, case=before.case, turn=before,
                         data=ReviewInput(verdict="should_pass", category="ground truth wrong",
                                          note="known since"))  # fmt: skip
    return review, failing(build_run(project, RunSpec(cases=3, turns=2, failing=(1,))))


def test_the_runs_reviews_list_its_own_and_what_its_failing_turns_carry(
    client: Client, project: AgentProject, reviewer: User, viewer: User
) -> None:
    earlier, turn = earlier_and_later(project, reviewer)
    answer = client.get(f"/api/v1/runs/{turn.run_id}/reviews", headers=bearer(viewer))
    assert answer.status_code == 200, answer.content
    data = answer.json()
    assert data["reviews"] == []
    (carried,) = data["carried"]
    assert (carried["turn_id"], carried["state"], carried["review"]["id"]) == (
        turn.pk, "known", earlier.pk,
    )  # fmt: skip
    assert carried["review"]["run"] == earlier.run_id
    assert carried["review"]["category"] == "ground truth wrong"
    assert data["tally"] == {"failures": 1, "triaged": 0, "untriaged": 1, "known": 1,
                             "disagrees": 0, "by_category": {}}  # fmt: skip
    one = client.get(review_url(turn), headers=bearer(viewer)).json()
    assert one["review"] is None and one["carried"]["state"] == "known"


def test_a_reviewer_confirms_a_known_carried_review_or_reopens_it(
    client: Client, project: AgentProject, reviewer: User, viewer: User
) -> None:
    earlier, turn = earlier_and_later(project, reviewer)
    before = AuditEntry.objects.count()
    assert post(client, review_url(turn, "confirm"), viewer).status_code == 403
    assert post(client, review_url(turn, "reopen"), viewer).status_code == 403
    stale = post(client, review_url(turn, "confirm"), reviewer, {"earlier": earlier.pk + 100})
    assert stale.status_code == 409 and "no longer carries" in stale.json()["detail"]
    assert AuditEntry.objects.count() == before
    confirmed = post(client, review_url(turn, "confirm"), reviewer, {"earlier": earlier.pk})
    assert confirmed.status_code == 200, confirmed.content
    data = confirmed.json()
    assert (data["carried_from"], data["category"], data["note"]) == (
        earlier.pk, "ground truth wrong", "known since",
    )  # fmt: skip
    reopened = post(client, review_url(turn, "reopen"), reviewer).json()
    assert reopened["reopened"] and reopened["verdict"] is None and not reopened["triaged"]
    # Two accepted writes, two audit entries (a confirmation is a save carried from earlier).
    actions = AuditEntry.objects.filter(pk__gt=0).order_by("id").values_list("action", flat=True)
    assert list(actions)[before:] == ["review.save", "review.reopen"]


def test_confirming_without_a_known_carried_review_is_a_409(
    client: Client, project: AgentProject, reviewer: User
) -> None:
    turn = failing(build_run(project, RunSpec(cases=3, turns=2, failing=(1,))))
    answer = post(client, review_url(turn, "confirm"), reviewer)
    assert answer.status_code == 409
    assert answer.json()["detail"] == "this turn carries no review from an earlier run"
    earlier, later = earlier_and_later(project, reviewer)
    Review.objects.filter(pk=earlier.pk).update(definition="0" * 32)  # the turn changed since
    stale = post(client, review_url(later, "confirm"), reviewer)
    assert stale.status_code == 409 and "this one is stale" in stale.json()["detail"]


def test_the_review_queue_lists_the_untriaged_failures_of_the_latest_run_of_each_branch(
    client: Client, project: AgentProject, reviewer: User, viewer: User
) -> None:
    build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))  # older: not in the queue
    latest = build_run(project, RunSpec(cases=4, turns=2, failing=(1, 2)))
    url = f"/api/v1/projects/{project.pk}/review-queue"
    data = client.get(url, headers=bearer(viewer)).json()
    assert data["runs"] == [latest.pk]
    assert (data["failures"], data["triaged"], data["untriaged"]) == (2, 0, 2)
    first = data["items"][0]
    assert (first["run"], first["turn_index"], first["outcome"]) == (latest.pk, 1, "failed")
    assert {"name": "rouge", "outcome": "failed"} in first["failed_metrics"]
    turn = TurnRow.objects.select_related("case").get(pk=first["turn_id"])
    assert put(client, turn, reviewer, BODY).status_code == 201
    again = client.get(url, headers=bearer(viewer)).json()
    assert (again["triaged"], again["untriaged"], len(again["items"])) == (1, 1, 1)
    chosen = client.get(f"{url}?runs=abc", headers=bearer(viewer))
    assert chosen.status_code == 422


def test_the_endpoints_are_in_the_openapi_document(client: Client, viewer: User) -> None:
    paths = client.get("/api/v1/openapi.json", headers=bearer(viewer)).json()["paths"]
    turn = "/api/v1/runs/{run_id}/cases/{case_id}/turns/{index}/review"
    assert {"get", "put"} <= set(paths[turn])
    assert "post" in paths[f"{turn}/confirm"] and "post" in paths[f"{turn}/reopen"]
    assert "get" in paths["/api/v1/runs/{run_id}/reviews"]
    assert "get" in paths["/api/v1/projects/{project_id}/review-queue"]
    assert "get" in paths["/api/v1/projects/{project_id}/categories"]


def test_the_reads_write_nothing(
    client: Client, project: AgentProject, reviewer: User, viewer: User
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    _, turn = earlier_and_later(project, reviewer)
    urls = [
        f"/api/v1/runs/{turn.run_id}/reviews",
        review_url(turn),
        f"/api/v1/projects/{project.pk}/review-queue",
    ]
    for url in urls:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url, headers=bearer(viewer)).status_code == 200, url
        sqls = [query["sql"].lstrip() for query in queries.captured_queries]
        written = [sql for sql in sqls if sql.upper().startswith(("INSERT", "UPDATE", "DELETE"))]
        # The token's last use is the only write a token-authenticated request makes.
        assert all("runs_apitoken" in sql for sql in written), (url, written)


def test_a_reviewer_writes_a_cases_own_review_and_a_viewer_is_refused(
    client: Client, project: AgentProject, reviewer: User, viewer: User
) -> None:
    turn = failing(build_run(project, RunSpec(cases=3, turns=2, failing=(1,))))
    url = f"/api/v1/runs/{turn.run_id}/cases/{turn.case_id}/review"
    assert client.get(url, headers=bearer(reviewer)).json() == {"review": None}
    refused = client.put(url, BODY, content_type="application/json", headers=bearer(viewer))
    assert refused.status_code == 403 and writes() == (0, 0)
    created = client.put(url, BODY, content_type="application/json", headers=bearer(reviewer))
    assert created.status_code == 201, created.content
    assert created.json()["turn_index"] is None and created.json()["category"] == BODY["category"]
    again = client.put(
        url, {**BODY, "verdict": "agrees"}, content_type="application/json",
        headers=bearer(reviewer),
    )  # fmt: skip
    assert again.status_code == 200 and writes() == (1, 2)
    shown = client.get(url, headers=bearer(reviewer)).json()["review"]
    assert shown["verdict"] == "agrees" and shown["case_id"] == turn.case_id
