"""Launching a run from the dashboard: the form, what it tells of the agent before anything is
queued, and a re-run's options filled in."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django import forms
from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from runs import selectors
from runs.core.agentconfig.errors import ConfigError
from runs.core.agentconfig.loader import load_agent
from runs.core.agentconfig.test_cases import case_label
from runs.core.engine.metrics import judge_warnings
from runs.core.reviewing.vocabulary import Role
from runs.services.launch import LaunchError, run_create
from runs.web.params import AsciiIntegerField, int_param
from runs.web.views import form_page, project_of_page, role_required

if TYPE_CHECKING:
    from runs.core.agentconfig.loader import LoadedAgent
    from runs.models import AgentProject, Run


class LaunchForm(forms.Form):
    git_ref = forms.CharField(
        required=False,
        max_length=200,
        label="Git ref",
        help_text="Branch, tag or commit. Empty: the working tree as it is.",
        widget=forms.TextInput(attrs={"placeholder": "working tree"}),
    )
    parallel = AsciiIntegerField(
        required=False,
        min_value=1,
        max_value=64,
        label="Parallel cases",
        help_text="Empty: the agent's execution.parallel_test_cases.",
    )
    case_filter = forms.CharField(
        required=False,
        max_length=200,
        label="Case filter",
        help_text="Only cases whose name contains this text.",
    )
    limit = AsciiIntegerField(
        required=False, min_value=1, label="Limit", help_text="Run only the first N cases."
    )
    repeats = AsciiIntegerField(
        required=False,
        min_value=1,
        max_value=1000,
        label="Repeats",
        help_text="Run each case this many times, as independent sessions. Empty: the agent's"
        " execution.repeats.",
    )
    # Generated when the form is rendered: a double submit, or a retry of a launch that outlived
    # the browser's patience, answers with the run the first one created (docs/api.md).
    idempotency_key = forms.CharField(required=False, max_length=100, widget=forms.HiddenInput)


@dataclass(frozen=True)
class AgentPreview:
    """What the launch form tells about the agent before anything is queued."""

    case_count: int
    turn_count: int
    parallel: int
    repeats: int
    case_names: list[str]
    warnings: list[str]


# Names offered in the filter's <datalist>; beyond this the list stops helping.
DATALIST_NAMES = 500
# Names suggested when the filter matched no case.
SUGGESTED_NAMES = 12


@role_required(Role.RUNNER, action="launch runs", project_of=project_of_page)
@require_http_methods(["GET", "POST"])
def project_launch(request: HttpRequest, project_id: int) -> HttpResponse:
    project = selectors.project_get(project_id=project_id)
    rerun = _rerun_of(request, project) if request.method == "GET" else None
    initial = {"idempotency_key": uuid.uuid4().hex, **(rerun_initial(rerun) if rerun else {})}
    form = LaunchForm(request.POST or None, initial=initial)
    problems: list[str] = []
    if request.method == "POST" and form.is_valid():
        outcome = _launch(request, project, form)
        if not isinstance(outcome, list):
            return redirect("run_detail", run_id=outcome.pk)
        problems = outcome
    # Loaded lazily, only to render the form: the working tree's agent.yaml, as it is now.
    preview, config_problems = _agent_preview(project)
    if preview is not None:
        form.fields[
            "parallel"
        ].help_text = (
            f"Empty: the agent's default, {preview.parallel} (execution.parallel_test_cases)."
        )
        form.fields["parallel"].widget.attrs["placeholder"] = str(preview.parallel)
        form.fields["repeats"].help_text = (
            "Run each case this many times, as independent sessions. Empty: the agent's"
            f" default, {preview.repeats} (execution.repeats)."
        )
        form.fields["repeats"].widget.attrs["placeholder"] = str(preview.repeats)
        form.fields["case_filter"].widget.attrs["list"] = "case-names"
    filter_errors = form.errors.get("case_filter") if form.is_bound else None
    context = {
        "project": project,
        "rerun": rerun,
        "form": form,
        "problems": problems,
        "preview": preview,
        # On a GET the problems are shown at once: the run cannot be launched until fixed.
        "config_problems": config_problems if not problems else [],
        "datalist_names": preview.case_names[:DATALIST_NAMES] if preview else [],
        "suggested_names": (
            preview.case_names[:SUGGESTED_NAMES] if preview and filter_errors else []
        ),
    }
    return form_page(request, "runs/launch.html", context)


def _rerun_of(request: HttpRequest, project: AgentProject) -> Run | None:
    """``?rerun=RUN``: the run of ``project`` whose options fill in the form, or None."""
    run_id = int_param(request, "rerun", minimum=1)
    if run_id is None:
        return None
    run = selectors.run_row(
        run_id=run_id, only=("id", "project_id", "options", "git_ref", "git_commit")
    )
    if run.project_id != project.pk:
        raise BadRequest(f"?rerun=: run {run_id} is not a run of {project.name}")
    return run


def rerun_initial(run: Run) -> dict[str, Any]:
    """The launch form's fields as ``run`` was launched (its limit, filter, parallelism and git
    ref; empty where it had none)."""
    options = run.run_options
    return {
        "git_ref": run.git_ref,
        **options.model_dump(include={"parallel", "case_filter", "limit"}),
        "repeats": options.repeats if options.repeats > 1 else None,
    }


def agent_loaded(project: AgentProject) -> tuple[LoadedAgent | None, list[str]]:
    """The project's agent.yaml as loaded now, or the problems that stopped it (each on one
    line)."""

    try:
        return load_agent(project.agent_path), []
    except ConfigError as exc:
        return None, exc.lines() or [str(exc)]
    except OSError as exc:
        return None, [f"{project.agent_path}: {exc}"]


def _agent_preview(project: AgentProject) -> tuple[AgentPreview | None, list[str]]:

    agent, problems = agent_loaded(project)
    if agent is None:
        return None, problems
    cases = agent.config.test_cases
    preview = AgentPreview(
        case_count=len(cases),
        turn_count=sum(len(case.as_turns()) for case in cases),
        parallel=agent.parallel_test_cases,
        repeats=agent.config.execution.repeats,
        case_names=[case_label(case.name, index) for index, case in enumerate(cases)],
        # Judge problems, then the HoloDeck fields that have no effect here.
        warnings=[*judge_warnings(agent), *agent.warnings],
    )
    return preview, []


def _launch(request: HttpRequest, project: AgentProject, form: LaunchForm) -> Run | list[str]:
    """Create and enqueue a run, or return the problems that stopped it (nothing queued).

    A bad git ref or a filter matching nothing is reported at its field instead.
    """
    # Imported here: services pull in the spec loader, which web pages otherwise never need.

    data = form.cleaned_data
    try:
        return run_create(
            project=project,
            user=request.user,
            git_ref=data["git_ref"].strip(),
            parallel=data["parallel"],
            limit=data["limit"],
            case_filter=data["case_filter"].strip(),
            idempotency_key=data["idempotency_key"].strip(),
            repeats=data["repeats"],
        )
    except ConfigError as exc:
        return [str(problem) for problem in exc.problems] or [str(exc)]
    except LaunchError as exc:
        if exc.field in (None, "idempotency_key"):  # the key is a hidden field: said above
            return [str(exc)]
        form.add_error(exc.field, str(exc))
        return []
