"""The same run reads the same everywhere: the stored summary of a run with passed, failed, not
graded and errored turns, and of an imported file whose summary contradicts its results.

Each surface (run page, compare, trends, API, exports, gate) has its own test module that reads
its numbers into ``tests.web.one_record.Numbers``; this one checks the stored truth they share.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.compare.gate import gate_baseline, gate_evaluate
from runs.core.verdicts.numbers import format_rate
from runs.core.verdicts.summary import RunSummary
from runs.core.writers.gate_markdown import GateOptions
from runs.models import CaseRow, Run, TurnRow
from runs.services.tokens import token_create
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


def stored_numbers(run: Run) -> Numbers:
    summary = RunSummary.stored(run.summary)
    assert summary is not None, "a finished run stores its summary"
    return Numbers(
        cases=summary.cases.model_dump(include={"passed", "failed", "error", "not_graded"}),
        turns=summary.turns.model_dump(include={"passed", "failed", "error", "not_graded"}),
        metrics={m.name: (m.evaluated, m.passed, m.failed, m.not_graded) for m in summary.metrics},
        pass_rate=format_rate(summary.pass_rate),
    ).nonzero()


def test_the_mixed_run_stores_one_summary_of_its_cases_turns_and_metrics(mixed_run: Run) -> None:
    assert stored_numbers(mixed_run) == MIXED
    assert mixed_run.status == Run.Status.FAILED
    assert (mixed_run.passed_cases, mixed_run.failed_cases, mixed_run.not_graded_cases) == (1, 2, 1)
    assert mixed_run.pass_rate == pytest.approx(33.33)


def test_the_mixed_run_rows_store_each_verdict(mixed_run: Run) -> None:
    cases = dict(CaseRow.objects.filter(run=mixed_run).values_list("name", "outcome"))
    assert cases == {
        "all_good": "passed",
        "wrong_answer": "failed",
        "grader_down": "not_graded",
        "agent_breaks": "failed",
    }
    turns = sorted(TurnRow.objects.filter(run=mixed_run).values_list("outcome", flat=True))
    assert turns == sorted(["passed", "failed", "passed", "not_graded", "passed", "error"])


def test_an_import_whose_summary_contradicts_its_results_takes_the_results(
    contradictory_import: Run,
) -> None:
    assert stored_numbers(contradictory_import) == IMPORTED
    assert contradictory_import.status == Run.Status.PASSED
    assert contradictory_import.pass_rate == 100


def test_a_run_with_nothing_graded_has_no_pass_rate() -> None:
    from runs.core.verdicts.summary import summarize

    summary = summarize(case_outcomes=["not_graded", "cancelled"], turn_outcomes=[], metrics=[])
    assert summary.pass_rate is None
    assert format_rate(summary.pass_rate) == "–"


def test_html_numbers_reads_marked_numbers_per_run() -> None:
    html = (
        '<table><tr data-run="7"><td data-summary="cases.passed">1</td>'
        '<td><span data-summary="pass_rate">50%</span></td></tr>'
        '<tr data-run="8"><td data-summary="cases.passed">3</td></tr></table>'
        '<ul data-run="7"><li data-metric="m"><b data-summary="metric.evaluated">4</b>'
        '<b data-summary="metric.passed">3<br></b></li></ul>'
    )
    assert html_numbers(html, 7) == Numbers(
        cases={"passed": 1}, metrics={"m": (4, 3, 0, 0)}, pass_rate="50%"
    )
    assert html_numbers(html, 8).cases == {"passed": 3}


# --- every surface at once ------------------------------------------------------------------------


def every_surface(
    client: Client, token: dict[str, str], run: Run, other: Run
) -> dict[str, Numbers]:
    """What each surface says about ``run`` (``other`` is the run it is compared and gated
    against)."""
    from tests.compare.test_one_record_compare import api_numbers, compare_page, gate_numbers
    from tests.web.test_one_record_exports import surfaces

    compare_api = client.get(
        "/api/v1/compare", {"runs": [other.pk, run.pk], "baseline": other.pk}, headers=token
    ).json()
    headline = next(h for h in compare_api["headline"] if h["run_id"] == run.pk)
    trends = client.get(reverse("trends"), {"agent": run.agent_name}).text
    trend_numbers = html_numbers(trends, run.pk)
    gate = gate_evaluate(run, gate_baseline(run, other.pk), GateOptions())
    return {
        "run page": html_numbers(client.get(reverse("run_detail", args=[run.pk])).text),
        "compare page": html_numbers(compare_page(client, other, run), run.pk),
        "compare api": api_numbers(headline),
        # The trends table shows cases and the pass rate (turns and metrics are charted).
        "trends": Numbers(cases=trend_numbers.cases, pass_rate=trend_numbers.pass_rate),
        **surfaces(client, token, run),
        "gate markdown": gate_numbers(gate.markdown),
    }


def test_every_surface_reports_the_same_case_turn_and_metric_counts_and_pass_rates(
    client: Client, viewer: User, mixed_run: Run, contradictory_import: Run
) -> None:
    client.force_login(viewer)
    _, secret = token_create(user=viewer, name="surfaces")
    token = {"Authorization": f"Bearer {secret}"}
    for run, other, expected in (
        (mixed_run, contradictory_import, MIXED),
        (contradictory_import, mixed_run, IMPORTED),
    ):
        shown = every_surface(client, token, run, other)
        trends_expected = Numbers(cases=expected.cases, pass_rate=expected.pass_rate)
        assert shown.pop("trends") == trends_expected, run
        assert shown == dict.fromkeys(shown, expected), run
