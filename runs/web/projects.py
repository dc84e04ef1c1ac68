"""Projects in the browser: register one from a path on the server (validated with the loader,
every problem listed), its page (its config as loaded now, its runs, its pass rates, launch),
edit its name and description, remove it (its runs kept or deleted, asked first)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods

from runs import selectors
from runs.core.agentconfig.errors import ConfigError
from runs.core.reviewing.vocabulary import Role
from runs.selectors import projects as project_reads
from runs.services.projects import ProjectError, project_register, project_update
from runs.services.projects import project_remove as remove
from runs.web.launch import agent_loaded
from runs.web.params import choice_param, page_param
from runs.web.views import (
    RUNS_PER_PAGE,
    form_page,
    project_of_page,
    role_required,
    staff_required,
)

if TYPE_CHECKING:
    from runs.models import AgentProject

# How many finished runs the project page's pass-rate series shows (the trends page has all).
SERIES_RUNS = 12


class ProjectRegisterForm(forms.Form):
    path = forms.CharField(
        max_length=1000,
        label="Path on the server",
        help_text="The agent.yaml, or the directory holding it (an absolute path).",
        widget=forms.TextInput(attrs={"placeholder": "/srv/agents/weather/agent.yaml"}),
    )
    name = forms.CharField(
        required=False,
        max_length=200,
        label="Name",
        help_text="Empty: the agent's name.",
    )


class ProjectEditForm(forms.Form):
    name = forms.CharField(max_length=200, label="Name")
    description = forms.CharField(
        required=False, label="Description", widget=forms.Textarea(attrs={"rows": 3})
    )


class ProjectRemoveForm(forms.Form):
    runs = forms.ChoiceField(
        choices=[
            ("keep", "Keep its runs (they stay listed under their agent's name, with no project)"),
            ("delete", "Delete its runs with it (their cases, turns and metrics)"),
        ],
        widget=forms.RadioSelect,
        label="Its runs",
    )


@staff_required
@require_http_methods(["GET", "POST"])
def project_new(request: HttpRequest) -> HttpResponse:
    """Register a project: nothing is saved unless its agent.yaml loads."""

    form = ProjectRegisterForm(request.POST or None)
    problems: list[str] = []
    if request.method == "POST" and form.is_valid():
        raw = form.cleaned_data["path"].strip()
        path = Path(raw).expanduser()
        try:
            if not path.is_absolute():
                raise ProjectError(
                    f"{raw} is not an absolute path: give the path on the server", field="path"
                )
            project = project_register(
                agent_path=path, name=form.cleaned_data["name"], validate=True, user=request.user
            )
        except FileNotFoundError as exc:
            form.add_error("path", str(exc))
        except ProjectError as exc:
            form.add_error(exc.field, str(exc))
        except ConfigError as exc:
            problems = exc.lines() or [str(exc)]
        else:
            messages.success(request, f"Project {project.name} registered.")
            return redirect("project_detail", project_id=project.pk)
    context = {"form": form, "problems": problems}
    return form_page(request, "runs/project_new.html", context)


@dataclass(frozen=True)
class LoadedConfig:
    """What the project page shows of its agent.yaml, loaded now."""

    name: str
    description: str
    model: str
    case_count: int
    turn_count: int


def _config_of(project: AgentProject) -> tuple[LoadedConfig | None, list[str]]:
    agent, problems = agent_loaded(project)
    if agent is None:
        return None, problems
    config = agent.config
    cases = config.test_cases
    return LoadedConfig(
        name=config.name,
        description=config.description or "",
        model=f"{config.model.provider} {config.model.name}",
        case_count=len(cases),
        turn_count=sum(len(case.as_turns()) for case in cases),
    ), []


@login_required
@require_GET
def project_detail(request: HttpRequest, project_id: int) -> HttpResponse:
    project = selectors.project_get(project_id=project_id)
    status = choice_param(request, "status", [value for value, _ in selectors.RUN_STATUSES])
    runs = selectors.run_list(
        filters=selectors.RunListFilters(project_id=project.pk, status=status)
    )
    page = Paginator(runs, RUNS_PER_PAGE).get_page(page_param(request, "page"))
    latest = selectors.run_list(filters=selectors.RunListFilters(project_id=project.pk)).first()
    series = project_reads.project_pass_rates(project=project, last=SERIES_RUNS)
    config, problems = _config_of(project)
    context = {
        "project": project,
        "config": config,
        "config_problems": problems,
        "latest": latest,
        "page": page,
        "statuses": selectors.RUN_STATUSES,
        "selected_status": status,
        "empty_text": f"No runs {status}." if status else "No runs.",
        # What the pager keeps from page to page.
        "filter_query": urlencode({"status": status}) if status else "",
        "series": list(reversed(series)),  # newest first
    }
    return render(request, "runs/project_detail.html", context)


@role_required(Role.ADMIN, action="edit this project", project_of=project_of_page)
@require_http_methods(["GET", "POST"])
def project_edit(request: HttpRequest, project_id: int) -> HttpResponse:

    project = selectors.project_get(project_id=project_id)
    initial = {"name": project.name, "description": project.description}
    form = ProjectEditForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            project_update(
                project=project,
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                user=request.user,
            )
        except ProjectError as exc:
            form.add_error(exc.field, str(exc))
        else:
            messages.success(request, f"Project {project.name} saved.")
            return redirect("project_detail", project_id=project.pk)
    context = {"project": project, "form": form}
    return form_page(request, "runs/project_edit.html", context)


@role_required(Role.ADMIN, action="remove this project", project_of=project_of_page)
@require_http_methods(["GET", "POST"])
def project_remove(request: HttpRequest, project_id: int) -> HttpResponse:
    """The confirm step (GET) and the removal (POST, saying what becomes of its runs)."""

    project = selectors.project_get(project_id=project_id)
    form = ProjectRemoveForm(request.POST or None)
    problems: list[str] = []
    if request.method == "POST" and form.is_valid():
        delete_runs = form.cleaned_data["runs"] == "delete"
        name = project.name
        try:
            deleted = remove(project=project, delete_runs=delete_runs, user=request.user)
        except ProjectError as exc:
            problems = [str(exc)]
        else:
            what = (
                f"its {deleted} run{'s' if deleted != 1 else ''} deleted"
                if delete_runs
                else ("its runs kept")
            )
            messages.success(request, f"Project {name} removed, {what}.")
            return redirect("home")
    context = {
        "project": project,
        "form": form,
        "problems": problems,
        "run_count": selectors.run_list(
            filters=selectors.RunListFilters(project_id=project.pk)
        ).count(),
    }
    return form_page(request, "runs/project_remove.html", context)
