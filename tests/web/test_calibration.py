"""Judges checked against people, read from the database: a project's metrics each with its
agreement over the turns people reviewed, one metric's page (confusion matrix, kappa with its
interval, disagreements linked to their turns, the best threshold shown and never applied), the
API, compare's metric rows, and a fixed number of queries whatever the reviews."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.core.reviewing.vocabulary import HumanVerdict
from runs.models import AgentProject, CaseRow, Run, TurnRow
from runs.selectors.calibration import metric_agreements, metric_calibration, project_calibration
from runs.services.reviews import ReviewInput, review_save
from runs.services.tokens import token_create
from tests.web.factories import RunSpec, build_run, make_project, make_user

pytestmark = pytest.mark.django_db

# Each case of the run (one turn each; cases 1 and 2 fail: rouge 0.31 failed, politeness not
# graded; the others pass: rouge 0.82) and what a reviewer said of its turn.
REVIEWED = {
    0: HumanVerdict.AGREES,  # rouge passed, people: pass
    1: HumanVerdict.SHOULD_PASS,  # rouge failed, people: pass (a disagreement)
    2: HumanVerdict.AGREES,  # rouge failed, people: fail
    3: HumanVerdict.SHOULD_FAIL,  # rouge passed, people: fail (a disagreement)
    4: HumanVerdict.UNSURE,  # left out
}  # case 5: not reviewed


def reviewed_run(project: AgentProject, reviewer: User, verdicts: dict[int, HumanVerdict]) -> Run:
    run = build_run(project, RunSpec(cases=6, turns=1, failing=(1, 2)))
    for index, verdict in verdicts.items():
        case = CaseRow.objects.get(run=run, index=index)
        turn = TurnRow.objects.get(case=case, index=0)
        review_save(user=reviewer, case=case, turn=turn, data=ReviewInput(verdict=verdict.value))
    return run


@pytest.fixture
def reviewer(db: None) -> User:
    return make_user("reviewer")


@pytest.fixture
def run(project: AgentProject, reviewer: User) -> Run:
    return reviewed_run(project, reviewer, REVIEWED)


def turn_of(run: Run, index: int) -> TurnRow:
    return TurnRow.objects.get(run=run, case__index=index)


# --- the selector ------------------------------------------------------------------------------


def test_each_metric_of_the_project_has_its_agreement_over_the_reviewed_turns(
    project: AgentProject, run: Run
) -> None:
    found = {
        agreement.metric: agreement for agreement in project_calibration(project_id=project.pk)
    }

    assert list(found) == ["rouge", "politeness", "refund_grader"]  # by kind, then name
    rouge = found["rouge"]
    assert rouge.kinds == ("standard",)
    assert rouge.confusion.table == [[1, 1], [1, 1]]
    assert (rouge.n, rouge.agreed, rouge.unsure, rouge.not_graded) == (4, 2, 1, 0)
    assert rouge.kappa is not None and rouge.kappa.value == pytest.approx(0.0)
    assert {d.turn_id for d in rouge.disagreements} == {turn_of(run, 1).pk, turn_of(run, 3).pk}
    # The judge could not grade the failing turns: they are left out, counted apart.
    politeness = found["politeness"]
    assert (politeness.n, politeness.not_graded, politeness.unsure) == (2, 2, 1)
    assert politeness.confusion.table == [[1, 1], [0, 0]]

    geval_only = project_calibration(project_id=project.pk, kind="geval")
    assert [agreement.metric for agreement in geval_only] == ["politeness"]


def test_a_metric_nobody_reviewed_is_listed_with_no_pair(project: AgentProject) -> None:
    build_run(project, RunSpec(cases=2, turns=1))
    found = project_calibration(project_id=project.pk)
    assert {agreement.metric: agreement.n for agreement in found} == {
        "rouge": 0,
        "refund_grader": 0,
        "politeness": 0,
    }
    assert all(agreement.kappa is None for agreement in found)


def test_reviews_of_another_project_and_reopened_ones_do_not_count(
    project: AgentProject, run: Run, reviewer: User
) -> None:
    other = make_project("other-agent", "/srv/agents/other")
    reviewed_run(other, reviewer, {0: HumanVerdict.SHOULD_FAIL})
    from runs.review_models import Review

    Review.objects.filter(turn=turn_of(run, 2)).update(reopened=True)
    rouge = metric_calibration(project_id=project.pk, metric="rouge").agreement
    assert (rouge.n, rouge.confusion.both_fail) == (3, 0)


# --- the pages ---------------------------------------------------------------------------------


def test_the_calibration_page_lists_every_metric_with_agreement_kappa_and_n(
    viewer_client: Client, project: AgentProject, run: Run
) -> None:
    response = viewer_client.get(reverse("project_calibration", args=[project.pk]))

    assert response.status_code == 200
    text = response.text
    for name in ("rouge", "refund_grader", "politeness"):
        assert reverse("project_calibration_metric", args=[project.pk, name]) in text
    assert 'data-calibration="agreement">2/4 (50%)' in text
    assert 'data-calibration="kappa">0.00 <span class="small muted">[' in text

    only = viewer_client.get(reverse("project_calibration", args=[project.pk]), {"kind": "code"})
    assert "refund_grader" in only.text and "politeness" not in only.text
    bad = viewer_client.get(reverse("project_calibration", args=[project.pk]), {"kind": "x"})
    assert bad.status_code == 400


def test_a_metrics_page_shows_the_confusion_matrix_kappa_and_links_to_its_disagreements(
    viewer_client: Client, project: AgentProject, run: Run
) -> None:
    response = viewer_client.get(reverse("project_calibration_metric", args=[project.pk, "rouge"]))

    assert response.status_code == 200
    text = response.text
    for cell in ("both_pass", "false_pass", "false_fail", "both_fail"):
        assert f'data-cell="{cell}">1</td>' in text
    assert 'data-calibration="agreement">2 of 4 (50%)' in text
    assert 'data-calibration="interval">95 % interval [' in text
    for index in (1, 3):
        case = CaseRow.objects.get(run=run, index=index)
        link = reverse("case_detail", args=[run.pk, case.pk]) + "#turn-1"
        assert text.count(f'href="{link}"') == 2  # in the disagreements and in the table
    # The threshold that agrees best (people fail 0.82 and pass 0.31 as often as not) is shown.
    assert 'data-calibration="best-threshold">' in text and "Shown, never applied" in text
    same = viewer_client.get(reverse("project_calibration", args=[project.pk]), {"metric": "rouge"})
    assert 'data-cell="both_fail">1</td>' in same.text


def test_a_metric_without_reviews_says_so(
    viewer_client: Client, project: AgentProject, run: Run
) -> None:
    response = viewer_client.get(
        reverse("project_calibration_metric", args=[project.pk, "no such metric"])
    )
    assert response.status_code == 200
    assert "has been reviewed yet" in response.text


def test_the_pages_need_a_sign_in_and_a_project(client: Client, project: AgentProject) -> None:
    page = reverse("project_calibration", args=[project.pk])
    assert client.get(page).status_code == 302
    client.force_login(make_user("someone"))
    assert client.get(reverse("project_calibration", args=[project.pk + 99])).status_code == 404


def test_the_pages_cost_a_fixed_number_of_queries_and_write_nothing(
    viewer_client: Client, project: AgentProject, run: Run, reviewer: User
) -> None:
    def queries(url: str) -> list[str]:
        with CaptureQueriesContext(connection) as captured:
            assert viewer_client.get(url).status_code == 200
        return [query["sql"] for query in captured]

    pages = [
        reverse("project_calibration", args=[project.pk]),
        reverse("project_calibration_metric", args=[project.pk, "rouge"]),
    ]
    before = [queries(url) for url in pages]
    for _ in range(3):
        reviewed_run(project, reviewer, {i: HumanVerdict.SHOULD_PASS for i in range(6)})
    after = [queries(url) for url in pages]
    assert [len(sql) for sql in after] == [len(sql) for sql in before]
    for sql in [*before, *after]:
        assert not [q for q in sql if q.split()[0].upper() in {"INSERT", "UPDATE", "DELETE"}]


# --- compare's metric rows ---------------------------------------------------------------------


def test_compare_shows_how_each_metric_agrees_with_people_in_one_query(
    viewer_client: Client, project: AgentProject, run: Run
) -> None:
    other = build_run(project, RunSpec(cases=6, turns=1, failing=(1,)))
    with CaptureQueriesContext(connection) as captured:
        response = viewer_client.get(reverse("compare"), {"runs": f"{run.pk},{other.pk}"})
    assert response.status_code == 200
    assert 'data-agreement="rouge">people agree 2/4, κ 0.00</div>' in response.text
    assert 'data-agreement="politeness">people agree 1/2' in response.text
    assert sum("runs_review" in query["sql"] for query in captured) == 1
    assert metric_agreements(project_ids=[], metric_names=["rouge"]) == {}


# --- the API -----------------------------------------------------------------------------------


def api_get(user: User, path: str, **params: Any) -> Any:
    _, secret = token_create(user=user, name="ci")
    return Client(headers={"Authorization": f"Bearer {secret}"}).get(path, params)


def test_the_api_gives_each_metrics_agreement_with_kappa_and_its_interval(
    viewer: User, project: AgentProject, run: Run
) -> None:
    response = api_get(viewer, f"/api/v1/projects/{project.pk}/calibration")

    assert response.status_code == 200
    body = response.json()
    assert body["project_id"] == project.pk and body["kind"] == ""
    rouge = next(metric for metric in body["metrics"] if metric["metric"] == "rouge")
    assert rouge["confusion"] == {"both_pass": 1, "false_pass": 1, "false_fail": 1, "both_fail": 1}
    assert (rouge["n"], rouge["agreed"], rouge["agreement"], rouge["unsure"]) == (4, 2, 0.5, 1)
    assert rouge["kappa"]["value"] == pytest.approx(0.0)
    assert rouge["kappa"]["low"] < 0 < rouge["kappa"]["high"]
    assert rouge["kappa"]["confidence"] == 0.95
    assert rouge["best_threshold"]["total"] == 4
    assert rouge["summary"] == "people agree 2/4, κ 0.00"

    geval = api_get(viewer, f"/api/v1/projects/{project.pk}/calibration", kind="geval").json()
    assert [metric["metric"] for metric in geval["metrics"]] == ["politeness"]


def test_the_api_gives_a_metrics_reviewed_turns_and_disagreements(
    viewer: User, project: AgentProject, run: Run
) -> None:
    response = api_get(viewer, f"/api/v1/projects/{project.pk}/calibration/rouge")

    assert response.status_code == 200
    body = response.json()
    assert body["metric"] == "rouge" and body["n"] == 4
    assert len(body["turns"]) == 5  # the unsure one too, left out of the counts
    wrong = {turn["turn_id"]: turn for turn in body["disagreements"]}
    assert set(wrong) == {turn_of(run, 1).pk, turn_of(run, 3).pk}
    strict = wrong[turn_of(run, 1).pk]
    case = CaseRow.objects.get(run=run, index=1)
    assert strict["url"] == reverse("case_detail", args=[run.pk, case.pk]) + "#turn-1"
    assert (strict["outcome"], strict["human_verdict"], strict["turn_index"]) == (
        "failed",
        "should_pass",
        0,
    )
    assert (strict["machine_passed"], strict["human_passed"], strict["agrees"]) == (
        False,
        True,
        False,
    )


def test_the_api_refuses_without_a_token_and_answers_404_and_422(
    client: Client, viewer: User, project: AgentProject
) -> None:
    assert client.get(f"/api/v1/projects/{project.pk}/calibration").status_code == 401
    missing = api_get(viewer, f"/api/v1/projects/{project.pk + 99}/calibration")
    assert missing.status_code == 404
    bad = api_get(viewer, f"/api/v1/projects/{project.pk}/calibration", kind="tools")
    assert bad.status_code == 422
    schema = api_get(viewer, "/api/v1/openapi.json").json()
    assert "/api/v1/projects/{project_id}/calibration" in schema["paths"]
    assert "/api/v1/projects/{project_id}/calibration/{metric}" in schema["paths"]
