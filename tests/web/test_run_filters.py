"""The filters reviewers reach for: the cases whose tool assertions failed (``?tools=failed``)
and the cases with a text in their responses (``?text=``), on the run page and in the API; the
tool assertions tile of the run and case pages; and the red "tools" mark of a case or turn that
failed only a tool's arguments."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.core.verdicts.summary import OutcomeCounts, RunSummary
from runs.core.wire.build import summary_of_results
from runs.core.wire.models import MetricResult as WireMetric
from runs.core.wire.models import TurnResult as WireTurn
from runs.models import AgentProject, CaseRow, Run
from runs.selectors import CaseFilters, case_rows, run_eval_run, run_summary
from runs.selectors import cases as cases_selectors
from runs.services.tokens import token_create
from tests.web.factories import RunSpec, build_run, make_tool_args_failed, settled_run

pytestmark = pytest.mark.django_db


def indices(client: Client, run: Run, query: str) -> list[int]:
    page = client.get(reverse("run_detail", args=[run.pk]) + query)
    assert page.status_code == 200, page.content
    return [case.index for case in page.context["case_page"]]


def tools_run(project: AgentProject) -> Run:
    """Six two-turn cases: 1 and 4 failed a tool assertion (and their metrics, as the factory's
    failing cases do), 2 failed only a tool's arguments, the rest passed; ended by the
    recorder, so its summary is stored."""
    run = settled_run(project, cases=6, failing=(1, 4))
    make_tool_args_failed(run, 2)
    run.refresh_from_db()
    return run


def test_a_turn_that_failed_only_a_tools_arguments_is_failed_and_so_is_its_tool_verdict() -> None:
    passed = WireMetric(metric_name="rouge", kind="standard", score=0.9, passed=True)
    turn = WireTurn(
        turn_index=0,
        input="refund order A-123",
        passed=False,
        execution_time_ms=5,
        tools_matched=False,  # the tool was called, with other arguments
        metric_results=[passed],
    )
    assert turn.outcome == "failed"
    assert turn.kind_outcomes == {"standard": "passed", "tools": "failed"}


def test_the_tools_filter_selects_the_cases_with_a_turn_whose_tool_assertions_failed(
    project: AgentProject,
) -> None:
    run = tools_run(project)
    failed = case_rows(run=run, filters=CaseFilters(tools="failed"))
    assert [case.index for case in failed] == [1, 2, 4]
    both = case_rows(run=run, filters=CaseFilters(tools="failed", metric="rouge"))
    assert [case.index for case in both] == [1, 4]  # case 2's metrics all passed


def test_the_text_filter_selects_the_cases_whose_responses_contain_the_text_in_any_case(
    project: AgentProject,
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, failing=()))
    CaseRow.objects.filter(run=run, index=3).update(agent_response="Escalated to a HUMAN.")

    def found(text: str, **more: Any) -> list[int]:
        cases = case_rows(run=run, filters=CaseFilters(text=text, **more))
        return [case.index for case in cases]

    assert found("ORDER 2-1") == [2]  # a turn's response, whatever the case of its letters
    assert found("human") == [3]  # the case's own response
    assert found("42.00 eur") == [0, 1, 2, 3]
    assert found("42.00 eur", query="case 1") == [1]
    assert found("no such words") == []


def test_a_text_in_more_cases_than_are_listed_by_id_is_matched_by_the_lists_own_queries(
    project: AgentProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, failing=()))
    CaseRow.objects.filter(run=run, index=3).update(agent_response="Escalated to a HUMAN.")
    monkeypatch.setattr(cases_selectors, "TEXT_IDS", 2)
    found = case_rows(run=run, filters=CaseFilters(text="42.00 EUR"))
    assert [case.index for case in found] == [0, 1, 2, 3]
    assert [case.index for case in found.filter(index__gt=1)] == [2, 3]
    human = case_rows(run=run, filters=CaseFilters(text="human"))
    assert [case.index for case in human] == [3]


def test_the_run_page_lists_the_cases_whose_tool_assertions_failed_and_says_when_none_did(
    viewer_client: Client, project: AgentProject
) -> None:
    run = tools_run(project)
    assert indices(viewer_client, run, "?tools=failed") == [1, 2, 4]
    assert indices(viewer_client, run, "?tools=failed&outcome=failed&q=case+2") == [2]
    html = viewer_client.get(reverse("run_detail", args=[run.pk]) + "?tools=failed").text
    assert re.search(r'class="filter filter-tools on" aria-current="true"', html)
    assert '<input type="hidden" name="tools" value="failed">' in html  # the search keeps it
    # The toolbar offers it on a run with none.
    clean = build_run(project, RunSpec(cases=3, turns=1, failing=(), status=Run.Status.PASSED))
    url = reverse("run_detail", args=[clean.pk])
    assert ">tool assertions failed</a>" in viewer_client.get(url).text
    assert "No case failed a tool assertion." in viewer_client.get(url + "?tools=failed").text


def test_a_bad_tools_filter_is_said_at_the_toolbar_with_a_400(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=3, turns=1))
    response = viewer_client.get(reverse("run_detail", args=[run.pk]) + "?tools=passed")
    assert response.status_code == 400
    assert 'id="tools-error"' in response.text


def test_the_run_pages_text_search_keeps_the_other_filters_and_they_keep_it(
    viewer_client: Client, project: AgentProject
) -> None:
    run = tools_run(project)
    url = reverse("run_detail", args=[run.pk])
    assert indices(viewer_client, run, "?text=order+4-0") == [4]
    assert indices(viewer_client, run, "?text=ORDER+4-0&tools=failed") == [4]
    assert indices(viewer_client, run, "?text=order+3-0&tools=failed") == []
    html = viewer_client.get(url + "?text=order+4-0&failures=1").text
    # The search box, labelled, shows the text; every filter link keeps it.
    label = "Search the responses and transcripts"
    assert f'<label class="sr-only" for="case-text">{label}</label>' in html
    assert 'id="case-text" name="text" value="order 4-0"' in html
    assert 'href="?text=order+4-0&amp;tools=failed"' in html
    assert "1 case with “order 4-0” in a response or transcript" in html
    empty = viewer_client.get(url + "?text=no+such+words&failures=1").text
    assert "No case has “no such words” in a response or transcript among the failures." in empty
    long = viewer_client.get(url + "?text=" + "x" * 201)
    assert long.status_code == 400 and 'id="text-error"' in long.text


def test_the_api_filters_cases_by_a_failed_tool_assertion_and_by_a_text_in_the_responses(
    client: Client, project: AgentProject, viewer: User
) -> None:
    run = tools_run(project)
    _, secret = token_create(user=viewer, name="filters")
    auth = {"Authorization": f"Bearer {secret}"}

    def listed(**params: Any) -> list[int]:
        response = client.get(f"/api/v1/runs/{run.pk}/cases", params, headers=auth)
        assert response.status_code == 200, response.content
        return [case["index"] for case in response.json()["items"]]

    assert listed(tools="failed") == [1, 2, 4]
    assert listed(text="order 5-1") == [5]
    assert listed(text="ORDER 2-0", tools="failed") == [2]
    assert listed(text="order 3-0", tools="failed") == []
    bad = client.get(f"/api/v1/runs/{run.pk}/cases", {"tools": "passed"}, headers=auth)
    assert bad.status_code == 422


def tile(html: str) -> str:
    match = re.search(r'<div class="tile tools-tile">.*?</div>', html, re.S)
    assert match is not None, "no tool assertions tile"
    return match.group(0)


def test_the_run_pages_tool_tile_counts_the_turns_and_links_their_failures_to_the_filter(
    viewer_client: Client, project: AgentProject
) -> None:
    run = tools_run(project)
    tools = run_summary(run=run).tools
    # 12 turns asserted tool calls; turn 1 of cases 1 and 4 failed them, turn 0 of case 2.
    assert tools == OutcomeCounts(total=12, passed=9, failed=3)
    said = tile(viewer_client.get(reverse("run_detail", args=[run.pk])).text)
    assert '<span data-summary="tools.total">12</span> turns asserted tool calls' in said
    assert '<span data-summary="tools.passed">9</span> passed' in said
    link = f'href="{reverse("run_detail", args=[run.pk])}?tools=failed"'
    assert link in said and '<span data-summary="tools.failed">3</span> failed</a>' in said
    # The API's summary says the same.
    assert RunSummary.model_validate(run.summary).tools == tools


def test_an_imported_export_counts_the_same_tool_verdicts_as_the_rows(
    project: AgentProject,
) -> None:
    run = tools_run(project)
    report = run_eval_run(run=run).report
    assert report.run_summary is not None and report.run_summary.tools == run_summary(run=run).tools
    # An import counts them from the file's results, as the recorder counts the rows.
    assert summary_of_results(report.results).tools == OutcomeCounts(total=12, passed=9, failed=3)


def test_a_run_without_tool_assertions_has_no_tool_tile(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=1, failing=()))
    run.turn_rows.update(tools_matched=None, kind_outcomes={"standard": "passed"})
    assert "tools-tile" not in viewer_client.get(reverse("run_detail", args=[run.pk])).text


def test_a_summary_stored_before_tool_verdicts_were_counted_gets_them_from_the_rows(
    viewer_client: Client, project: AgentProject, django_assert_num_queries: Any
) -> None:
    run = tools_run(project)
    stored = dict(run.summary)
    del stored["tools"]
    Run.objects.filter(pk=run.pk).update(summary=stored)
    run.refresh_from_db()
    with django_assert_num_queries(1):
        tools = run_summary(run=run).tools
    assert tools == OutcomeCounts(total=12, passed=9, failed=3)
    said = tile(viewer_client.get(reverse("run_detail", args=[run.pk])).text)
    assert '<span data-summary="tools.failed">3</span>' in said


def test_a_live_runs_tool_tile_is_counted_from_its_rows(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=2))
    tools = run_summary(run=run).tools
    assert tools == OutcomeCounts(total=4, passed=3, failed=1)  # case 1's second turn failed
    said = tile(viewer_client.get(reverse("run_detail", args=[run.pk])).text)
    assert '<span data-summary="tools.total">4</span>' in said


def test_a_case_that_failed_only_a_tools_arguments_is_marked_red_in_its_row_turn_and_page(
    viewer_client: Client, project: AgentProject
) -> None:
    run = tools_run(project)
    case = run.cases.get(index=2)
    page = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    rows = re.findall(
        r'<details class="case (case-\w+)" id="case-(\d+)"(.*?)</summary>', page, re.S
    )
    marked = {int(pk): look for look, pk, row in rows if "tools-failed" in row}
    by_index = dict(run.cases.values_list("pk", "index"))
    # Red, and marked "tools": the three that failed one, case 2 on its arguments alone.
    assert {by_index[pk]: look for pk, look in marked.items()} == {
        1: "case-failed",
        2: "case-failed",
        4: "case-failed",
    }

    turns = viewer_client.get(
        reverse("case_turns", args=[run.pk, case.pk]), headers={"HX-Request": "true"}
    ).text
    heads = re.findall(r'<header class="turn-head">.*?</header>', turns, re.S)
    assert ["tools-failed" in head for head in heads] == [True, False]  # turn 0 only

    detail = viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).text
    meta = re.search(r'<p class="meta">.*?</p>', detail, re.S)
    assert meta is not None and "tools-failed" in meta.group(0)
    said = tile(detail)
    assert '<span data-summary="tools.total">2</span>' in said
    assert '<span class="err"><span data-summary="tools.failed">1</span> failed</span>' in said
