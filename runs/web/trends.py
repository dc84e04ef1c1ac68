"""Trends over a project's runs: pass rate, the turns each run regressed and fixed against the
run before it, and per-metric averages (a panel per metric kind) in commit order, as the runs'
stored summaries and turn verdicts have them. Re-grades are drawn apart, beside the run whose
transcripts they grade (``?regrades=hide`` leaves them out)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from runs import selectors
from runs.core.charts import trend_chart, trend_runs
from runs.core.charts.trend_runs import TrendRun
from runs.core.verdicts.kinds import METRIC_KINDS, kinds_parse
from runs.selectors import trends as trend
from runs.web.params import MAX_TEXT, choice_param, float_param, int_param, text_param

if TYPE_CHECKING:
    from runs.models import AgentProject

DEFAULT_POINTS = 100
MAX_POINTS = 500
REGRADE_CHOICES = ("show", "hide")


def kinds_param(request: HttpRequest) -> tuple[str, ...]:
    """``?kinds=standard,code`` and/or repeated ``kinds=``, among the metric kinds (the chart
    draws metric scores: tool assertions have none); none given means every metric kind."""
    raws = request.GET.getlist("kinds")
    for raw in raws:
        if "\x00" in raw:
            raise BadRequest("?kinds= must not contain a NUL character")
        if len(raw) > MAX_TEXT:
            raise BadRequest(f"?kinds= is longer than {MAX_TEXT} characters")
    try:
        chosen = kinds_parse(",".join(raws))
    except ValueError as exc:
        raise BadRequest(f"?kinds=: {exc}") from exc
    if any(kind not in METRIC_KINDS for kind in chosen):
        raise BadRequest(f"?kinds= must be among {', '.join(METRIC_KINDS)}")
    return chosen or METRIC_KINDS


@login_required
@require_GET
def trends(request: HttpRequest) -> HttpResponse:
    """``/trends/?project=ID`` (or ``?agent=NAME`` for imported runs without a project)."""
    project_id = int_param(request, "project", minimum=1)
    agent = text_param(request, "agent")
    margin = float_param(request, "margin", minimum=0, maximum=100)
    last = int_param(request, "last", minimum=1, maximum=MAX_POINTS)
    kinds = kinds_param(request)
    regrades_shown = (choice_param(request, "regrades", REGRADE_CHOICES) or "show") == "show"
    if project_id is None and not agent:
        return _picker(request)
    project = selectors.project_get(project_id=project_id) if project_id else None
    runs, regrades, branches, branch = _runs_of(request, project, agent)
    ordering = trend.runs_ordered(
        runs, directory=project.directory if project else None, branch=branch
    )
    limit = last or DEFAULT_POINTS
    # Links only for the runs shown: reversing a URL is not free.
    shown = [_linked(run) for run in ordering.runs[-limit:]]
    placed, unplaced = trend_runs.regrades_placed(regrades, shown)
    placed = [_linked(run) for run in placed] if regrades_shown else []
    averages = trend.metric_averages(run_ids=[run.id for run in shown], kinds=kinds)
    # Each run against the run before it in the series, the first shown too (against the run
    # just before the window, when there is one).
    window = ordering.runs[-limit - 1 :]
    churn = trend.run_churn(
        [run.id for run in window], () if set(kinds) == set(METRIC_KINDS) else kinds
    )
    margin = trend_runs.DEFAULT_MARGIN if margin is None else margin
    chart = trend_chart.chart(shown, averages, margin=margin, regrades=placed, churn=churn)
    originals = {run.id: run for run in shown}
    context = {
        "project": project,
        "agent": agent,
        "subject": project.name if project else agent,
        "runs": shown,
        "table": [(run, churn.get(run.id)) for run in shown],
        "total": len(ordering.runs),
        "ordering": ordering,
        "chart": chart,
        "branches": branches,
        "metric_kinds": METRIC_KINDS,
        # Each drawn re-grade with the run whose transcripts it grades.
        "regrades": [(run, originals[run.transcripts_run or 0]) for run in placed],
        "regrade_count": len(regrades),
        "regrades_unplaced": len(unplaced) if regrades_shown else 0,
        "regrade_choices": REGRADE_CHOICES,
        "selected": {
            "branch": branch,
            "kinds": kinds,
            "margin": margin,
            "last": limit,
            "regrades": "show" if regrades_shown else "hide",
        },
    }
    return render(request, "runs/trends.html", context)


def _runs_of(
    request: HttpRequest, project: AgentProject | None, agent: str
) -> tuple[list[TrendRun], list[TrendRun], list[str], str]:
    """The finished runs of the project (or agent) on the chosen branch: (the series, the
    re-grades, the branches to choose from, the chosen one)."""
    runs = trend.finished_runs(project=project, agent=agent)
    branches = trend.branch_choices(runs)
    branch = choice_param(request, "branch", branches)
    if branch:
        runs = [run for run in runs if run.branch == branch]
    # A re-grade is no run of a commit: never in the series, at most a mark beside its run.
    series, regrades = trend_runs.split_regrades(runs)
    return series, regrades, branches, branch


def _linked(run: TrendRun) -> TrendRun:
    return replace(run, url=reverse("run_detail", args=[run.id]))


def _picker(request: HttpRequest) -> HttpResponse:
    """No project or agent chosen: the projects, and the agents of runs without a project."""
    context = {
        "projects": selectors.project_choices(),
        "agents": trend.agents_without_project(),
    }
    return render(request, "runs/trends.html", context)
