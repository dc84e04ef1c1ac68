"""A finished run's case-list counts are stored when it ends (``Run.list_counts``): the run page
reads them instead of counting its rows, and they equal a recount of the rows whichever way the
run ended — on its own, recovered after its worker went silent, as a re-grade, as a re-run."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import CaseRow, Run
from runs.recorder import run_finish
from runs.selectors.case_counts import list_count_stored, list_counts_count, listed
from runs.selectors.cases import CASE_OUTCOMES, CaseFilters, case_rows
from runs.selectors.costs import cost_sums_count
from runs.services import launch
from runs.services.execution import run_execute_inline
from runs.services.regrade import run_regrade_create
from tests.web.factories import (
    RunSpec,
    build_run,
    make_not_graded,
    make_project,
    make_user,
    repeated_run,
)
from tests.web.services_helpers import (
    example_project,
    example_run_and_rerun,
    run_recovered_after_a_silent_worker,
)

pytestmark = pytest.mark.django_db(transaction=True)  # the launches run on commit

# Every filter whose count is stored: each alone, as the toolbar's links set them.
SINGLE_FILTERS = [
    CaseFilters(),
    CaseFilters(failures=True),
    *(CaseFilters(outcome=outcome) for outcome in CASE_OUTCOMES),
    CaseFilters(tools="failed"),
    CaseFilters(metric="rouge"),
    CaseFilters(metric="refund_grader"),
    CaseFilters(metric="no such metric"),
    CaseFilters(flaky=True),
]


def recounted(run: Run) -> dict[CaseFilters, int]:
    return {
        filters: listed(run, case_rows(run=run, filters=filters)).count()
        for filters in SINGLE_FILTERS
    }


def stored(run: Run) -> dict[CaseFilters, int | None]:
    run = Run.objects.get(pk=run.pk)
    return {filters: list_count_stored(run=run, filters=filters) for filters in SINGLE_FILTERS}


def assert_stored_equal_a_recount(run: Run) -> None:
    run.refresh_from_db()
    assert not run.is_live and run.list_counts is not None
    assert stored(run) == recounted(run)
    assert {key: run.list_counts[key] for key in list_counts_count(run=run)} == list_counts_count(
        run=run
    )
    assert run.list_counts["cost"] == cost_sums_count(run_ids=[run.pk])[run.pk]


def test_a_finished_runs_stored_list_counts_equal_a_recount_of_its_rows() -> None:
    project = make_project("lists", "/tmp/lists")
    run = build_run(project, RunSpec(cases=60, turns=3, failing=range(1, 60, 7)))
    for index in (3, 10):
        make_not_graded(run, index)
    run_finish(run.pk)
    assert_stored_equal_a_recount(run)
    counts = stored(run)
    assert counts[CaseFilters()] == 60 and counts[CaseFilters(failures=True)] == 9
    assert counts[CaseFilters(metric="no such metric")] == 0


def test_a_repeated_runs_stored_counts_count_its_cases_not_its_repetitions() -> None:
    project = make_project("lists-repeated", "/tmp/lists-repeated")
    run = repeated_run(project, [0.5] * 12, repeats=4, seed=3)
    run_finish(run.pk)
    assert_stored_equal_a_recount(run)
    assert stored(run)[CaseFilters()] == 12
    run.refresh_from_db()
    assert run.list_counts["repeats"]["cases"] == 12


def test_a_live_run_a_search_or_two_filters_are_counted_not_read() -> None:
    project = make_project("lists-live", "/tmp/lists-live")
    run = build_run(project, RunSpec(cases=20, turns=2, failing=range(0, 20, 3)))
    run_finish(run.pk)
    run.refresh_from_db()
    assert list_count_stored(run=run, filters=CaseFilters(failures=True)) == 7
    assert list_count_stored(run=run, filters=CaseFilters(failures=True, query="1")) is None
    assert list_count_stored(run=run, filters=CaseFilters(failures=True, metric="rouge")) is None
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    run.refresh_from_db()
    assert list_count_stored(run=run, filters=CaseFilters(failures=True)) is None


def case_count_queries(client: Client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return [
        q["sql"]
        for q in captured.captured_queries
        if q["sql"].startswith("SELECT COUNT(*)")
        and ('"runs_caseresult"' in q["sql"] or '"runs_metricresult"' in q["sql"])
    ]


def test_the_run_page_reads_each_filters_stored_count_and_counts_without_one(
    client: Client,
) -> None:
    project = make_project("lists-page", "/tmp/lists-page")
    run = build_run(project, RunSpec(cases=30, turns=2, failing=range(1, 30, 4)))
    run_finish(run.pk)
    client.force_login(make_user("viewer"))
    page = reverse("run_detail", args=[run.pk])
    queries = ("", "failures=1", "outcome=not_graded", "outcome=error", "tools=failed",
               "metric=rouge")  # fmt: skip
    for query in queries:
        assert case_count_queries(client, f"{page}?{query}") == [], query
    # A search is counted; so is every list of a run that ended before counts were stored.
    assert case_count_queries(client, f"{page}?failures=1&q=case")
    Run.objects.filter(pk=run.pk).update(list_counts=None)
    for query in queries:
        assert case_count_queries(client, f"{page}?{query}"), query


def test_the_stored_counts_equal_a_recount_after_a_run_and_its_regrade(
    tmp_path: Path, eager_celery: None
) -> None:
    project = example_project(tmp_path)
    run = launch.run_create(project=project, user=None)  # eager: it ran to its end
    assert_stored_equal_a_recount(run)
    regrade = run_execute_inline(
        run_id=run_regrade_create(original=run, agent_path=project.agent_path, enqueue=False).pk
    )
    assert regrade.source == Run.Source.REGRADE
    assert_stored_equal_a_recount(regrade)


def test_the_stored_counts_equal_a_recount_after_a_rerun(
    tmp_path: Path, eager_celery: None
) -> None:
    _, rerun = example_run_and_rerun(tmp_path)
    assert_stored_equal_a_recount(rerun)


def test_the_stored_counts_equal_a_recount_after_crash_recovery(
    tmp_path: Path, settings: Any, eager_celery: None
) -> None:
    project = example_project(tmp_path)
    run = launch.run_create(project=project, user=None)
    run = run_recovered_after_a_silent_worker(run, settings.HOLODECK_CASE_STALE_SECONDS)
    assert_stored_equal_a_recount(run)


def plan(rows: Any) -> str:
    """The database's plan of ``rows`` (a query set). On PostgreSQL, with what a table this
    small is read by otherwise priced out (a whole scan, a bitmap, a sort of its few rows): the
    test is whether an index holds the filter's rows in the list's order (at 100,000 cases the
    planner takes it by itself: benchmarks/pages_bench.py)."""
    if connection.vendor != "postgresql":
        return str(rows.explain())
    with transaction.atomic(), connection.cursor() as cursor:  # SET LOCAL lasts till its end
        cursor.execute("ANALYZE runs_caseresult, runs_metricresult")
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            cursor.execute(f"SET LOCAL {setting} = off")
        return str(rows.explain())


@pytest.mark.parametrize(
    ("filters", "indexes"),
    [
        (CaseFilters(failures=True), {"case_run_failures"}),
        (CaseFilters(outcome="not_graded"), {"case_run_outcome_order"}),
        (CaseFilters(outcome="error"), {"case_run_outcome_order", "case_run_failures"}),
        (CaseFilters(tools="failed"), {"case_run_tools_failed"}),
    ],
)
def test_each_filter_of_the_case_list_reads_its_page_through_an_index_in_its_order(
    filters: CaseFilters, indexes: set[str]
) -> None:
    run = build_run(make_project("plans", "/tmp/plans"), RunSpec(cases=40, turns=2))
    found = plan(case_rows(run=run, filters=filters)[:100])
    if connection.vendor == "postgresql":
        assert any(index in found for index in indexes), found
    else:  # SQLite matches a partial index to constants only, not to a query's parameters:
        # it walks the run's cases in the list's order (an index), sorting nothing.
        assert "USING INDEX" in found and "TEMP B-TREE" not in found, found


def test_a_metrics_failures_are_paged_through_their_index() -> None:
    from runs.selectors.cases import MetricFailureList

    run = build_run(make_project("plans-metric", "/tmp/plans-metric"), RunSpec(cases=40, turns=2))
    keys = MetricFailureList(run=run, metric="rouge").keys[:100]
    assert "metric_failures_by_case" in plan(keys)


LOAD_MORE = re.compile(r'class="btn btn-small load-more" hx-get="([^"]+)"')


def row_ids(html: str) -> list[str]:
    return re.findall(r'<details class="case[^"]*" id="case-(\d+)"', html)


@pytest.mark.parametrize("query", ["", "failures=1", "metric=rouge", "tools=failed"])
def test_load_more_reads_the_rows_after_the_last_one_shown_as_the_next_page_has_them(
    client: Client, query: str
) -> None:
    project = make_project("keyset", "/tmp/keyset")
    run = build_run(project, RunSpec(cases=260, turns=1, failing=range(0, 260, 2)))
    run_finish(run.pk)
    client.force_login(make_user("viewer"))
    first = client.get(f"/runs/{run.pk}/?{query}").content.decode()
    more = LOAD_MORE.search(first)
    assert more is not None and "after=" in more.group(1)
    keyset = client.get(html.unescape(more.group(1)), headers={"HX-Request": "true"})
    offset = client.get(f"/runs/{run.pk}/?{query}&page=2", headers={"HX-Request": "true"})
    assert row_ids(keyset.text) == row_ids(offset.text) != []
    assert len(row_ids(keyset.text)) == (100 if query == "" else 30)


def test_a_review_filters_count_read_from_its_reviews_equals_the_cases_it_lists() -> None:
    from runs.models import TurnRow
    from runs.selectors.review_panels import (
        REVIEW_FILTERS,
        cases_by_review,
        review_list_count,
    )
    from runs.services.reviews import ReviewInput, review_save

    project = make_project("review-counts", "/tmp/review-counts")
    run = build_run(project, RunSpec(cases=30, turns=2, failing=range(0, 30, 3)))
    staff = make_user("reviewer", staff=True)
    failing = TurnRow.objects.filter(run=run, outcome="failed").select_related("case")
    for n, turn in enumerate(failing.order_by("case__index", "index")[:7]):
        verdict = "should_pass" if n % 2 else "agrees"
        review_save(user=staff, case=turn.case, turn=turn, data=ReviewInput(verdict=verdict))
    counts = {which: review_list_count(run=run, which=which) for which in REVIEW_FILTERS}
    listed_cases = {
        which: cases_by_review(case_rows(run=run), run=run, which=which).count()
        for which in REVIEW_FILTERS
    }
    assert counts == listed_cases and all(counts.values()), counts
    assert review_list_count(run=run, which="") is None


def test_a_finished_runs_cost_is_priced_from_its_stored_token_sums(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runs.selectors import costs

    project = make_project("cost-sums", "/tmp/cost-sums")
    run = build_run(project, RunSpec(cases=12, turns=2, failing=range(0, 12, 3)))
    CaseRow.objects.filter(run=run).update(
        token_usage={"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280}
    )
    run_finish(run.pk)
    run.refresh_from_db()
    assert run.list_counts["cost"]["agent"][0]["prompt"] == 12 * 1200
    stored = costs.runs_costs(run_ids=[run.pk])[run.pk]
    Run.objects.filter(pk=run.pk).update(list_counts=None)
    assert costs.runs_costs(run_ids=[run.pk])[run.pk] == stored  # as counted from the rows
    run_finish(run.pk)
    monkeypatch.setattr(costs, "_finished_costs", {})  # a process that has not priced it yet
    client.force_login(make_user("viewer"))
    with CaptureQueriesContext(connection) as captured:
        assert client.get(reverse("run_detail", args=[run.pk])).status_code == 200
    assert not [q for q in captured.captured_queries if "token_usage" in q["sql"]]
