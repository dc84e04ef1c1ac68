"""The HTTP API under /api/v1: tokens and sessions, staff-only actions, JSON errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import AgentProject, Run
from runs.services.tokens import token_create, token_revoke
from tests.web.factories import RunSpec, build_run

pytestmark = pytest.mark.django_db

API = "/api/v1"


def bearer(user: User) -> dict[str, str]:
    _, secret = token_create(user=user, name="ci")
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def staff_token(staff: User) -> dict[str, str]:
    return bearer(staff)


@pytest.fixture
def viewer_token(viewer: User) -> dict[str, str]:
    return bearer(viewer)


def get(client: Client, path: str, headers: dict[str, str], **params: Any) -> Any:
    return client.get(f"{API}{path}", params, headers=headers)


def post(client: Client, path: str, headers: dict[str, str], body: Any = None) -> Any:
    return client.post(f"{API}{path}", body or {}, content_type="application/json", headers=headers)


# --- authentication -----------------------------------------------------------------------------


def test_no_token_is_a_401_in_json(client: Client) -> None:
    response = client.get(f"{API}/runs")
    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


def test_a_revoked_token_is_a_401(client: Client, viewer: User) -> None:
    token, secret = token_create(user=viewer, name="old")
    assert (
        client.get(f"{API}/runs", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    )
    token_revoke(token=token)
    response = client.get(f"{API}/runs", headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 401 and response.json()["detail"]


def test_a_made_up_token_is_a_401(client: Client) -> None:
    response = client.get(f"{API}/runs", headers={"Authorization": "Bearer hdw_nothing"})
    assert response.status_code == 401


def test_the_browser_session_works_and_writes_need_its_csrf_token(viewer: User) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(viewer)
    assert browser.get(f"{API}/runs").status_code == 200
    response = browser.post(f"{API}/runs/1/cancel")
    assert response.status_code in (401, 403)  # no CSRF token: refused before anything runs


def test_a_tokens_secret_is_stored_only_as_a_digest(viewer: User) -> None:
    token, secret = token_create(user=viewer, name="ci")
    assert secret.startswith("hdw_") and len(secret) > 40
    assert secret not in (token.digest, token.prefix) and secret.startswith(token.prefix)


# --- projects ------------------------------------------------------------------------------------


def test_projects_are_listed_and_shown(
    client: Client, viewer_token: dict[str, str], project: AgentProject
) -> None:
    page = get(client, "/projects", viewer_token).json()
    assert page["count"] == 1 and page["items"][0]["name"] == project.name
    assert get(client, f"/projects/{project.pk}", viewer_token).json()["id"] == project.pk
    missing = get(client, "/projects/999999", viewer_token)
    assert missing.status_code == 404 and missing.json() == {"detail": "Not Found"}


def test_registering_a_project_needs_staff_and_a_readable_agent_yaml(
    client: Client, viewer_token: dict[str, str], staff_token: dict[str, str], tmp_path: Path
) -> None:
    from tests.web.services_helpers import EXAMPLES

    agent = EXAMPLES / "support-bot" / "agent.yaml"
    refused = post(client, "/projects", viewer_token, {"path": str(agent)})
    assert refused.status_code == 403 and refused.json() == {
        "detail": "Only staff can register projects."
    }
    made = post(client, "/projects", staff_token, {"path": str(agent.parent)})
    assert made.status_code == 201 and made.json()["agent_file"] == "agent.yaml"
    bad = post(client, "/projects", staff_token, {"path": str(tmp_path / "none.yaml")})
    assert bad.status_code == 422 and "not a file" in bad.json()["detail"]
    invalid = post(client, "/projects", staff_token, {"name": "x"})
    assert invalid.status_code == 422 and isinstance(invalid.json()["detail"], list)


# --- runs ----------------------------------------------------------------------------------------


def test_runs_are_listed_with_filters_and_paginated(
    client: Client, viewer_token: dict[str, str], project: AgentProject
) -> None:
    first = build_run(project, RunSpec(cases=2, turns=1, git_commit="abc123" + "0" * 34))
    build_run(
        project, RunSpec(cases=2, turns=1, status=Run.Status.PASSED, git_commit="def" + "0" * 37)
    )
    assert get(client, "/runs", viewer_token).json()["count"] == 2
    assert [r["id"] for r in get(client, "/runs", viewer_token, commit="abc").json()["items"]] == [
        first.pk
    ]
    assert get(client, "/runs", viewer_token, status="passed").json()["count"] == 1
    assert get(client, "/runs", viewer_token, branch="main").json()["count"] == 2
    assert get(client, "/runs", viewer_token, limit=1).json()["items"][0]["id"] != first.pk
    assert get(client, "/runs", viewer_token, status="exploded").status_code == 422
    assert get(client, "/runs", viewer_token, commit="a\x00b").status_code == 422
    assert get(client, "/runs", viewer_token, project=str(2**64)).status_code == 422


def test_a_single_value_parameter_given_twice_is_a_422_not_the_last_value(
    client: Client, viewer_token: dict[str, str], project: AgentProject
) -> None:
    build_run(project, RunSpec(cases=1, turns=1))
    twice = client.get(f"{API}/runs?branch=main&branch=other", headers=viewer_token)
    assert twice.status_code == 422
    assert "branch" in twice.content.decode()
    assert get(client, "/runs", viewer_token, branch="main").status_code == 200


def test_a_run_shows_its_summary_progress_cases_and_turns(
    client: Client, viewer_token: dict[str, str], project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=3, failing=(1,)))
    detail = get(client, f"/runs/{run.pk}", viewer_token).json()
    assert (detail["passed_cases"], detail["failed_cases"], detail["pass_rate"]) == (3, 1, 75.0)
    assert detail["not_graded_cases"] == 0
    assert detail["url"] == f"/runs/{run.pk}/"
    summary = detail["summary"]
    assert (summary["cases"]["passed"], summary["cases"]["failed"]) == (3, 1)
    assert summary["pass_rate"] == 75.0
    progress = get(client, f"/runs/{run.pk}/progress", viewer_token).json()
    assert progress["percent"] == 100 and progress["active"] is False
    cases = get(client, f"/runs/{run.pk}/cases", viewer_token, failed="true").json()
    assert cases["count"] == 1 and cases["items"][0]["outcome"] == "failed"
    assert get(client, f"/runs/{run.pk}/cases", viewer_token, q="case 3").json()["count"] == 1
    case_id = cases["items"][0]["id"]
    turns = get(client, f"/runs/{run.pk}/cases/{case_id}/turns", viewer_token).json()
    assert [t["outcome"] for t in turns] == ["passed", "failed", "skipped"]
    assert turns[1]["arg_match_details"][0]["passed"] is False
    assert {m["metric_name"] for m in turns[1]["metric_results"]} == {
        "rouge",
        "refund_grader",
        "politeness",
    }
    assert get(client, f"/runs/{run.pk}/cases/999999/turns", viewer_token).status_code == 404
    assert get(client, "/runs/999999", viewer_token).status_code == 404


def test_a_turn_is_served_as_the_result_files_turn_with_its_verdicts(
    client: Client, viewer_token: dict[str, str], project: AgentProject
) -> None:
    from runs.core.wire.models import TurnResult

    run = build_run(project, RunSpec(cases=2, turns=2, failing=(1,)))
    case_id = get(client, f"/runs/{run.pk}/cases", viewer_token, failed="true").json()["items"][0]
    turns = get(client, f"/runs/{run.pk}/cases/{case_id['id']}/turns", viewer_token).json()

    # These turns recorded no transcript: the key is left out, as in a result file.
    assert [set(turn) for turn in turns] == [set(TurnResult.model_fields) - {"transcript"}] * 2
    assert [turn["turn_index"] for turn in turns] == [0, 1]
    failed = TurnResult.model_validate(turns[1])  # what a result file holds, verdicts included
    assert failed.outcome == "failed" and failed.kind_outcomes
    assert {m.outcome for m in failed.metric_results} >= {"failed"}


def test_a_case_row_names_its_result_fields_as_the_result_file_does(
    client: Client, viewer_token: dict[str, str], project: AgentProject
) -> None:
    from runs.core.wire.models import TestResult

    run = build_run(project, RunSpec(cases=2, turns=1, status=Run.Status.RUNNING, done=1))
    cases = get(client, f"/runs/{run.pk}/cases", viewer_token).json()["items"]

    row_facts = {
        *("id", "index", "repetition", "name", "status"),
        *("is_multi_turn", "turn_count", "turns_passed"),
    }
    assert set(cases[0]) - row_facts <= set(TestResult.model_fields)
    assert [case["outcome"] for case in cases] == ["passed", None]  # pending: no verdict yet


def test_a_running_runs_summary_is_its_live_one_and_a_finished_runs_the_stored_one(
    client: Client, viewer_token: dict[str, str], project: AgentProject
) -> None:
    from runs.core.verdicts.summary import RunSummary

    running = build_run(
        project, RunSpec(cases=3, turns=1, failing=(), status=Run.Status.RUNNING, done=2)
    )
    Run.objects.filter(pk=running.pk).update(summary=RunSummary.empty().model_dump(mode="json"))
    live = get(client, f"/runs/{running.pk}", viewer_token).json()["summary"]
    assert (live["cases"]["total"], live["cases"]["passed"], live["cases"]["pending"]) == (3, 2, 1)

    finished = build_run(project, RunSpec(cases=3, turns=1))
    stored = RunSummary.empty().model_dump(mode="json")
    Run.objects.filter(pk=finished.pk).update(summary=stored)
    shown = get(client, f"/runs/{finished.pk}", viewer_token).json()["summary"]
    assert shown == stored  # the stored record, not recomputed from the rows


def test_cancelling_needs_staff_and_a_run_that_has_not_ended(
    client: Client, viewer_token: dict[str, str], staff_token: dict[str, str], project: AgentProject
) -> None:
    finished = build_run(project)
    running = build_run(project, RunSpec(status=Run.Status.RUNNING, done=5))
    assert post(client, f"/runs/{running.pk}/cancel", viewer_token).status_code == 403
    conflict = post(client, f"/runs/{finished.pk}/cancel", staff_token)
    assert conflict.status_code == 409 and "already ended" in conflict.json()["detail"]
    cancelled = post(client, f"/runs/{running.pk}/cancel", staff_token)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_launching_through_the_api(
    client: Client,
    viewer_token: dict[str, str],
    staff_token: dict[str, str],
    tmp_path: Path,
    eager_celery: None,
) -> None:
    from tests.web.services_helpers import example_project

    project = example_project(tmp_path)
    assert post(client, "/runs", viewer_token, {"project": project.pk}).status_code == 403
    launched = post(
        client, "/runs", staff_token, {"project": project.pk, "limit": 1, "parallel": 1}
    )
    assert launched.status_code == 201, launched.content
    run = Run.objects.get(pk=launched.json()["id"])
    assert run.total_cases == 1 and run.status in (Run.Status.PASSED, Run.Status.FAILED)
    nothing = post(client, "/runs", staff_token, {"project": project.pk, "case_filter": "zzz"})
    assert nothing.status_code == 422
    assert nothing.json()["detail"][0]["loc"] == ["body", "case_filter"]
    bad_ref = post(client, "/runs", staff_token, {"project": project.pk, "git_ref": "no-such"})
    assert bad_ref.status_code == 422 and bad_ref.json()["detail"][0]["loc"] == ["body", "git_ref"]
    project.agent_path.write_text(project.agent_path.read_text() + "\nbogus: 1\n")
    broken = post(client, "/runs", staff_token, {"project": project.pk})
    assert broken.status_code == 422 and "bogus" in broken.json()["detail"][0]["msg"]
    assert broken.json()["detail"][0]["loc"][0] == "agent.yaml"
    assert post(client, "/runs", staff_token, {"project": 999999}).status_code == 404
    assert (
        post(client, "/runs", staff_token, {"project": project.pk, "parallel": 0}).status_code
        == 422
    )


@pytest.mark.parametrize(
    "fmt, marker", [("json", '"report"'), ("markdown", "# "), ("junit", "<testsuite")]
)
def test_a_run_exports_as_json_markdown_and_junit(
    client: Client, viewer_token: dict[str, str], project: AgentProject, fmt: str, marker: str
) -> None:
    run = build_run(project, RunSpec(cases=3, turns=2))
    response = get(client, f"/runs/{run.pk}/export", viewer_token, format=fmt)
    assert response.status_code == 200 and marker in response.content.decode()
    assert "attachment" in response["Content-Disposition"]


def test_compare_through_the_api(
    client: Client, viewer_token: dict[str, str], project: AgentProject
) -> None:
    base = build_run(project, RunSpec(cases=3, turns=2, failing=()))
    run = build_run(project, RunSpec(cases=3, turns=2, failing=(1,)))
    from runs.models import CaseRow

    CaseRow.objects.filter(run=run, index=1).update(name="refund case 1")
    data = get(
        client, "/compare", viewer_token, runs=[base.pk, run.pk], baseline=base.pk, kinds=["code"]
    ).json()
    assert data["baseline"]["run_id"] == base.pk and data["kinds"] == ["code"]
    assert data["by_kind"]["code"] == [{"run_id": run.pk, "regressions": 1, "fixes": 0}]
    assert data["rows"][1]["cells"] == {str(base.pk): "passed", str(run.pk): "failed"}
    assert data["row_count"] == 3
    assert get(client, "/compare", viewer_token, runs=[999999]).status_code == 404
    assert get(client, "/compare", viewer_token, runs=[base.pk], kinds=["vibes"]).status_code == 422
