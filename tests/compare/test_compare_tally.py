"""A compare of finished runs tallied by the database (``runs.compare.reads.tally``) shows
exactly what the compare aligned in Python from every row shows: the same rows in the same
order, cell by cell and turn by turn, the same headline counts and the same regressions and
fixes per kind, whatever the kinds, the order, the baseline and the runs' cases (named alike or
not, a name repeated, unnamed, missing from a run, errored, not graded, cancelled)."""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any
from unittest.mock import patch

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.compare.reads.compared_rows import compare_rows, rows_of
from runs.compare.reads.comparison import comparison_for
from runs.compare.reads.tally import PagedRows
from runs.core.comparison.matrix import BASELINE_ORDER, COMMIT_ORDER
from runs.core.comparison.query import ComparisonQuery
from runs.models import AgentProject, CaseRow, Run, TurnRow
from runs.recorder import run_finish
from tests.compare.compare_data import three_runs
from tests.web.factories import (
    RunSpec,
    build_run,
    make_cancelled,
    make_given_up,
    make_not_graded,
    make_project,
)

pytestmark = pytest.mark.django_db

ROW_FIELDS = (
    "key", "name", "index", "cells", "case_ids", "turns", "regressions", "fixes", "unstable",
    "changes", "changed_in", "noise", "marks",
)  # fmt: skip
HEADLINE_FIELDS = (
    "regressions", "fixes", "changed", "kind_pass_rate", "tool_pass_rate", "tokens", "agent_ms",
    "judge_ms", "metrics", "merged_cases", "cost", "cost_error",
)  # fmt: skip


def stored(*runs: Run) -> None:
    """The runs ended by the recorder: their summaries, counts and compare values stored."""
    for run in runs:
        run_finish(run.pk)
        run.refresh_from_db()


def assert_tallied_as_aligned(run_ids: list[int], **options: Any) -> PagedRows:
    query = ComparisonQuery(run_ids=run_ids, **options)
    tallied = compare_rows(query)
    assert isinstance(tallied.rows, PagedRows)
    with patch("runs.compare.reads.comparison._stored", return_value=None):  # from the turn rows
        baseline, aligned = comparison_for(
            run_ids, chosen=query.chosen, kinds=query.kinds, order=query.order
        )
    rows = rows_of(aligned, query)
    assert len(tallied.rows) == len(rows)
    assert [_row(row) for row in tallied.rows] == [_row(row) for row in rows]
    for start, stop in ((0, 3), (2, 7), (len(rows) - 2, len(rows) + 5)):
        assert [_row(r) for r in tallied.rows[start:stop]] == [_row(r) for r in rows[start:stop]]
    comparison = tallied.comparison
    assert tallied.baseline.run.pk == baseline.run.pk
    assert [run.pk for run in comparison.runs] == [run.pk for run in aligned.runs]
    assert comparison.matrix.against == aligned.matrix.against
    assert comparison.matrix.backwards == aligned.matrix.backwards
    assert comparison.matrix.by_kind == aligned.matrix.by_kind
    for mine, theirs in zip(comparison.headlines, aligned.headlines, strict=True):
        for name in HEADLINE_FIELDS:
            assert getattr(mine, name) == getattr(theirs, name), name
        assert mine.summary == theirs.summary
        assert mine.cost_usd == pytest.approx(theirs.cost_usd)
    return tallied.rows


# The page's per-request values (its CSRF token, its script nonce), left out of the comparison.
SECRETS = re.compile(rb"[A-Za-z0-9_-]{32,}")


def _row(row: Any) -> dict[str, Any]:
    found = asdict(row)
    return {name: found[name] for name in ROW_FIELDS}


def varied_runs(project: AgentProject) -> list[Run]:
    """Four runs whose cases differ every way a compare meets."""
    data = three_runs(project, cases=8, turns=3)
    first, second, third = data.oldest, data.middle, data.newest
    make_not_graded(second, 4)
    make_given_up(third, 5, "WorkerLostError: the worker died")
    CaseRow.objects.filter(run=first, index__in=(6, 7)).update(name="same name")
    CaseRow.objects.filter(run=second, index=7).update(name="same name (2)")
    CaseRow.objects.filter(run=second, index=6).update(name="same name")
    CaseRow.objects.filter(run=third, index=0).update(name="")
    CaseRow.objects.filter(run=second, index=3).delete()
    TurnRow.objects.filter(run=third, case__index=2, index=2).delete()
    TurnRow.objects.filter(run=first, case__index=1, index=0).update(
        kind_outcomes={"code": "passed", "tools": "failed"}, outcome="failed"
    )
    fourth = make_cancelled(RunSpec(cases=10, turns=2, failing=(2,), done=6), project)
    runs = [first, second, third, fourth]
    for run in runs:
        run.refresh_from_db()
    stored(*runs)
    return runs


@pytest.mark.parametrize("kinds", [[], ["code"], ["tools"], ["code", "tools"], ["geval"]])
@pytest.mark.parametrize("order", [BASELINE_ORDER, COMMIT_ORDER])
def test_a_tallied_compare_shows_what_the_aligned_one_shows(
    project: AgentProject, kinds: list[str], order: str
) -> None:
    runs = varied_runs(project)
    ids = [run.pk for run in runs]
    assert_tallied_as_aligned(ids[:2], kinds=kinds, order=order)
    assert_tallied_as_aligned(ids, kinds=kinds, order=order)
    assert_tallied_as_aligned(ids[::-1], kinds=kinds, order=order, chosen=ids[1])


def test_a_tallied_compare_of_runs_of_different_sizes_pages_every_runs_added_rows(
    project: AgentProject,
) -> None:
    small = build_run(project, RunSpec(cases=5, turns=2, failing=(1,)))
    large = build_run(project, RunSpec(cases=30, turns=2, failing=(3, 9)))
    other = make_project("other agent", "/tmp/other")
    unnamed = build_run(other, RunSpec(cases=12, turns=1, failing=(0,)))
    CaseRow.objects.filter(run=unnamed).update(name="")
    for run in (small, large, unnamed):
        run.refresh_from_db()
    stored(small, large, unnamed)
    rows = assert_tallied_as_aligned([small.pk, large.pk, unnamed.pk])
    # The large run shares 3 names with the small one ("failing refund case 3" is not
    # "refund case 3"); the unnamed run's "#0"... are its own.
    assert len(rows) == 5 + 27 + 12


def test_a_run_without_stored_compare_values_is_aligned_from_its_rows(
    project: AgentProject,
) -> None:
    runs = varied_runs(project)
    Run.objects.filter(pk=runs[1].pk).update(list_counts=None)
    found = compare_rows(ComparisonQuery(run_ids=[runs[0].pk, runs[1].pk]))
    assert isinstance(found.rows, list)
    live = runs[2]
    Run.objects.filter(pk=live.pk).update(status=Run.Status.RUNNING, finished_at=None)
    found = compare_rows(ComparisonQuery(run_ids=[runs[0].pk, live.pk]))
    assert isinstance(found.rows, list)


@pytest.mark.parametrize("show", ["regressions", "changed"])
def test_a_compare_that_keeps_some_rows_reads_every_row_as_before(
    project: AgentProject, show: str
) -> None:
    runs = varied_runs(project)
    found = compare_rows(ComparisonQuery(run_ids=[run.pk for run in runs], show=show))
    assert isinstance(found.rows, list)


def test_a_tallied_page_reads_the_turns_of_its_rows_alone(project: AgentProject) -> None:
    """The page's turn verdicts come from the case rows' stored text: no turn row is read, and
    a second view reads neither the tallies nor the row counts again."""
    runs = varied_runs(project)
    query = ComparisonQuery(run_ids=[run.pk for run in runs])
    compare_rows(query).rows[0:100]
    with CaptureQueriesContext(connection) as first:
        rows = compare_rows(query).rows
        assert len(rows[0:100]) == len(rows)
    sql = [query["sql"] for query in first.captured_queries]
    assert not any("runs_turnresult" in text for text in sql), sql
    assert not any("runs_metricresult" in text for text in sql), sql
    assert not any("verdicts_digest, b.verdicts_digest" in text for text in sql)
    assert len(sql) <= 8, sql


def test_a_run_ended_again_with_other_verdicts_is_tallied_again(project: AgentProject) -> None:
    runs = varied_runs(project)
    ids = [runs[0].pk, runs[2].pk]
    assert_tallied_as_aligned(ids)
    TurnRow.objects.filter(run=runs[2], case__index=0).update(
        outcome="failed", kind_outcomes={"code": "failed"}
    )
    stored(runs[2])
    assert_tallied_as_aligned(ids)


def test_the_aligned_compare_of_runs_ended_with_stored_values_reads_no_turn_row(
    project: AgentProject,
) -> None:
    """A compare that reads every row (a filter, a metric, a search) takes the turns' verdicts
    and the agent and judge times stored with the runs: no turn or metric row is read."""
    runs = varied_runs(project)
    query = ComparisonQuery(run_ids=[run.pk for run in runs], show="changed")
    compare_rows(query)
    with CaptureQueriesContext(connection) as read:
        found = compare_rows(query)
    assert isinstance(found.rows, list)
    sql = [query["sql"] for query in read.captured_queries]
    assert not any("runs_turnresult" in text or "runs_metricresult" in text for text in sql), sql


@pytest.mark.parametrize("params", [{}, {"kinds": "code"}, {"order": "commits"}])
def test_the_api_and_the_page_of_a_tallied_compare_answer_as_the_aligned_ones(
    project: AgentProject, params: dict[str, str]
) -> None:
    from django.test import Client
    from django.urls import reverse

    from runs.services.tokens import token_create
    from tests.web.factories import make_user

    runs = varied_runs(project)
    viewer = make_user()
    _, secret = token_create(user=viewer, name="ci")
    api = Client(headers={"Authorization": f"Bearer {secret}"})
    page = Client()
    page.force_login(viewer)
    query = {"runs": ",".join(str(run.pk) for run in runs), **params}
    api_query = {**query, "kinds": params["kinds"].split(",")} if "kinds" in params else query

    def answers(paged: bool) -> tuple[Any, bytes]:
        found = api.get("/api/v1/compare", api_query)
        shown = page.get(reverse("compare"), query)
        assert found.status_code == 200 and shown.status_code == 200
        rows = shown.context["page"].paginator.object_list
        assert isinstance(rows, PagedRows) == paged
        return found.json(), SECRETS.sub(b"", shown.content)

    tallied = answers(paged=True)
    with patch("runs.compare.reads.tally.tallied", return_value=False):
        aligned = answers(paged=False)
    assert tallied[0] == aligned[0]
    left, right = tallied[1].decode(), aligned[1].decode()
    at = next((i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b), None)
    assert at is None, (left[at - 200 : at + 100], right[at - 200 : at + 100])
