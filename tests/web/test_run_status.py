"""Every status explained: the run page says why a run has its status, each reason linked to
the cases it counts, and filters those cases (not graded, errored, a metric failed) on the
page and in the API; the lists say the same beside their status chips."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.models import AgentProject, Run
from runs.services.tokens import token_create
from tests.web.factories import RunSpec, build_run, settled_run

pytestmark = pytest.mark.django_db

NO_KEY = "AuthenticationError: the judge has no api_key (set OPENAI_API_KEY)"


def indices(client: Client, run: Run, query: str) -> list[int]:
    page = client.get(reverse("run_detail", args=[run.pk]) + query)
    assert page.status_code == 200
    return [case.index for case in page.context["case_page"]]


def header(html: str) -> str:
    match = re.search(r'<header id="run-header".*?</header>', html, re.S)
    assert match is not None
    return match.group(0)


def test_a_run_failed_only_by_cases_that_could_not_be_graded_says_so_in_its_header(
    viewer_client: Client, project: AgentProject
) -> None:
    run = settled_run(project, cases=6, not_graded=(1, 4), judge_error=NO_KEY)
    assert run.status == Run.Status.FAILED and run.pass_rate == 100.0
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    said = header(html)
    link = f'href="{reverse("run_detail", args=[run.pk])}?outcome=not_graded"'
    assert f'<a class="reason-link" {link} data-filter="outcome=not_graded">' in said
    assert ">2 cases could not be graded</a>" in said
    assert f"({NO_KEY})" in said
    assert "none failed" in said
    # Drawn as not graded (amber), not as failing tests (red).
    assert 'class="chip chip-not_graded" data-status="failed"' in said
    assert 'class="progress progress-not_graded"' in html
    assert "progress-failed" not in html


def test_a_run_with_failed_and_errored_cases_names_each_with_its_cause_and_filter(
    viewer_client: Client, project: AgentProject
) -> None:
    run = settled_run(project, cases=5, failing=(2,), errored=(3,))
    said = header(viewer_client.get(reverse("run_detail", args=[run.pk])).text)
    assert 'data-filter="outcome=failed">1 case failed</a>' in said
    assert 'data-filter="outcome=error">1 case errored</a>' in said
    assert "(WorkerLostError: the worker died)" in said
    assert "chip chip-failed" in said


def test_the_not_graded_and_errored_filters_list_only_those_cases(
    viewer_client: Client, project: AgentProject
) -> None:
    run = settled_run(project, cases=6, failing=(0,), not_graded=(1, 4), errored=(5,))
    assert indices(viewer_client, run, "?outcome=not_graded") == [1, 4]
    assert indices(viewer_client, run, "?outcome=error") == [5]
    assert indices(viewer_client, run, "?failures=1") == [0, 5]  # failed or errored, as before
    assert indices(viewer_client, run, "?outcome=not_graded&q=case+4") == [4]
    html = viewer_client.get(reverse("run_detail", args=[run.pk]) + "?outcome=not_graded").text
    assert re.search(r'class="filter filter-not-graded on" aria-current="true"', html)
    assert '<input type="hidden" name="outcome" value="not_graded">' in html  # the search keeps it


def test_a_metric_filter_lists_the_cases_with_a_turn_that_failed_that_metric(
    viewer_client: Client, project: AgentProject
) -> None:
    run = settled_run(project, cases=5, failing=(1, 3), not_graded=(2,))
    assert indices(viewer_client, run, "?metric=rouge") == [1, 3]
    # politeness could not grade on cases 1, 2 and 3: it failed none of them.
    assert indices(viewer_client, run, "?metric=politeness") == []
    html = viewer_client.get(reverse("run_detail", args=[run.pk]) + "?metric=politeness").text
    assert "No case failed metric “politeness”." in html
    assert 'class="filter filter-metric on"' in html
    # The metric summary links each metric's failures to the filter.
    page = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert f'href="{reverse("run_detail", args=[run.pk])}?metric=rouge"' in page


def test_each_filter_says_what_it_found_none_of(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=3, turns=1, failing=(), status=Run.Status.PASSED))
    url = reverse("run_detail", args=[run.pk])
    assert "No case could not be graded." in viewer_client.get(url + "?outcome=not_graded").text
    assert "No case errored." in viewer_client.get(url + "?outcome=error").text
    assert "No failed cases." in viewer_client.get(url + "?failures=1").text
    html = viewer_client.get(url).text
    assert ">errored only</a>" in html and ">not graded only</a>" in html
    assert "passed</strong>: all 3 cases passed" in html


def test_a_bad_outcome_filter_is_said_at_the_toolbar_with_a_400(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=3, turns=1))
    response = viewer_client.get(reverse("run_detail", args=[run.pk]) + "?outcome=nope")
    assert response.status_code == 400
    assert 'id="outcome-error"' in response.text


def test_the_api_filters_cases_by_outcome_and_by_a_failed_metric_and_says_the_reason(
    client: Client, project: AgentProject, viewer: User
) -> None:
    run = settled_run(project, cases=5, failing=(1,), not_graded=(2, 3), judge_error=NO_KEY)
    _, secret = token_create(user=viewer, name="status")
    auth = {"Authorization": f"Bearer {secret}"}

    def listed(**params: Any) -> list[int]:
        response = client.get(f"/api/v1/runs/{run.pk}/cases", params, headers=auth)
        assert response.status_code == 200, response.content
        return [case["index"] for case in response.json()["items"]]

    assert listed(outcome="not_graded") == [2, 3]
    assert listed(outcome="error") == []
    assert listed(metric="rouge") == [1]
    assert listed(failed="true") == [1]
    bad = client.get(f"/api/v1/runs/{run.pk}/cases", {"outcome": "nope"}, headers=auth)
    assert bad.status_code == 422
    detail = client.get(f"/api/v1/runs/{run.pk}", headers=auth).json()
    assert detail["status_reason"] == (
        f"failed: 1 case failed; 2 cases could not be graded ({NO_KEY})"
    )


def test_the_home_page_shows_errored_and_not_graded_cases_beside_passed_ones(
    viewer_client: Client, project: AgentProject
) -> None:
    settled_run(project, cases=4, not_graded=(0,), errored=(1,), failing=(2, 3))
    html = viewer_client.get(reverse("home")).text
    assert "0/4 passed" in html
    assert "· 1 errored</span>" in html and "· 1 not graded</span>" in html
    assert 'title="failed: 2 cases failed; 1 case errored; 1 case could not be graded"' in html


def test_the_run_list_and_the_project_page_say_why_a_run_failed(
    viewer_client: Client, project: AgentProject
) -> None:
    settled_run(project, cases=3, not_graded=(0,), errored=(1,))
    reason = "failed: 1 case errored; 1 case could not be graded"
    listed = viewer_client.get(reverse("run_list")).text
    assert f'title="{reason}"' in listed
    assert "· 1 errored</span>" in listed
    page = viewer_client.get(reverse("project_detail", args=[project.pk])).text
    assert f'title="{reason}"' in page
    assert '<span class="status-reason small">1 case errored; 1 case could not be graded' in page
