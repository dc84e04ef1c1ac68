from __future__ import annotations

import re
from pathlib import Path
from unittest import mock

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import AgentProject, CaseResult, Run
from tests.web.factories import RunSpec, build_run, failing_case, make_project

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def case_rows(html: str) -> int:
    return len(re.findall(r'id="case-\d+"', html))


def turn_sections(html: str) -> int:
    return html.count('<section class="turn')


VALID_AGENT = """\
name: tiny
model: {provider: scripted, name: tiny-script}
instructions: {inline: "Be brief."}
test_cases:
  - name: greeting
    input: Hi
    ground_truth: Hello
  - name: farewell
    input: Bye
    ground_truth: Goodbye
"""

BROKEN_AGENT = """\
name: tiny
model: {provider: scripted, name: tiny-script}
instructions: {inline: "Be brief."}
test_cases:
  - name: "bad <script>alert(1)</script>"
    turns: []
  - input: ""
    bogus: 1
"""


def agent_project(tmp_path: Path, text: str) -> AgentProject:
    (tmp_path / "agent.yaml").write_text(text)
    return AgentProject.objects.create(name="tiny", directory=str(tmp_path))


# --- access ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("home", {}),
        ("run_list", {}),
        ("run_detail", {"run_id": 1}),
        ("run_progress", {"run_id": 1}),
        ("case_detail", {"run_id": 1, "case_id": 1}),
        ("case_turns", {"run_id": 1, "case_id": 1}),
        ("project_launch", {"project_id": 1}),
    ],
)
def test_every_page_redirects_an_anonymous_visitor_to_login(
    client: Client, name: str, kwargs: dict[str, int]
) -> None:
    response = client.get(reverse(name, kwargs=kwargs))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_a_non_staff_user_cannot_open_or_post_the_launch_form(
    viewer_client: Client, project: AgentProject
) -> None:
    url = reverse("project_launch", args=[project.pk])
    assert viewer_client.get(url).status_code == 403
    assert viewer_client.post(url, {"git_ref": ""}).status_code == 403
    assert not Run.objects.exists()


def test_a_non_staff_user_cannot_cancel_a_run(viewer_client: Client, project: AgentProject) -> None:
    run = build_run(project, RunSpec(status=Run.Status.RUNNING, done=3))
    response = viewer_client.post(reverse("run_cancel", args=[run.pk]))
    assert response.status_code == 403
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def test_cancel_only_accepts_post(staff_client: Client, project: AgentProject) -> None:
    run = build_run(project, RunSpec(status=Run.Status.RUNNING, done=3))
    assert staff_client.get(reverse("run_cancel", args=[run.pk])).status_code == 405


def test_staff_cancelling_a_running_run_calls_run_cancel_and_redirects(
    staff_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(status=Run.Status.RUNNING, done=3))
    response = staff_client.post(reverse("run_cancel", args=[run.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("run_detail", args=[run.pk])
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED


def test_the_cancel_button_is_shown_to_staff_only_while_the_run_is_active(
    staff_client: Client, project: AgentProject
) -> None:
    active = build_run(project, RunSpec(status=Run.Status.RUNNING, done=3))
    finished = build_run(project)
    cancel_url = reverse("run_cancel", args=[active.pk])
    assert cancel_url in staff_client.get(reverse("run_detail", args=[active.pk])).text
    assert "Cancel run" not in staff_client.get(reverse("run_detail", args=[finished.pk])).text


def test_the_cancel_button_is_hidden_from_viewers(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(status=Run.Status.RUNNING, done=3))
    assert "Cancel run" not in viewer_client.get(reverse("run_detail", args=[run.pk])).text


# --- launch ---------------------------------------------------------------------------------


def test_launching_a_broken_agent_lists_every_problem_escaped_and_queues_nothing(
    staff_client: Client, tmp_path: Path
) -> None:
    project = agent_project(tmp_path, BROKEN_AGENT)
    response = staff_client.post(
        reverse("project_launch", args=[project.pk]), {"git_ref": "", "parallel": "2"}
    )
    assert response.status_code == 400
    html = response.text
    assert "3 problems" in html
    assert "turns must not be empty" in html
    assert "input must not be empty" in html
    assert "bogus: unknown field" in html
    assert "bad &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)</script>" not in html
    assert not Run.objects.exists()


def test_launching_a_valid_agent_creates_a_queued_run_and_redirects_to_it(
    staff_client: Client, tmp_path: Path, staff: object
) -> None:
    project = agent_project(tmp_path, VALID_AGENT)
    response = staff_client.post(
        reverse("project_launch", args=[project.pk]),
        {"git_ref": "", "parallel": "", "case_filter": "fare", "limit": ""},
    )
    run = Run.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("run_detail", args=[run.pk])
    assert run.status == Run.Status.QUEUED
    assert run.total_cases == 1  # the case filter kept "farewell" only
    assert run.created_by == staff


def test_a_launch_error_is_shown_inline(staff_client: Client, tmp_path: Path) -> None:
    project = agent_project(tmp_path, VALID_AGENT)
    response = staff_client.post(
        reverse("project_launch", args=[project.pk]), {"case_filter": "no-such-case"}
    )
    assert response.status_code == 400
    assert "no test case matches the filter" in response.text
    assert not Run.objects.exists()


def test_the_launch_form_rejects_a_parallelism_below_one(
    staff_client: Client, tmp_path: Path
) -> None:
    project = agent_project(tmp_path, VALID_AGENT)
    with mock.patch("runs.services.run_create") as run_create:
        response = staff_client.post(
            reverse("project_launch", args=[project.pk]), {"parallel": "0"}
        )
    assert response.status_code == 400
    run_create.assert_not_called()


# --- projects and run list ------------------------------------------------------------------


def test_the_home_page_shows_each_project_with_its_last_run(
    viewer_client: Client, project: AgentProject
) -> None:
    build_run(project, RunSpec(status=Run.Status.PASSED, failing=()))
    last = build_run(project, RunSpec(status=Run.Status.FAILED, cases=4))
    make_project("empty-agent", "/srv/agents/empty")
    html = viewer_client.get(reverse("home")).text
    assert f'href="{reverse("run_detail", args=[last.pk])}"' in html
    assert "3/4 passed" in html
    assert "no runs yet" in html


def test_the_home_page_costs_the_same_queries_for_many_projects(
    viewer_client: Client, django_assert_max_num_queries: object
) -> None:
    for index in range(20):
        build_run(make_project(f"agent-{index}", f"/srv/{index}"), RunSpec(cases=1, turns=1))
    with django_assert_max_num_queries(4):  # type: ignore[operator]
        assert viewer_client.get(reverse("home")).status_code == 200


def test_the_run_list_filters_by_project_status_and_commit_prefix(
    viewer_client: Client, project: AgentProject
) -> None:
    other = make_project("other-agent", "/srv/other")
    mine = build_run(project, RunSpec(cases=1, turns=1, git_commit="abc123" + "0" * 34))
    passed = build_run(
        project, RunSpec(cases=1, turns=1, status=Run.Status.PASSED, git_commit="def456" + "0" * 34)
    )
    theirs = build_run(other, RunSpec(cases=1, turns=1, git_commit="abc999" + "0" * 34))

    def listed(query: str) -> set[int]:
        page = viewer_client.get(reverse("run_list") + query).context["page"]
        return {run.pk for run in page}

    assert listed("") == {mine.pk, passed.pk, theirs.pk}
    assert listed(f"?project={project.pk}") == {mine.pk, passed.pk}
    assert listed("?status=passed") == {passed.pk}
    assert listed("?commit=abc") == {mine.pk, theirs.pk}
    assert listed(f"?commit=ABC1&project={project.pk}") == {mine.pk}
    assert listed("?status=bogus") == {mine.pk, passed.pk, theirs.pk}


def test_the_run_list_pages_by_fifty(viewer_client: Client, project: AgentProject) -> None:
    Run.objects.bulk_create([Run(project=project, agent_name="a") for _ in range(51)])
    first = viewer_client.get(reverse("run_list"))
    assert len(first.context["page"]) == 50
    assert "page 1 of 2" in first.text
    assert len(viewer_client.get(reverse("run_list") + "?page=2").context["page"]) == 1


# --- run detail -----------------------------------------------------------------------------


def test_the_run_page_shows_tiles_case_rows_and_metric_averages_by_kind(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=10, turns=3))
    response = viewer_client.get(reverse("run_detail", args=[run.pk]))
    html = response.text
    assert "90%" in html  # 9 of 10 cases passed
    assert "10/10" in html and "30/30" in html
    groups = response.context["metric_groups"]
    assert list(groups) == ["standard", "geval", "code"]
    code = groups["code"][0]
    assert (code.name, code.evaluated, code.passed) == ("refund_grader", 29, 28)
    assert groups["geval"][0].errored == 1
    assert "3 turns · 1/3 passed" in html  # the failing case's chip
    assert case_rows(html) == 10
    # Rows only: turn details are loaded when a row is expanded.
    assert "What is the refund" not in html
    assert reverse("case_turns", args=[run.pk, failing_case(run).pk]) in html


def test_only_failures_keeps_the_failed_case_rows(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=6, turns=2, failing=(1, 4)))
    response = viewer_client.get(reverse("run_detail", args=[run.pk]) + "?failures=1")
    assert [case.index for case in response.context["case_page"]] == [1, 4]
    partial = viewer_client.get(
        reverse("run_detail", args=[run.pk]) + "?failures=1",
        headers={**HTMX, "HX-Target": "case-list"},
    )
    assert partial.text.lstrip().startswith('<section id="case-list"')
    assert "<html" not in partial.text
    assert case_rows(partial.text) == 2


def test_a_long_case_list_is_paged_with_a_load_more_button(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=205, turns=1))
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert case_rows(html) == 200
    assert "?page=2" in html
    more = viewer_client.get(reverse("run_detail", args=[run.pk]) + "?page=2", headers=HTMX)
    assert case_rows(more.text) == 5
    assert "<html" not in more.text


def test_expanding_a_case_renders_its_turns_as_a_fragment(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    case = failing_case(run)
    response = viewer_client.get(reverse("case_turns", args=[run.pk, case.pk]), headers=HTMX)
    html = response.text
    assert response.status_code == 200
    assert "<html" not in html
    assert turn_sections(html) == 3
    assert 'id="turn-1"' in html
    assert "order_id" in html and "&quot;A-123&quot;" in html and "&quot;A-999&quot;" in html
    assert "no call of orders_lookup matched every argument" in html
    assert "could not grade" in html and "judge returned invalid JSON" in html
    assert "skipped" in html and "two consecutive session errors" in html
    assert '<span class="j-key">note</span>' in html  # grader details tree
    assert "<details" in html  # the long tool result is collapsed


def test_a_case_of_another_run_is_not_found(viewer_client: Client, project: AgentProject) -> None:
    run, other = build_run(project), build_run(project)
    case = failing_case(other)
    assert viewer_client.get(reverse("case_turns", args=[run.pk, case.pk])).status_code == 404
    assert viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).status_code == 404


def test_the_case_page_renders_expanded_with_anchors_for_each_turn(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    case = failing_case(run)
    html = viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).text
    assert "<html" in html
    assert f'href="{reverse("case_detail", args=[run.pk, case.pk])}#turn-2"' in html
    assert 'id="turn-2"' in html


def test_a_json_response_is_shown_formatted(viewer_client: Client, project: AgentProject) -> None:
    run = build_run(project, RunSpec(texts={"response": '{"refund": 42, "currency": "EUR"}'}))
    case = failing_case(run)
    html = viewer_client.get(reverse("case_turns", args=[run.pk, case.pk])).text
    assert '<pre class="json">{\n  &quot;refund&quot;: 42,' in html


def test_a_markdown_response_is_rendered(viewer_client: Client, project: AgentProject) -> None:
    run = build_run(project, RunSpec(cases=1, turns=1, failing=()))
    html = viewer_client.get(reverse("case_turns", args=[run.pk, run.cases.get().pk])).text
    assert "<strong>42.00 EUR</strong>" in html


# --- live progress --------------------------------------------------------------------------


def test_progress_polls_while_running_and_stops_with_286_when_finished(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=1))
    detail = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert 'hx-trigger="every 1s"' in detail
    url = reverse("run_progress", args=[run.pk])
    running = viewer_client.get(
        url, {"known": "4", "since": "2020-01-01T00:00:00+00:00"}, headers=HTMX
    )
    assert running.status_code == 200
    assert 'hx-trigger="every 1s"' in running.text
    assert "1/4 cases" in running.text and "2/8 turns" in running.text
    assert "25%" in running.text

    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.PASSED, cases_done=4, turns_done=8, passed_cases=3
    )
    finished = viewer_client.get(url, {"known": "4"}, headers=HTMX)
    assert finished.status_code == 286
    assert "every 1s" not in finished.text
    assert "100%" in finished.text
    assert 'id="case-list" class="case-list" hx-swap-oob="true"' in finished.text


def test_progress_swaps_in_only_the_cases_finished_since_the_last_poll(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=1))
    first = viewer_client.get(reverse("run_detail", args=[run.pk]))
    since = str(first.context["poll_since"])
    CaseResult.objects.filter(run=run, index=0).update(finished_at="2000-01-01T00:00:00Z")
    case = CaseResult.objects.get(run=run, index=2)
    CaseResult.objects.filter(pk=case.pk).update(status="done", passed=True, turns_passed=2)
    response = viewer_client.get(
        reverse("run_progress", args=[run.pk]), {"known": "4", "since": since}, headers=HTMX
    )
    assert response.status_code == 200
    assert f'id="case-{case.pk}" hx-swap-oob="true"' not in response.text  # not finished yet
    from django.utils import timezone

    CaseResult.objects.filter(pk=case.pk).update(finished_at=timezone.now())
    response = viewer_client.get(
        reverse("run_progress", args=[run.pk]), {"known": "4", "since": since}, headers=HTMX
    )
    assert f'id="case-{case.pk}" hx-swap-oob="true"' in response.text
    assert response.text.count("hx-swap-oob") == 3  # header, tiles, the one case row


def test_progress_rerenders_the_case_list_when_cases_appear(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=3, turns=1, status=Run.Status.RUNNING, done=0))
    response = viewer_client.get(
        reverse("run_progress", args=[run.pk]), {"known": "0", "since": "2020-01-01T00:00:00Z"}
    )
    assert response.status_code == 200
    assert 'id="case-list" class="case-list" hx-swap-oob="true"' in response.text


def test_a_finished_run_downloads_as_a_holodeck_result_file(
    viewer_client: Client, project: AgentProject
) -> None:
    from runs.report.holodeck_io import load_eval_runs

    run = build_run(project, RunSpec(cases=3, turns=2))
    response = viewer_client.get(reverse("run_export", args=[run.pk]))
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    (eval_run,) = load_eval_runs(response.json())
    assert eval_run.report.summary.total_tests == 3
    assert all(len(result.turns or []) == 2 for result in eval_run.report.results)
    page = viewer_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert reverse("run_export", args=[run.pk]) in page
