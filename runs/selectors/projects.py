"""Reads of agent projects."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import OuterRef, QuerySet, Subquery
from django.shortcuts import get_object_or_404

from runs.core.charts.trend_runs import split_regrades
from runs.core.runoptions import partial_text
from runs.core.verdicts.status import StatusReason, counters_of, run_status_reason
from runs.core.verdicts.summary import OutcomeCounts
from runs.models import AgentProject, Run
from runs.selectors.partial import PARTIAL_COLUMNS
from runs.selectors.trends import finished_runs

if TYPE_CHECKING:
    from runs.core.charts.trend_chart import TrendRun


def project_list() -> QuerySet[AgentProject]:
    """Projects with their last run's id, status, case counts, pass rate, commit and time (and
    the run it re-grades, when it is a re-grade), in one query."""
    last_runs = Run.objects.filter(project=OuterRef("pk")).order_by("-created_at", "-id")
    return AgentProject.objects.annotate(
        last_run_id=Subquery(last_runs.values("id")[:1]),
        last_run_status=Subquery(last_runs.values("status")[:1]),
        last_run_passed=Subquery(last_runs.values("passed_cases")[:1]),
        last_run_total=Subquery(last_runs.values("total_cases")[:1]),
        last_run_pass_rate=Subquery(last_runs.values("pass_rate")[:1]),
        last_run_commit=Subquery(last_runs.values("git_commit")[:1]),
        last_run_created_at=Subquery(last_runs.values("created_at")[:1]),
        last_run_regrade_of=Subquery(last_runs.values("regrade_of")[:1]),
    ).order_by("name")


@dataclass(frozen=True)
class LastRun:
    """What the home page shows of a project's latest run."""

    id: int
    regrade_of_id: int | None
    status: str
    passed_cases: int
    total_cases: int
    pass_rate: float | None
    git_commit: str
    created_at: datetime
    # What its status reason is read from (``Run.counts``, ``runs.core.verdicts.status``).
    cases_done: int
    failed_cases: int
    errored_cases: int
    not_graded_cases: int
    cancelled_cases: int
    error: str
    # Its launch's limit, filter, agent.yaml case count and repeats (the run's option columns,
    # PARTIAL_COLUMNS): what its partial badge says.
    case_limit: int | None = None
    case_filter: str = ""
    config_cases: int | None = None
    repeats: int = 1

    @property
    def counts(self) -> OutcomeCounts:
        return counters_of(self)

    @property
    def status_reason(self) -> StatusReason:
        """Why it has its status (no causes: a list reads no case rows)."""
        return run_status_reason(status=self.status, counts=self.counts, run_error=self.error)

    @property
    def partial_text(self) -> str:
        return partial_text(self)


def projects_with_last_run() -> list[tuple[AgentProject, LastRun | None]]:
    """Every project, by name, with its latest run, or None: two queries whatever the number
    of projects and runs (each latest run is found through the index ``run_project_latest``;
    the runs are read as plain values, not model instances)."""
    latest = Run.objects.filter(project=OuterRef("pk")).order_by("-created_at", "-id")
    projects = list(
        AgentProject.objects.annotate(last_run_id=Subquery(latest.values("id")[:1])).order_by(
            "name"
        )
    )
    ids = [project.last_run_id for project in projects if project.last_run_id is not None]
    fields = [field.name for field in dataclass_fields(LastRun)][: -len(PARTIAL_COLUMNS)]
    runs = {
        values[0]: LastRun(*values)
        for values in Run.objects.filter(pk__in=ids)
        .order_by()
        .values_list(*fields, *PARTIAL_COLUMNS)
    }
    return [(project, runs.get(project.last_run_id)) for project in projects]


def project_listed(*, project_id: int) -> AgentProject:
    """One project as ``project_list`` gives it (with its last run), or 404."""
    return get_object_or_404(project_list(), pk=project_id)


def project_find(*, project_id: int) -> AgentProject | None:
    """One project, or None (for a caller that reports a missing project its own way)."""
    return AgentProject.objects.filter(pk=project_id).first()


def project_get(*, project_id: int) -> AgentProject:
    """One project, or 404."""
    return get_object_or_404(AgentProject, pk=project_id)


def project_choices() -> QuerySet[AgentProject]:
    """Every project's id and name, by name: what a project <select> offers."""
    return AgentProject.objects.order_by("name").only("id", "name")


def project_pass_rates(*, project: AgentProject, last: int = 20) -> list[TrendRun]:
    """The project's last ``last`` finished runs (re-grades left out), oldest first, as the
    trends page reads them (``runs.selectors.trends``): the project page's small series."""

    runs, _ = split_regrades(finished_runs(project=project, agent=""))
    return runs[-last:]
