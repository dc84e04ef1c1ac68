"""Trends over a project's runs: pass rate and per-metric averages in commit order."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from runs import trends as trend
from runs.models import AgentProject, Run
from runs.params import choice_param, float_param, int_param, text_param


@login_required
@require_GET
def trends(request: HttpRequest) -> HttpResponse:
    """``/trends/?project=ID`` (or ``?agent=NAME`` for imported runs without a project)."""
    project_id = int_param(request, "project", minimum=1)
    agent = text_param(request, "agent")
    margin = float_param(request, "margin", minimum=0, maximum=100)
    last = int_param(request, "last", minimum=1, maximum=trend.MAX_POINTS)
    kinds = trend.kinds_param(request)
    if project_id is None and not agent:
        return _picker(request)
    project = get_object_or_404(AgentProject, pk=project_id) if project_id else None
    runs = trend.finished_runs(project=project, agent=agent)
    branches = trend.branch_choices(runs)
    branch = choice_param(request, "branch", branches)
    if branch:
        runs = [run for run in runs if run.branch == branch]
    ordering = trend.runs_ordered(
        runs, directory=project.directory if project else None, branch=branch
    )
    limit = last or trend.DEFAULT_POINTS
    shown = ordering.runs[-limit:]
    averages = trend.metric_averages(run_ids=[run.id for run in shown], kinds=kinds)
    margin = trend.DEFAULT_MARGIN if margin is None else margin
    chart = trend.chart(shown, averages, margin=margin)
    context = {
        "project": project,
        "agent": agent,
        "subject": project.name if project else agent,
        "runs": shown,
        "total": len(ordering.runs),
        "ordering": ordering,
        "chart": chart,
        "branches": branches,
        "metric_kinds": trend.METRIC_KINDS,
        "selected": {
            "branch": branch,
            "kinds": kinds,
            "margin": trend.number(margin),
            "last": limit,
        },
    }
    return render(request, "runs/trends.html", context)


def _picker(request: HttpRequest) -> HttpResponse:
    """No project or agent chosen: the projects, and the agents of runs without a project."""
    agents = (
        Run.objects.filter(project__isnull=True, status__in=trend.FINISHED)
        .order_by("agent_name")
        .values_list("agent_name", flat=True)
        .distinct()
    )
    context = {
        "projects": AgentProject.objects.order_by("name").only("id", "name"),
        "agents": list(agents),
    }
    return render(request, "runs/trends.html", context)
