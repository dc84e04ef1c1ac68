"""Reads of agent projects."""

from __future__ import annotations

from django.db.models import OuterRef, QuerySet, Subquery
from django.shortcuts import get_object_or_404

from runs.models import AgentProject, Run


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
