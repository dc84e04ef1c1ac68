"""Reads for the dashboard pages.

Every function here returns what one screen needs in a fixed number of queries, whatever the
size of the run: lists read the summary columns, turn details are fetched only for one case.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Avg, Count, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.shortcuts import get_object_or_404

from runs.models import AgentProject, CaseResult, MetricResult, Run, TurnResult

METRIC_KINDS = ("standard", "rag", "geval", "code")

# Columns a case row shows; the heavy JSON/text columns stay in the database until expanded.
CASE_ROW_FIELDS = (
    "id",
    "run_id",
    "index",
    "name",
    "status",
    "is_multi_turn",
    "turn_count",
    "turns_passed",
    "passed",
    "execution_time_ms",
    "finished_at",
)


@dataclass(frozen=True)
class MetricAverage:
    name: str
    kind: str
    average: float | None
    evaluated: int
    passed: int
    errored: int


def project_list() -> QuerySet[AgentProject]:
    """Projects with their last run's id, status, pass rate and time, in one query."""
    last_runs = Run.objects.filter(project=OuterRef("pk")).order_by("-created_at", "-id")
    return AgentProject.objects.annotate(
        last_run_id=Subquery(last_runs.values("id")[:1]),
        last_run_status=Subquery(last_runs.values("status")[:1]),
        last_run_passed=Subquery(last_runs.values("passed_cases")[:1]),
        last_run_total=Subquery(last_runs.values("total_cases")[:1]),
        last_run_commit=Subquery(last_runs.values("git_commit")[:1]),
        last_run_created_at=Subquery(last_runs.values("created_at")[:1]),
    ).order_by("name")


def run_list(*, project_id: int | None = None, status: str = "", commit: str = "") -> QuerySet[Run]:
    runs = Run.objects.select_related("project").defer(
        "raw_yaml", "config_snapshot", "environment", "summary", "metric_summary", "cli_args"
    )
    if project_id is not None:
        runs = runs.filter(project_id=project_id)
    if status:
        runs = runs.filter(status=status)
    if commit:
        runs = runs.filter(git_commit__startswith=commit.lower())
    return runs.order_by("-created_at", "-id")


def run_get(*, run_id: int) -> Run:
    return get_object_or_404(
        Run.objects.select_related("project", "created_by").defer("raw_yaml", "config_snapshot"),
        pk=run_id,
    )


def run_metric_averages(*, run: Run) -> dict[str, list[MetricAverage]]:
    """Per-metric averages grouped by kind (one aggregate query over the metric rows).

    Computed from the rows rather than ``Run.metric_summary`` so a running run shows the
    averages of the turns finished so far.
    """
    rows = (
        MetricResult.objects.filter(run=run)
        .values("kind", "metric_name")
        .annotate(
            average=Avg("score"),
            evaluated=Count("id"),
            passed_count=Count("id", filter=Q(passed=True)),
            errored=Count("id", filter=Q(error__isnull=False) & ~Q(error="")),
        )
        .order_by("kind", "metric_name")
    )
    grouped: dict[str, list[MetricAverage]] = {}
    for row in rows:
        grouped.setdefault(row["kind"], []).append(
            MetricAverage(
                name=row["metric_name"],
                kind=row["kind"],
                average=row["average"],
                evaluated=row["evaluated"],
                passed=row["passed_count"],
                errored=row["errored"],
            )
        )
    ordered = sorted(grouped, key=lambda k: METRIC_KINDS.index(k) if k in METRIC_KINDS else 99)
    return {kind: grouped[kind] for kind in ordered}


def case_rows(*, run: Run, only_failures: bool = False) -> QuerySet[CaseResult]:
    cases = CaseResult.objects.filter(run=run).only(*CASE_ROW_FIELDS).order_by("index")
    if only_failures:
        cases = cases.filter(passed=False)
    return cases


def case_rows_finished_since(
    *, run: Run, since: datetime, only_failures: bool = False
) -> list[CaseResult]:
    """Case rows that finished after ``since`` (the progress poll swaps just these)."""
    return list(case_rows(run=run, only_failures=only_failures).filter(finished_at__gt=since))


def case_get(*, run_id: int, case_id: int) -> CaseResult:
    """One case with its run, turns and each turn's metrics (three queries)."""
    turns = TurnResult.objects.order_by("index").prefetch_related(
        Prefetch("metrics", queryset=MetricResult.objects.order_by("position", "id"))
    )
    return get_object_or_404(
        CaseResult.objects.select_related("run", "run__project").prefetch_related(
            Prefetch("turns", queryset=turns)
        ),
        pk=case_id,
        run_id=run_id,
    )
