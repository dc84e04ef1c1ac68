"""The dashboard: plain function views, one template per screen, htmx fragments as partials.

An htmx request for a fragment renders ``"runs/<screen>.html#<partial>"`` of the same template
the full page uses, so the fragment and the page can never drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import wraps
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.middleware import HtmxDetails

from runs import selectors
from runs.models import AgentProject, CaseResult, Run

RUNS_PER_PAGE = 50
# Case rows per page of the run page; "load more" fetches the next page with htmx. Keeps the
# page small (well under 300 KB) for runs with thousands of cases.
CASES_PER_PAGE = 200
# htmx stops polling when it receives this status.
HTMX_STOP_POLLING = 286

View = Callable[..., HttpResponse]


class HtmxHttpRequest(HttpRequest):
    """What HtmxMiddleware adds to every request (for the type checker)."""

    htmx: HtmxDetails


def staff_required(view: View) -> View:
    """Logged-in users only (redirect to login); staff only beyond that (403)."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise PermissionDenied("Only staff can launch or cancel runs.")
        return view(request, *args, **kwargs)

    return wrapped


def _flag(request: HttpRequest, name: str) -> bool:
    return request.GET.get(name, "") in {"1", "true", "on", "yes"}


def _int_param(request: HttpRequest, name: str) -> int | None:
    try:
        return int(request.GET.get(name, ""))
    except ValueError:
        return None


# --- projects ------------------------------------------------------------------------------


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/home.html", {"projects": selectors.project_list()})


class LaunchForm(forms.Form):
    git_ref = forms.CharField(
        required=False,
        max_length=200,
        label="Git ref",
        help_text="Branch, tag or commit. Empty: the working tree as it is.",
        widget=forms.TextInput(attrs={"placeholder": "working tree"}),
    )
    parallel = forms.IntegerField(
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
    limit = forms.IntegerField(
        required=False, min_value=1, label="Limit", help_text="Run only the first N cases."
    )


@staff_required
@require_http_methods(["GET", "POST"])
def project_launch(request: HttpRequest, project_id: int) -> HttpResponse:
    project = get_object_or_404(AgentProject, pk=project_id)
    form = LaunchForm(request.POST or None)
    problems: list[str] = []
    if request.method == "POST" and form.is_valid():
        outcome = _launch(request, project, form.cleaned_data)
        if isinstance(outcome, Run):
            return redirect("run_detail", run_id=outcome.pk)
        problems = outcome
    status = 400 if request.method == "POST" else 200
    context = {"project": project, "form": form, "problems": problems}
    return render(request, "runs/launch.html", context, status=status)


def _launch(request: HttpRequest, project: AgentProject, data: dict[str, Any]) -> Run | list[str]:
    """Create and enqueue a run, or return the problems that stopped it (nothing queued)."""
    # Imported here: services pull in the spec loader, which web pages otherwise never need.
    from runs.services import LaunchError, run_create
    from runs.spec.errors import ConfigError

    try:
        return run_create(
            project=project,
            user=request.user,
            git_ref=data["git_ref"].strip(),
            parallel=data["parallel"],
            limit=data["limit"],
            case_filter=data["case_filter"].strip(),
        )
    except ConfigError as exc:
        return [str(problem) for problem in exc.problems] or [str(exc)]
    except LaunchError as exc:
        return [str(exc)]


# --- runs ----------------------------------------------------------------------------------


@login_required
@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    project_id = _int_param(request, "project")
    status = request.GET.get("status", "")
    if status not in Run.Status.values:
        status = ""
    commit = request.GET.get("commit", "").strip()
    runs = selectors.run_list(project_id=project_id, status=status, commit=commit)
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    filters = request.GET.copy()
    filters.pop("page", None)
    context = {
        "page": page,
        "projects": AgentProject.objects.only("id", "name"),
        "statuses": Run.Status.choices,
        "selected": {"project": project_id, "status": status, "commit": commit},
        "filter_query": filters.urlencode(),
    }
    return render(request, "runs/run_list.html", context)


def _case_page(request: HtmxHttpRequest, run: Run, only_failures: bool) -> Page[CaseResult]:
    cases: QuerySet[CaseResult] = selectors.case_rows(run=run, only_failures=only_failures)
    return Paginator(cases, CASES_PER_PAGE).get_page(request.GET.get("page"))


def _run_context(request: HtmxHttpRequest, run: Run) -> dict[str, Any]:
    only_failures = _flag(request, "failures")
    case_page = _case_page(request, run, only_failures)
    return {
        "run": run,
        "tiles": _tiles(run),
        "metric_groups": selectors.run_metric_averages(run=run),
        "case_page": case_page,
        "only_failures": only_failures,
        "failures_query": "failures=1&" if only_failures else "",
        "poll_since": timezone.now().isoformat(),
        "known_cases": case_page.paginator.count,
    }


def _tiles(run: Run) -> dict[str, Any]:
    graded = run.passed_cases + run.failed_cases
    # Computed from the counters (a percentage) so a running run shows the rate so far.
    pass_rate = run.passed_cases * 100 / graded if graded else None
    return {"pass_rate": pass_rate, "graded": graded}


@login_required
@require_GET
def run_detail(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get(run_id=run_id)
    context = _run_context(request, run)
    if request.htmx and request.GET.get("page"):
        # "Load more": just the next page of case rows.
        return render(request, "runs/run_detail.html#case_rows", context)
    if request.htmx and request.htmx.target == "case-list":
        return render(request, "runs/run_detail.html#case_list", context)
    return render(request, "runs/run_detail.html", context)


@login_required
@require_GET
def run_export(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run as a HoloDeck-compatible result file (an EvalRun), for download."""
    from runs.records import run_eval_run
    from runs.report.holodeck_io import dump_eval_run, slugify

    run = selectors.run_get(run_id=run_id)
    response = HttpResponse(dump_eval_run(run_eval_run(run)), content_type="application/json")
    filename = f"{slugify(run.agent_name)}-run-{run.pk}.json"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_GET
def run_progress(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """The polled progress fragment, plus out-of-band swaps of what changed since last poll.

    The previous response carries ``since`` (server time of that poll) and ``known`` (how many
    case rows the page shows). Newly finished case rows replace their pending rows; when cases
    appeared (a queued run got its rows) the whole case list is re-rendered. Once the run is
    no longer active the final state is rendered and status 286 stops the polling.
    """
    run = selectors.run_get(run_id=run_id)
    # A worker that died mid-case must not leave the run "running" forever.
    if run.status == Run.Status.RUNNING and _reap_stale(run):
        run = selectors.run_get(run_id=run_id)
    context = _run_context(request, run)
    since = _parse_since(request.GET.get("since", ""))
    known = _int_param(request, "known")
    full_list = known != context["known_cases"] or since is None or not run.is_active
    context["oob"] = True
    context["full_list"] = full_list
    context["changed_cases"] = (
        []
        if full_list or since is None
        else selectors.case_rows_finished_since(
            run=run, since=since, only_failures=context["only_failures"]
        )
    )
    status = 200 if run.is_active else HTMX_STOP_POLLING
    return render(request, "runs/run_detail.html#progress_response", context, status=status)


def _reap_stale(run: Run) -> bool:
    from runs.services import run_reap_stale

    return run_reap_stale(run)


def _parse_since(value: str) -> datetime | None:
    try:
        parsed = parse_datetime(value)
    except ValueError:
        return None
    # A small overlap: a case finishing during the previous render is swapped twice, not never.
    return parsed - timedelta(seconds=2) if parsed else None


@staff_required
@require_POST
def run_cancel(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    from runs.services import run_cancel as cancel_run

    run = get_object_or_404(Run, pk=run_id)
    if cancel_run(run=run):
        messages.success(request, f"Run {run.pk} cancelled.")
    else:
        messages.info(request, f"Run {run.pk} had already finished.")
    url = reverse("run_detail", kwargs={"run_id": run.pk})
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return HttpResponseRedirect(url)


# --- cases ---------------------------------------------------------------------------------


@login_required
@require_GET
def case_turns(request: HttpRequest, run_id: int, case_id: int) -> HttpResponse:
    """The turns of one case: the fragment an expanded case row loads."""
    case = selectors.case_get(run_id=run_id, case_id=case_id)
    return render(request, "runs/case_detail.html#case_turns", {"case": case, "run": case.run})


@login_required
@require_GET
def case_detail(request: HttpRequest, run_id: int, case_id: int) -> HttpResponse:
    """A stable page for one case, rendered expanded (anchors ``#turn-N`` point into it)."""
    case = selectors.case_get(run_id=run_id, case_id=case_id)
    return render(request, "runs/case_detail.html", {"case": case, "run": case.run})
