"""Pages cost a fixed number of queries whatever the size of the run, and stay small."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from pytest_django import DjangoDbBlocker

from runs.models import AgentProject, Run
from runs.web.views import RUNS_PER_PAGE
from tests.web.factories import (
    RunSpec,
    build_run,
    failing_case,
    make_not_graded,
    make_project,
)
from tests.web.shared_rows import rows_shared_by_the_module

pytestmark = pytest.mark.django_db

AssertQueries = Callable[[int], AbstractContextManager[object]]

# Every full page (one extending base.html, for a logged-in user, without HOLODECK_CELERY_EAGER)
# reads one more row: whether a worker is live, for the no-worker banner
# (runs/web/context_processors.py). The run list measured 7 queries before the banner and 8
# with it, so its budget went from 8 to 9 to keep the same one query of slack; the run page
# (10 with the banner) stays within 20. test_the_no_worker_banner_costs_one_query_a_page
# checks the banner's cost itself.
DETAIL_BUDGET = 20
EXPAND_BUDGET = 10
LIST_BUDGET = 9
MAX_PAGE_BYTES = 300 * 1024


def detail_queries(client: Client, run: Run, assert_max: AssertQueries) -> tuple[int, int]:
    with assert_max(DETAIL_BUDGET) as captured:
        response = client.get(reverse("run_detail", args=[run.pk]))
    assert response.status_code == 200
    return len(captured), len(response.content)  # type: ignore[arg-type]


def test_the_progress_poll_stays_within_budget(
    viewer_client: Client,
    project: AgentProject,
    django_assert_max_num_queries: AssertQueries,
) -> None:
    run = build_run(project, RunSpec(cases=300, turns=2, status=Run.Status.RUNNING, done=150))
    with django_assert_max_num_queries(DETAIL_BUDGET):
        response = viewer_client.get(
            reverse("run_progress", args=[run.pk]),
            {"known": "300", "since": "2020-01-01T00:00:00Z"},
            headers={"HX-Request": "true"},
        )
    assert response.status_code == 200


# The session, the user, the run's counters: a poll that finds nothing new reads nothing else.
UNCHANGED_POLL_BUDGET = 3


def test_a_poll_that_finds_nothing_new_reads_only_the_runs_counters(
    viewer_client: Client,
    project: AgentProject,
    django_assert_max_num_queries: AssertQueries,
) -> None:
    run = build_run(project, RunSpec(cases=300, turns=2, status=Run.Status.RUNNING, done=150))
    page = viewer_client.get(reverse("run_detail", args=[run.pk]))
    shown = {
        "known": "300",
        "since": str(page.context["poll_since"]),
        "v": str(page.context["version"]),
    }
    with django_assert_max_num_queries(UNCHANGED_POLL_BUDGET):
        response = viewer_client.get(
            reverse("run_progress", args=[run.pk]),
            shown,
            headers={"HX-Request": "true"},
        )
    assert response.status_code == 204


def test_the_no_worker_banner_costs_one_query_a_page(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=10, turns=5))
    pages = [reverse("home"), reverse("run_list"), reverse("run_detail", args=[run.pk])]

    def queries(*, eager: bool) -> list[int]:
        counts = []
        with override_settings(CELERY_EAGER=eager):
            for url in pages:
                with CaptureQueriesContext(connection) as captured:
                    assert viewer_client.get(url).status_code == 200
                counts.append(len(captured))
        return counts

    queries(eager=True)  # a finished run's cost is priced once (runs.selectors.costs)
    without_banner = queries(eager=True)
    assert queries(eager=False) == [n + 1 for n in without_banner]


def list_queries(client: Client, assert_max: AssertQueries) -> int:
    with assert_max(LIST_BUDGET) as captured:
        response = client.get(reverse("run_list"))
    assert response.status_code == 200
    return len(captured)  # type: ignore[arg-type]


def test_the_run_list_costs_the_same_queries_for_one_or_a_full_page_of_runs(
    viewer_client: Client,
    project: AgentProject,
    django_assert_max_num_queries: AssertQueries,
) -> None:
    Run.objects.create(project=project, agent_name="a")
    one = list_queries(viewer_client, django_assert_max_num_queries)
    # More runs than a page holds, each with its project and its own agent name to list.
    Run.objects.bulk_create(
        [Run(project=project, agent_name=f"a{index}") for index in range(RUNS_PER_PAGE + 9)]
    )
    many = list_queries(viewer_client, django_assert_max_num_queries)
    assert many == one  # no query per run


COMPARE_2_BUDGET = 15
COMPARE_8_BUDGET = 25


COMPARE_2_MAX_BYTES = 400 * 1024


def compare_queries(
    client: Client, runs: list[Run], assert_max: AssertQueries, budget: int
) -> tuple[int, int]:
    with assert_max(budget) as captured:
        response = client.get(
            reverse("compare"),
            {"runs": ",".join(str(run.pk) for run in runs), "baseline": runs[0].pk},
        )
    assert response.status_code == 200
    return len(captured), len(response.content)  # type: ignore[arg-type]


# --- runs of 1,000 cases, made once for the tests below ---------------------------------------
# Building a run of 1,000 cases of 5 turns takes 2-3 s; each test used to build its own. Last in
# the module: the rows stay until its end (tests/web/shared_rows.py), and no test above sees
# them (the run list's lists one run).


@dataclass(frozen=True)
class SizedRuns:
    small: list[Run]  # two runs of 10 cases of 5 turns
    # Two runs of 1,000 cases of 5 turns (against two of 10: no query per case or turn), then
    # six of 200 for the compare of eight (the count of runs, not their size, is what eight
    # measures; building 6,000 more cases took 30 s of the suite).
    big: list[Run]


def make_sized_runs() -> SizedRuns:
    project = make_project("sized-runs", "/srv/agents/sized")
    small = [build_run(project, RunSpec(cases=10, turns=5)) for _ in range(2)]
    big = [
        build_run(project, RunSpec(cases=size, turns=5, failing=range(n, size, 7)))
        for n, size in enumerate([1000, 1000, 200, 200, 200, 200, 200, 200])
    ]
    return SizedRuns(small=small, big=big)


@pytest.fixture(scope="module")
def sized_runs(django_db_setup: None, django_db_blocker: DjangoDbBlocker) -> Iterator[SizedRuns]:
    """Each test reads them in a savepoint of its own, rolled back after it (a test's own
    changes, such as cases made not graded, stay its own)."""
    yield from rows_shared_by_the_module(django_db_blocker, make_sized_runs)


def test_the_run_page_and_expanding_a_case_stay_within_budget_for_1000_cases_of_5_turns(
    viewer_client: Client,
    sized_runs: SizedRuns,
    django_assert_max_num_queries: AssertQueries,
) -> None:
    small, big = sized_runs.small[0], sized_runs.big[1]

    small_queries, _ = detail_queries(viewer_client, small, django_assert_max_num_queries)
    big_queries, big_size = detail_queries(viewer_client, big, django_assert_max_num_queries)
    assert big_queries == small_queries  # no query per case
    assert big_size <= MAX_PAGE_BYTES

    with django_assert_max_num_queries(DETAIL_BUDGET):
        failures = viewer_client.get(reverse("run_detail", args=[big.pk]) + "?failures=1")
    assert len(failures.content) <= MAX_PAGE_BYTES

    case = failing_case(big)
    with django_assert_max_num_queries(EXPAND_BUDGET):
        expanded = viewer_client.get(
            reverse("case_turns", args=[big.pk, case.pk]), headers={"HX-Request": "true"}
        )
    assert expanded.status_code == 200
    assert expanded.text.count('<section class="turn') == 5


def test_the_verdict_and_metric_filters_cost_the_same_queries_for_10_or_1000_cases(
    viewer_client: Client,
    sized_runs: SizedRuns,
    django_assert_max_num_queries: AssertQueries,
) -> None:
    """Each filter is one query on stored, indexed columns (a metric's or a tool verdict's a
    bounded semi-join; a text search a scan in the same query), and the header's reason reads
    at most one bounded query per cause, whatever the size."""
    small, big = sized_runs.small[0], sized_runs.big[1]
    for index in (2, 500, 998):
        make_not_graded(big, index)
    make_not_graded(small, 2)
    for query in (
        "?outcome=not_graded",
        "?outcome=error",
        "?metric=rouge",
        "?tools=failed",
        "?text=order+5-1&tools=failed",
    ):
        counts = []
        # What a process reads once (whether the text index is in place, a finished run's
        # cost) is read before the counted views.
        for run in (small, big):
            viewer_client.get(reverse("run_detail", args=[run.pk]) + query)
        for run in (small, big):
            with django_assert_max_num_queries(DETAIL_BUDGET) as captured:
                response = viewer_client.get(reverse("run_detail", args=[run.pk]) + query)
            assert response.status_code == 200
            assert len(response.content) <= MAX_PAGE_BYTES
            counts.append(len(captured))  # type: ignore[arg-type]
        assert counts[0] == counts[1], query


def test_comparing_runs_of_1000_cases_of_5_turns_stays_within_budget(
    viewer_client: Client,
    sized_runs: SizedRuns,
    django_assert_max_num_queries: AssertQueries,
) -> None:
    small, big = sized_runs.small, sized_runs.big
    budget = django_assert_max_num_queries
    two_small, _ = compare_queries(viewer_client, small, budget, COMPARE_2_BUDGET)
    two_big, size = compare_queries(viewer_client, big[:2], budget, COMPARE_2_BUDGET)
    assert two_big == two_small  # no query per case or turn
    assert size <= COMPARE_2_MAX_BYTES
    compare_queries(viewer_client, big, budget, COMPARE_8_BUDGET)
    with django_assert_max_num_queries(COMPARE_8_BUDGET):
        filtered = viewer_client.get(
            reverse("compare"),
            {
                "runs": ",".join(str(r.pk) for r in big),
                "kinds": "code,tools",
                "show": "regressions",
            },
        )
    assert filtered.status_code == 200
    # In commit order, with a metric's deltas sorted by its drop and a search: one query more
    # for the scores and one for the search, whatever the runs' size.
    base = {"runs": ",".join(str(r.pk) for r in big), "baseline": big[0].pk}
    with CaptureQueriesContext(connection) as plain:
        assert viewer_client.get(reverse("compare"), base).status_code == 200
    settings = {"order": "commits", "metric": "rouge", "sort": "delta", "q": "order 7-"}
    with django_assert_max_num_queries(COMPARE_8_BUDGET) as captured:
        searched = viewer_client.get(reverse("compare"), {**base, **settings})
    assert searched.status_code == 200 and searched.context["page"].paginator.count >= 1
    assert len(captured) == len(plain) + 2  # type: ignore[arg-type]


def test_a_repeated_runs_page_and_poll_cost_the_same_queries_for_few_or_many_cases(
    viewer_client: Client,
    sized_runs: SizedRuns,
    django_assert_max_num_queries: AssertQueries,
) -> None:
    """``sized_runs`` only fills the tables: on a fresh PostgreSQL test database (no statistics)
    the poll's query of a run of 2,000 cases is planned as nested loops and ran for over 15
    minutes when the tables held nothing else; the tests before it used to leave their rolled
    back rows behind."""
    from tests.web.factories import repeated_run

    small = repeated_run(None, [0.5] * 3, repeats=5, seed=1)
    big = repeated_run(None, [0.5] * 400, repeats=5, seed=2, commit="b" * 40)
    small_queries, _ = detail_queries(viewer_client, small, django_assert_max_num_queries)
    big_queries, big_size = detail_queries(viewer_client, big, django_assert_max_num_queries)
    assert big_queries == small_queries  # no query per case or repetition
    assert big_size <= MAX_PAGE_BYTES
    for run in (small, big):
        with django_assert_max_num_queries(DETAIL_BUDGET):
            filtered = viewer_client.get(reverse("run_detail", args=[run.pk]), {"failures": "1"})
        assert filtered.status_code == 200

    Run.objects.filter(pk=big.pk).update(status=Run.Status.RUNNING)
    with django_assert_max_num_queries(DETAIL_BUDGET):
        polled = viewer_client.get(
            reverse("run_progress", args=[big.pk]),
            {"known": "400", "since": "2020-01-01T00:00:00Z"},
            headers={"HX-Request": "true"},
        )
    assert polled.status_code == 200
