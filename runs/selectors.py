"""Reads for the dashboard pages.

Every function here returns what one screen needs in a fixed number of queries, whatever the
size of the run: lists read the summary columns, turn details are fetched only for one case.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args

from django.db.models import Avg, Count, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.shortcuts import get_object_or_404

from runs.models import AgentProject, CaseResult, MetricResult, Run, TurnResult
from runs.report.models import MetricKind

METRIC_KINDS: tuple[str, ...] = get_args(MetricKind)

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
    # What tells "could not grade" apart from a real failure (see ``case_outcome``).
    "errors",
    "tools_matched",
    "metric_results",
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
    "metric_summary",
    "error",
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


@dataclass(frozen=True)
class CaseCounts:
    """Run-wide counts the tiles show beside the stored passed/failed counters."""

    not_graded: int
    cancelled: int


# --- outcomes ------------------------------------------------------------------------------
# A failure whose only cause is metrics that could not be graded (the judge or grader errored)
# is "not graded": the stored verdict stays failed, but the pages show it apart from real
# failures, because the agent may well have been right.


def metrics_not_graded(failed_metric_errors: Iterable[Any]) -> bool:
    """True when there is at least one failed metric and every one of them has an error."""
    errors = list(failed_metric_errors)
    return bool(errors) and all(errors)


def case_fields_not_graded(
    errors: Any, tools_matched: bool | None, metric_results: Iterable[Mapping[str, Any]] | None
) -> bool:
    if errors or tools_matched is False:
        return False
    failed = [m for m in metric_results or [] if isinstance(m, Mapping) and not m.get("passed")]
    return metrics_not_graded(m.get("error") for m in failed)


def case_outcome(case: CaseResult) -> str:
    """passed | failed | not-graded | cancelled | none (pending, running, no verdict)."""
    if case.status == CaseResult.Status.CANCELLED and case.passed is None:
        return "cancelled"
    if case.passed is None:
        return "none"
    if case.passed:
        return "passed"
    if case_fields_not_graded(case.errors, case.tools_matched, case.metric_results):
        return "not-graded"
    return "failed"


def turn_outcome(turn: TurnResult) -> str:
    """passed | failed | not-graded | skipped (reads the turn's prefetched metrics)."""
    if turn.skipped:
        return "skipped"
    if turn.passed:
        return "passed"
    if turn.errors or turn.tools_matched is False:
        return "failed"
    failed = [metric for metric in turn.metrics.all() if not metric.passed]
    return "not-graded" if metrics_not_graded(m.error for m in failed) else "failed"


def run_case_counts(*, run: Run) -> CaseCounts:
    """Not-graded and cancelled cases of the whole run, in one query.

    Only failed cases that could be "not graded" and cancelled cases are read, with the three
    small columns the verdict needs.
    """
    rows = (
        CaseResult.objects.filter(run=run)
        .filter(
            (Q(passed=False) & ~Q(tools_matched=False))
            | Q(status=CaseResult.Status.CANCELLED, passed__isnull=True)
        )
        .values_list("passed", "errors", "tools_matched", "metric_results")
    )
    not_graded = cancelled = 0
    for passed, errors, tools_matched, metric_results in rows:
        if passed is None:
            cancelled += 1
        elif case_fields_not_graded(errors, tools_matched, metric_results):
            not_graded += 1
    return CaseCounts(not_graded=not_graded, cancelled=cancelled)


# --- lists ---------------------------------------------------------------------------------


def agent_names() -> list[str]:
    """Distinct agent names of all runs (imported runs have no project, only a name)."""
    names = Run.objects.order_by("agent_name").values_list("agent_name", flat=True).distinct()
    return [name for name in names if name]


def run_list(
    *, project_id: int | None = None, status: str = "", commit: str = "", agent: str = ""
) -> QuerySet[Run]:
    runs = Run.objects.select_related("project").defer(
        "raw_yaml", "config_snapshot", "environment", "summary", "metric_summary", "cli_args"
    )
    if project_id is not None:
        runs = runs.filter(project_id=project_id)
    if status:
        runs = runs.filter(status=status)
    if commit:
        runs = runs.filter(git_commit__startswith=commit.lower())
    if agent:
        runs = runs.filter(agent_name=agent)
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


def case_rows(*, run: Run, only_failures: bool = False, query: str = "") -> QuerySet[CaseResult]:
    """The case rows of a run; ``query`` keeps names containing it (case-insensitive)."""
    cases = CaseResult.objects.filter(run=run).only(*CASE_ROW_FIELDS).order_by("index")
    if only_failures:
        cases = cases.filter(passed=False)
    if query:
        cases = cases.filter(name__icontains=query)
    return cases


def case_rows_finished_since(
    *, run: Run, since: datetime, only_failures: bool = False, query: str = ""
) -> list[CaseResult]:
    """Case rows that finished after ``since`` (the progress poll swaps just these)."""
    rows = case_rows(run=run, only_failures=only_failures, query=query)
    return list(rows.filter(finished_at__gt=since))


def next_failed_case(*, case: CaseResult) -> CaseResult | None:
    """The next failed case of the same run after ``case`` (by index), if any."""
    return (
        CaseResult.objects.filter(run_id=case.run_id, passed=False, index__gt=case.index)
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
