"""The run pages and the trends data read the one record: the run page shows the run's stored
summary (its cases, turns, per-turn metric counts and pass rate), the case page the case's own,
and the trends data the same pass rates, for a run of passed, failed, not graded and errored
turns and for an import whose file contradicts its results."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from runs.core.verdicts.numbers import format_rate
from runs.core.verdicts.summary import RunSummary
from runs.models import CaseRow, Run
from runs.selectors.trends import finished_runs, metric_averages
from tests.web.one_record import (
    IMPORTED,
    MIXED,
    Numbers,
    contradictory_import,
    html_numbers,
    mixed_run,
)

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["contradictory_import", "mixed_run"]  # fixtures


def run_page(client: Client, run: Run) -> str:
    response = client.get(reverse("run_detail", args=[run.pk]))
    assert response.status_code == 200
    return response.text


def stored(run: Run) -> RunSummary:
    summary = RunSummary.stored(run.summary)
    assert summary is not None
    return summary


def test_the_run_page_of_the_mixed_run_shows_its_summary(
    viewer_client: Client, mixed_run: Run
) -> None:
    html = run_page(viewer_client, mixed_run)

    assert html_numbers(html) == MIXED
    assert "counted per turn" in html and "passed/<wbr>evaluated turns" in html
    assert "could not grade" in html and "turns graded" in html
    # Metrics grouped by kind, in the kinds' order, under their labels.
    assert html.index("standard (deterministic, NLP)") < html.index("code graders")


def test_the_run_page_of_a_contradictory_import_shows_the_results_and_a_warning(
    viewer_client: Client, contradictory_import: Run
) -> None:
    html = run_page(viewer_client, contradictory_import)

    assert html_numbers(html) == IMPORTED
    assert "The file&#x27;s summary says 11 passed and 1 failed" in html


def test_trends_data_has_the_pass_rates_and_counts_of_the_stored_summaries(
    mixed_run: Run, contradictory_import: Run
) -> None:
    points = {
        point.id: point
        for point in [
            *finished_runs(project=mixed_run.project, agent=""),
            *finished_runs(project=None, agent=contradictory_import.agent_name),
        ]
    }
    for run, expected in ((mixed_run, MIXED), (contradictory_import, IMPORTED)):
        summary = stored(run)
        point = points[run.pk]
        assert point.pass_rate == summary.pass_rate
        assert format_rate(point.pass_rate) == expected.pass_rate
        assert point.cases == summary.cases
    averages = metric_averages(run_ids=[mixed_run.pk], kinds=("standard", "code"))
    assert averages == {
        (metric.kind, metric.name): {mixed_run.pk: metric.average}
        for metric in stored(mixed_run).metrics
        if metric.average is not None
    }


def test_the_trends_page_marks_the_same_pass_rate_and_case_counts(
    viewer_client: Client, mixed_run: Run
) -> None:
    response = viewer_client.get(reverse("trends"), {"project": mixed_run.project_id})

    shown = html_numbers(response.text, mixed_run.pk)
    assert shown == Numbers(cases=MIXED.cases, pass_rate=MIXED.pass_rate)


def test_the_case_page_of_grader_down_shows_one_not_graded_turn(
    viewer_client: Client, mixed_run: Run
) -> None:
    case = CaseRow.objects.get(run=mixed_run, name="grader_down")
    html = viewer_client.get(reverse("case_detail", args=[mixed_run.pk, case.pk])).text

    shown = html_numbers(html)
    assert shown.turns == {"passed": 1, "not_graded": 1}
    assert shown.metrics == {"answer_numeric": (1, 1, 0, 0), "program_check": (1, 0, 0, 1)}
    assert '<span class="sr-only">not graded</span>' in html


def test_an_errored_turn_reads_errored_not_failed(viewer_client: Client, mixed_run: Run) -> None:
    case = CaseRow.objects.get(run=mixed_run, name="agent_breaks")
    html = viewer_client.get(reverse("case_detail", args=[mixed_run.pk, case.pk])).text

    assert '<section class="turn turn-error" id="turn-2">' in html
    assert '<span class="v v-err" title="errored" aria-hidden="true">!</span>' in html
    assert html_numbers(html).turns == {"passed": 1, "error": 1}


def test_a_running_run_shows_its_live_summary_from_the_rows(
    viewer_client: Client, mixed_run: Run
) -> None:
    # The same rows, read while the run is still running: the live summary says the same.
    Run.objects.filter(pk=mixed_run.pk).update(status=Run.Status.RUNNING, summary={})

    assert html_numbers(run_page(viewer_client, mixed_run)) == MIXED


def test_a_run_with_nothing_graded_shows_no_pass_rate(
    viewer_client: Client, mixed_run: Run
) -> None:
    summary = stored(mixed_run)
    nothing = summary.model_copy(
        update={"cases": summary.cases.model_copy(update={"passed": 0, "failed": 0, "error": 0})}
    )
    Run.objects.filter(pk=mixed_run.pk).update(
        summary=nothing.model_dump(mode="json"), pass_rate=None
    )

    html = run_page(viewer_client, mixed_run)

    assert html_numbers(html).pass_rate == "–"
    listed = viewer_client.get(reverse("run_list")).text
    home = viewer_client.get(reverse("home")).text
    for page in (html, listed, home):
        assert re.search(r">\s*0(\.0)? ?%\s*<", page) is None  # never "0 %" for no pass rate


def test_only_failures_lists_the_failed_and_errored_cases_not_the_ungraded_one(
    viewer_client: Client, mixed_run: Run
) -> None:
    response = viewer_client.get(reverse("run_detail", args=[mixed_run.pk]), {"failures": "1"})

    assert "wrong_answer" in response.text and "agent_breaks" in response.text
    assert "grader_down" not in response.text and "all_good" not in response.text
