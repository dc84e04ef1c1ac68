"""Reads of a run's cases: the case rows of the run page, one case with its turns and its
summary. Verdicts are the stored ``outcome`` of each row; pages draw them as they are."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.models import Count, Prefetch, Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from runs.mapping import summary_of_rows
from runs.models import CaseResult, MetricResult, Run, TurnResult
from runs.report.outcomes import BAD
from runs.report.summary import RunSummary

# "Only failures": cases that failed or errored (not those that could not be graded).
FAILURES = tuple(outcome.value for outcome in BAD)

# Columns a case row shows; the heavy JSON/text columns stay in the database until expanded.
CASE_ROW_FIELDS = (
    "id",
    "run_id",
    "index",
    "repetition",
    "name",
    "status",
    "is_multi_turn",
    "turn_count",
    "turns_passed",
    "passed",
    "execution_time_ms",
    "started_at",
    "finished_at",
    "outcome",
)

# Large run columns the case pages (case_detail.html and the case turns fragment) never read.
CASE_PAGE_UNUSED_RUN_FIELDS = (
    "raw_yaml",
    "config_snapshot",
    "environment",
    "cli_args",
    "options",
    "prompt_version",
    "summary",
    "error",
)


def case_rows(
    *,
    run: Run,
    only_failures: bool = False,
    query: str = "",
    fields: Sequence[str] = CASE_ROW_FIELDS,
) -> QuerySet[CaseResult]:
    """The case rows of a run (reading ``fields``); ``query`` keeps names containing it
    (case-insensitive)."""
    cases = CaseResult.objects.filter(run=run).only(*fields).order_by("index", "repetition")
    if only_failures:
        cases = cases.filter(outcome__in=FAILURES)
    if query:
        cases = cases.filter(name__icontains=query)
    return cases


def case_rows_changed_since(
    *,
    run: Run,
    since: datetime,
    only_failures: bool = False,
    query: str = "",
    most: int | None = None,
) -> list[CaseResult]:
    """Case rows that started or finished after ``since`` (the progress poll swaps just these),
    the first ``most`` of them (by index) when given."""
    rows = case_rows(run=run, only_failures=only_failures, query=query)
    changed = Q(finished_at__gt=since) | Q(started_at__gt=since)
    return list(rows.filter(changed)[:most])


def case_version(*, status: str, turns: int) -> str:
    """What an expanded case shows of itself changes when this does: its status and how many
    of its turns are written (its turns fragment polls with it while the case runs)."""
    return f"{status}.{turns}"


def case_version_get(*, run_id: int, case_id: int) -> tuple[bool, str]:
    """(whether it is running, its ``case_version``) of one case, or 404: one small query."""
    row = (
        CaseResult.objects.filter(pk=case_id, run_id=run_id)
        .annotate(written=Count("turns"))
        .values_list("status", "written")
        .first()
    )
    if row is None:
        raise Http404("no such case")
    status, written = row
    return status == CaseResult.Status.RUNNING, case_version(status=status, turns=written)


def next_failed_case(*, case: CaseResult) -> CaseResult | None:
    """The next failed case of the same run after ``case`` (by index), if any."""
    return (
        CaseResult.objects.filter(run_id=case.run_id, outcome__in=FAILURES, index__gt=case.index)
        .only("id", "run_id", "index", "name")
        .order_by("index")
        .first()
    )


def case_get(*, run_id: int, case_id: int) -> CaseResult:
    """One case with its run, turns and each turn's metrics (three queries).

    The case pages read only the run's id, agent name and status, so the run's project is not
    joined and its large text/JSON columns stay in the database.
    """
    turns = TurnResult.objects.order_by("index").prefetch_related(
        Prefetch("metrics", queryset=MetricResult.objects.order_by("position", "id"))
    )
    return get_object_or_404(
        CaseResult.objects.select_related("run")
        .defer(*(f"run__{name}" for name in CASE_PAGE_UNUSED_RUN_FIELDS))
        .prefetch_related(Prefetch("turns", queryset=turns)),
        pk=case_id,
        run_id=run_id,
    )


def case_summary(*, case: CaseResult) -> RunSummary:
    """The case's own summary (its turns and metrics, counted as a run's are; three queries)."""
    return summary_of_rows(case.run_id, case_id=case.pk)
