"""The dashboard: plain function views, one template per screen, htmx fragments as partials.

An htmx request for a fragment renders ``"runs/<screen>.html#<partial>"`` of the same template
the full page uses, so the fragment and the page can never drift apart.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import wraps
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_date
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.middleware import HtmxDetails

from runs import selectors
from runs.agentconfig.test_cases import case_label
from runs.selectors.cases import CaseFilters
from runs.selectors.costs import Priced, pricing_for, run_cost
from runs.selectors.reruns import run_rerun_state, run_rerunnable
from runs.verdicts.outcomes import Outcome
from runs.verdicts.repeats import run_repeat_stats
from runs.web.exports import EXPORT_FORMATS, run_export_response
from runs.web.params import (
    BadParam,
    Query,
    choice_param,
    datetime_param,
    flag_param,
    float_param,
    int_param,
    params_or_errors,
    shown_value,
    text_param,
)
from runs.web.rows import case_group_rows_html, case_rows_html, project_rows_html

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from django.http.request import _ImmutableQueryDict

    from runs.models import AgentProject, CaseResult, Run
    from runs.verdicts.summary import RunSummary
    from runs.writers.results import ExportFormat

RUNS_PER_PAGE = 50
RUNNING = "running"  # CaseResult.Status.RUNNING (views read no model)
# Case rows per page of the run page; "load more" fetches the next page with htmx. Keeps the
# page small and quick to draw whatever the number of cases.
CASES_PER_PAGE = 100
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


# --- projects ------------------------------------------------------------------------------


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    projects = selectors.projects_with_last_run()
    context = {
        "projects": projects,
        "project_rows_html": project_rows_html(projects, staff=request.user.is_staff),
    }
    return render(request, "runs/home.html", context)


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
    repeats = forms.IntegerField(
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


@staff_required
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
    status = 400 if request.method == "POST" else 200
    return render(request, "runs/launch.html", context, status=status)


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


def _agent_preview(project: AgentProject) -> tuple[AgentPreview | None, list[str]]:
    from runs.agentconfig.errors import ConfigError
    from runs.agentconfig.loader import load_agent
    from runs.engine.metrics import judge_warnings

    try:
        agent = load_agent(project.agent_path)
    except ConfigError as exc:
        return None, [str(problem) for problem in exc.problems] or [str(exc)]
    except OSError as exc:
        return None, [f"{project.agent_path}: {exc}"]
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
    from runs.agentconfig.errors import ConfigError
    from runs.services.launch import LaunchError, run_create

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
        if exc.field is None:
            return [str(exc)]
        form.add_error(exc.field, str(exc))
        return []


# --- runs ----------------------------------------------------------------------------------


@login_required
@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    # A refused filter value shows the form again with the message next to its field (400),
    # and no runs: a list without that filter would read as its answer.
    filters, errors = params_or_errors(request, _run_list_filters)
    page = None
    if not errors:
        runs = selectors.run_list(filters=filters)
        page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page": page,
        "projects": selectors.project_choices(),
        "statuses": selectors.RUN_STATUSES,
        "agents": selectors.agent_names(),
        "facets": selectors.run_facets(),
        "selected": filters,
        "errors": errors,
        "bad": {name: shown_value(request, name, errors) for name in errors},
        "since": shown_value(request, "since", errors),
        "until": shown_value(request, "until", errors),
        "filter_query": query.urlencode(),
    }
    return render(request, "runs/run_list.html", context, status=400 if errors else 200)


def _run_list_filters(request: Query) -> selectors.RunListFilters:
    since = datetime_param(request, "since")
    before = _until_param(request)
    if since and before and since >= before:
        raise BadParam("until", "?until= must be later than since")
    return selectors.RunListFilters(
        project_id=int_param(request, "project"),
        status=choice_param(request, "status", [value for value, _ in selectors.RUN_STATUSES]),
        commit=text_param(request, "commit", max_length=64),
        agent=text_param(request, "agent"),
        since=since,
        before=before,
        version=text_param(request, "version"),
        model=text_param(request, "model"),
        tag=text_param(request, "tag"),
        min_pass=float_param(request, "min_pass", minimum=0, maximum=100),
        q=text_param(request, "q"),
    )


def _until_param(request: Query) -> datetime | None:
    """The exclusive end of ``?until=``: a bare date takes in its whole day (the next midnight);
    a date and time takes in that instant (one microsecond later, the databases' precision)."""
    try:
        whole_day = parse_date(text_param(request, "until")) is not None
    except ValueError:  # a date-shaped non-date (2025-13-01): datetime_param says what is wrong
        whole_day = False
    step = timedelta(days=1) if whole_day else timedelta(microseconds=1)
    return datetime_param(request, "until", margin=-step)


def _case_page(request: HtmxHttpRequest, run: Run, filters: CaseFilters) -> Page[Any]:
    """One page of the case list: of case rows, or of case indices for a repeated run (one row
    per case, its repetitions under it: ``selectors.case_groups``)."""
    cases: QuerySet[CaseResult] = selectors.case_rows(run=run, filters=filters)
    return Paginator(_listed(run, cases), CASES_PER_PAGE).get_page(request.GET.get("page"))


def _listed(run: Run, cases: QuerySet[CaseResult]) -> QuerySet[Any, Any]:
    """What the case list counts and pages: the case rows, or a repeated run's case indices
    (one row per case, its repetitions under it)."""
    return selectors.case_group_indices(cases) if run.repeats > 1 else cases


def _case_rows_html(run: Run, case_page: Page[Any]) -> SafeString:
    """The rows of one page of the case list (``_case_page``)."""
    if run.repeats > 1:
        groups = selectors.case_groups(run=run, indices=case_page.object_list)
        return case_group_rows_html(groups, run_id=run.pk, stopping=run.is_stopping)
    return case_rows_html(case_page, run_id=run.pk, stopping=run.is_stopping)


def _case_query(filters: CaseFilters) -> str:
    """The case-list filters as a query-string prefix ("failures=1&q=abc&", or "")."""
    params = {"failures": "1"} if filters.failures else {}
    if filters.flaky:
        params["flaky"] = "1"
    if filters.outcome:
        params["outcome"] = filters.outcome
    if filters.metric:
        params["metric"] = filters.metric
    if filters.tools:
        params["tools"] = filters.tools
    params.update(_searches(filters))
    return f"{urlencode(params)}&" if params else ""


def _searches(filters: CaseFilters) -> dict[str, str]:
    """The case list's searches (a name, a text in the responses) as query parameters: what
    every filter link keeps."""
    params = {"q": filters.query} if filters.query else {}
    if filters.text:
        params["text"] = filters.text
    return params


def _case_list_context(request: HtmxHttpRequest, run: Run) -> dict[str, Any]:
    """The case list: its filters and one page of rows (two queries: a count and the page); a
    refused filter is left out and said at its field (``errors``). A repeated run's list counts
    and pages its cases, each row one case with its repetitions."""
    filters, errors = params_or_errors(request, _case_filters)
    case_page = _case_page(request, run, filters)
    remaining = case_page.paginator.count - case_page.end_index()
    query = filters.query
    links = _filter_links(run, filters)
    return {
        "run": run,
        "case_page": case_page,
        "case_rows_html": _case_rows_html(run, case_page),
        "filters": filters,
        "filter_links": links,
        "only_flaky": filters.flaky,
        "next_page_size": min(remaining, CASES_PER_PAGE),
        "only_failures": filters.failures,
        "query": query,
        "failures_query": _case_query(filters),
        "known_cases": case_page.paginator.count,
        "errors": errors,
        "bad_q": shown_value(request, "q", errors),
        "bad_text": shown_value(request, "text", errors),
        "empty_text": _empty_text(run, filters, links) if not case_page.paginator.count else "",
    }


def _empty_text(run: Run, filters: CaseFilters, links: list[FilterLink]) -> str:
    """What an empty case list says: what the searches found none of (and among which cases),
    else what the filter (of ``links``, the one on) found none of, else that no case has
    started."""
    filtered = filters.failures or filters.flaky or filters.outcome or filters.metric
    among = ""
    if filters.failures:
        among = " among the failures"
    elif filtered or filters.tools:
        among = " among these cases"
    if filters.query and filters.text:
        return (f"No case whose name contains “{filters.query}” has “{filters.text}” in a"
                f" response{among}.")  # fmt: skip
    if filters.query:
        return f"No case name contains “{filters.query}”{among}."
    if filters.text:
        return f"No case has “{filters.text}” in a response{among}."
    if run.is_live and not (filtered or filters.tools):
        return "No case has started yet."
    return " ".join(link.empty for link in links if link.on)


@dataclass(frozen=True)
class FilterLink:
    """One filter of the case toolbar: its words, its query string (the search kept), whether
    it is the one shown, and what the list says when no case passes it."""

    label: str
    query: str
    on: bool
    empty: str
    title: str = ""
    css: str = ""


def _filter_links(run: Run, filters: CaseFilters) -> list[FilterLink]:
    """The case toolbar's filters: all, only failures, errored only, not graded only, flaky
    only (a repeated run's), and the metric filter when one is given (the metric summary links
    each metric's failures to it)."""

    def url(**params: str) -> str:
        return urlencode({**_searches(filters), **params})

    unfiltered = not (
        filters.failures or filters.flaky or filters.outcome or filters.metric or filters.tools
    )
    links = [
        FilterLink("all", url(), unfiltered, "No cases."),
        FilterLink("only failures", url(failures="1"), filters.failures, "No failed cases.",
                   "cases that failed or errored"),
        FilterLink("errored only", url(outcome=Outcome.ERROR), filters.outcome == Outcome.ERROR,
                   "No case errored.", "cases with no answer to grade: the agent failed, timed"
                   " out, or its worker gave up", "filter-error"),
        FilterLink("not graded only", url(outcome=Outcome.NOT_GRADED),
                   filters.outcome == Outcome.NOT_GRADED, "No case could not be graded.",
                   "cases whose only failures are metrics that could not grade",
                   "filter-not-graded"),
        FilterLink("tool assertions failed", url(tools=Outcome.FAILED),
                   filters.tools == Outcome.FAILED, "No case failed a tool assertion.",
                   "cases with a turn whose tool assertions failed: a tool not called, or"
                   " called with other arguments", "filter-tools"),
    ]  # fmt: skip
    if filters.outcome not in ("", Outcome.ERROR, Outcome.NOT_GRADED):
        label = Outcome(filters.outcome).label
        links.append(FilterLink(f"{label} only", url(outcome=filters.outcome), True,
                                f"No case {label}."))  # fmt: skip
    if run.repeats > 1 or filters.flaky:
        links.append(
            FilterLink(
                "flaky only",
                url(flaky="1"),
                filters.flaky,
                "No flaky case: every case passed in all its graded repetitions or failed in"
                " all of them.",
                "cases that passed in some repetitions and failed in others",
                "filter-flaky",
            )
        )
    if filters.metric:
        links.append(
            FilterLink(
                f"{filters.metric} failed",
                url(metric=filters.metric),
                True,
                f"No case failed metric “{filters.metric}”.",
                f"cases with a turn that failed the metric {filters.metric}",
                "filter-metric",
            )
        )
    return links


def _case_filters(request: Query) -> CaseFilters:
    """The run page's case-list filters (``selectors.CaseFilters``): ``failures``, ``q``,
    ``flaky``, ``outcome`` (a stored verdict), ``metric`` (a metric's name), ``tools`` (a tool
    verdict: ``failed``) and ``text`` (a text in the responses)."""
    return CaseFilters(
        failures=flag_param(request, "failures"),
        query=text_param(request, "q"),
        flaky=flag_param(request, "flaky"),
        outcome=choice_param(request, "outcome", selectors.CASE_OUTCOMES),
        metric=text_param(request, "metric"),
        tools=choice_param(request, "tools", selectors.TOOL_VERDICTS),
        text=text_param(request, "text"),
    )


def _run_context(request: HtmxHttpRequest, run: Run) -> dict[str, Any]:
    return {
        **_case_list_context(request, run),
        **_run_state(run),
        # The poll's ``since``: rows started or finished after this render are swapped in.
        "poll_since": timezone.now().isoformat(),
        # The re-grade form's: a double submit answers with the first re-grade.
        "regrade_key": uuid.uuid4().hex,
    }


# While a run works, its live summary (counted over all its turns and metrics, tens of ms at
# 10,000 cases) is recounted by the poll at most this often per web process; the progress box's
# counters are always current, and a finished run shows its stored summary at once.
LIVE_SUMMARY_SECONDS = 5.0
_live_summaries: dict[uuid.UUID, tuple[float, RunSummary]] = {}
_live_summaries_lock = threading.Lock()


def _polled_summary(run: Run) -> RunSummary:
    if not run.is_live:
        return selectors.run_summary(run=run)
    now = time.monotonic()
    with _live_summaries_lock:
        cached = _live_summaries.get(run.uid)
    if cached is not None and now - cached[0] < LIVE_SUMMARY_SECONDS:
        return cached[1]
    summary = selectors.run_summary(run=run)
    with _live_summaries_lock:
        if len(_live_summaries) > 100:  # runs that ended while nobody polled them
            _live_summaries.clear()
        _live_summaries[run.uid] = (now, summary)
    return summary


_live_costs: dict[uuid.UUID, tuple[float, Priced]] = {}


def _polled_cost(run: Run) -> Priced:
    """The run's cost for the poll: recounted (over all its cases and judge metrics) at most
    every LIVE_SUMMARY_SECONDS while it runs, as the live summary is."""
    if not run.is_live:
        return run_cost(run=run)
    now = time.monotonic()
    with _live_summaries_lock:
        cached = _live_costs.get(run.uid)
    if cached is not None and now - cached[0] < LIVE_SUMMARY_SECONDS:
        return cached[1]
    cost = run_cost(run=run)
    with _live_summaries_lock:
        if len(_live_costs) > 100:  # runs that ended while nobody polled them
            _live_costs.clear()
        _live_costs[run.uid] = (now, cost)
    return cost


def _run_state(run: Run, *, polled: bool = False) -> dict[str, Any]:
    """What the header, the tiles and the progress box show of the run."""
    # A repeated run's stats per case ({}: each case ran once; no query then).
    repeated = selectors.case_repeat_stats(run=run)
    # Stored when the run ended; while it runs, live from its rows (the poll's at most
    # LIVE_SUMMARY_SECONDS old).
    summary = _polled_summary(run) if polled else selectors.run_summary(run=run)
    return {
        "run": run,
        "summary": summary,
        # Why it has its status, in words, each part linked to the cases it counts.
        "reason": selectors.run_status_reason_get(run=run, summary=summary),
        # The metric summary links each metric's failed count to its case filter.
        "metric_filter_url": reverse("run_detail", args=[run.pk]) + "?metric=",
        # The tool assertions tile links its failed count to their case filter.
        "tools_filter_url": reverse("run_detail", args=[run.pk]) + "?tools=failed",
        # Imported or scripted runs may record no usage at all: "–" rather than a fake 0.
        "has_tokens": bool(run.total_tokens or run.prompt_tokens or run.completion_tokens),
        "cost": _polled_cost(run) if polled else run_cost(run=run),
        # While it runs: the time since it started, as of this render (each poll renders anew).
        "elapsed_ms": _elapsed_ms(run),
        "version": run_version(run),
        # A repeated run's tile: flaky cases, pass@k and pass^k (None: each case ran once).
        "repeat_stats": run_repeat_stats(repeated, run.repeats) if repeated else None,
        # What it re-ran, its re-runs, its failed cases to re-run (the button's form's key).
        "rerun": run_rerun_state(run=run),
        "rerun_key": uuid.uuid4().hex,
    }


def _elapsed_ms(run: Run) -> int | None:
    if not run.is_live or run.started_at is None:
        return None
    return max(0, int((timezone.now() - run.started_at).total_seconds() * 1000))


def run_version(run: Run) -> str:
    """What the run's page shows of it changes when this does: its status and its counters
    (every case or turn written, every case settled moves one). The page sends it with each
    poll, and nothing is rendered while it is the same."""
    return f"{run.status}.{run.total_cases}.{run.cases_done}.{run.turns_done}"


@login_required
@require_GET
def run_detail(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get(run_id=run_id)
    if request.htmx and request.GET.get("page"):
        # "Load more": just the next page of case rows.
        return render(request, "runs/run_detail.html#case_rows", _case_list_context(request, run))
    if request.htmx and request.htmx.target == "case-list":
        # A filter or a search: the case list, and a live run's progress box (its poll takes
        # the new filters); not the header's reason, the tiles or the cost.
        context = _case_list_context(request, run) | {
            "poll_since": timezone.now().isoformat(),
            "version": run_version(run),
        }
        status = 400 if context["errors"] else 200
        return render(request, "runs/run_detail.html#case_list_response", context, status=status)
    context = _run_context(request, run)
    status = 400 if context["errors"] else 200
    return render(request, "runs/run_detail.html", context, status=status)


@login_required
@require_GET
def run_export(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run for download: ``?format=json`` (default) a HoloDeck-compatible result file (an
    EvalRun), ``markdown`` or ``junit`` (XML); the same text ``run_agent --output`` writes."""
    fmt = choice_param(request, "format", tuple(EXPORT_FORMATS)) or "json"
    return run_export_response(run_id=run_id, fmt=cast("ExportFormat", fmt))


@login_required
@require_GET
def run_progress(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """The polled progress fragment, plus out-of-band swaps of what changed since last poll.

    The page's poll carries ``v`` (the ``run_version`` it shows), ``since`` (server time of
    the render it comes from) and ``known`` (how many case rows the page lists). While the run's
    version is ``v``, nothing changed: 204, htmx swaps nothing and polls on (one small query).
    Otherwise the progress box and the tiles are rendered, the header when the status changed,
    and the case rows finished since ``since`` replace their rows; the whole case list (its first
    page) when rows appeared or disappeared, when more rows changed than a page holds, or once
    the run is no longer active — then status 286 stops the polling.
    """
    return _progress_response(request, run_id)


def _progress_response(
    request: HtmxHttpRequest, run_id: int, *, notice: Mapping[str, str] | None = None
) -> HttpResponse:
    """``run_progress``'s answer to the parameters of ``request.GET``; ``notice``: a message
    (its ``tags`` and ``text``) shown above the run's header."""
    filters = _case_filters(request)
    # A small overlap: a case finishing during the previous render is swapped twice, not never.
    since = datetime_param(request, "since", margin=timedelta(seconds=2))
    known = int_param(request, "known")
    shown = text_param(request, "v", max_length=100)
    progress = selectors.run_progress_get(run_id=run_id)
    if shown and shown == run_version(progress) and progress.is_live:
        return HttpResponse(status=204)
    run = selectors.run_get(run_id=run_id)
    rows = selectors.case_rows(run=run, filters=filters)
    count = _listed(run, rows).count()
    changed_html = None
    if since is not None and known == count and run.is_live:
        changed_html = _changed_rows_html(run, rows, since)
    if changed_html is None:
        cases = _case_list_context(request, run) | {"full_list": True}
    else:
        cases = {
            "changed_rows_html": changed_html,
            "failures_query": _case_query(filters),
            "known_cases": count,
        }
    context = {
        **cases,
        **_run_state(run, polled=True),
        "poll_since": timezone.now().isoformat(),
        "oob": True,
        # The status the page shows is the first part of its version (none: show the header);
        # the last poll draws it anew too (a stopped run's downloads and re-grade appear).
        "header_changed": shown.split(".", 1)[0] != run.status or not run.is_live,
        "notice": notice,
    }
    status = 200 if run.is_live else HTMX_STOP_POLLING
    return render(request, "runs/run_detail.html#progress_response", context, status=status)


def _changed_rows_html(run: Run, rows: QuerySet[CaseResult], since: datetime) -> str | None:
    """The rows of ``rows`` (the filtered case rows) that changed since ``since``, to swap in
    out of band (a repeated run's: the cases any repetition of which changed); None when more
    changed than a page holds (the whole list is drawn again instead)."""
    most = CASES_PER_PAGE + 1
    stopping = run.is_stopping
    if run.repeats > 1:
        groups = selectors.case_groups_changed_since(run=run, cases=rows, since=since, most=most)
        if len(groups) > CASES_PER_PAGE:
            return None
        return case_group_rows_html(groups, run_id=run.pk, oob=True, stopping=stopping)
    changed = selectors.case_rows_changed_since(rows=rows, since=since, most=most)
    if len(changed) > CASES_PER_PAGE:
        return None
    return case_rows_html(changed, run_id=run.pk, oob=True, stopping=stopping)


@staff_required
@require_POST
def run_cancel(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    from runs.services.launch import run_cancel as cancel_run

    run = selectors.run_row(run_id=run_id)
    cancelled = cancel_run(run=run)
    level = messages.SUCCESS if cancelled else messages.INFO
    text = f"Run {run.pk} cancelled." if cancelled else f"Run {run.pk} had already finished."
    if request.htmx:
        # In place (the form's hx-post): the page's progress box, header, tiles and case list
        # with its filters, as the poll draws them, and the message above the header; open
        # rows stay open (run_live.js) and the progress box polls on while the last cases stop.
        request.GET = _page_query(request)
        notice = {"tags": messages.DEFAULT_TAGS[level], "text": text}
        response = _progress_response(request, run.pk, notice=notice)
        response.status_code = 200  # not the poll's 286: this answer stops no poll
        return response
    messages.add_message(request, level, text)
    return HttpResponseRedirect(reverse("run_detail", kwargs={"run_id": run.pk}))


def _page_query(request: HtmxHttpRequest) -> _ImmutableQueryDict:
    """The query string of the page an htmx request came from (``HX-Current-URL``): its case
    list's filters; none when one of them is refused."""
    query = QueryDict(urlsplit(request.htmx.current_url or "").query)
    try:
        _case_filters(query)
    except BadRequest:
        return QueryDict()
    return query


@staff_required
@require_POST
def run_keep(request: HttpRequest, run_id: int) -> HttpResponse:
    """Keep the run from retention (``keep=1``) or let it go again (``keep=0``)."""
    from runs.services.retention import run_keep_set

    keep = request.POST.get("keep", "")
    if keep not in ("0", "1"):
        raise BadRequest("keep must be 0 or 1")
    run = run_keep_set(run=selectors.run_row(run_id=run_id), keep=keep == "1")
    kept = "is kept: retention will not delete it" if run.keep else "is no longer kept"
    messages.success(request, f"Run {run.pk} {kept}.")
    return HttpResponseRedirect(reverse("run_detail", kwargs={"run_id": run.pk}))


# --- cases ---------------------------------------------------------------------------------


@login_required
@require_GET
def case_turns(request: HttpRequest, run_id: int, case_id: int) -> HttpResponse:
    """The turns of one case: the fragment an expanded case row loads.

    While the case runs, the fragment polls itself with ``v`` (the ``case_version`` it shows):
    204 while that is the same, else the fragment again with the turns written since — and
    without the poll once the case has settled. ``whole=1`` is the case page's poll: once the
    case has settled the page reloads (``HX-Refresh``), since its header and tiles change too.
    """
    shown = text_param(request, "v", max_length=100)
    whole = flag_param(request, "whole")
    if shown:
        running, version = selectors.case_version_get(run_id=run_id, case_id=case_id)
        if version == shown:
            return HttpResponse(status=204)
        if whole and not running:
            return HttpResponse(headers={"HX-Refresh": "true"})
    case = selectors.case_get(run_id=run_id, case_id=case_id)
    # Several cases can be expanded on one page: their turn anchors must not collide (the case
    # page's own poll, ``whole``, keeps the page's plain anchors and its switcher's links).
    context = {
        **_case_turns_context(case, whole=whole),
        "anchor_prefix": "" if whole else f"case-{case.pk}-",
        "pricing": pricing_for(run_id=run_id),
    }
    return render(request, "runs/case_detail.html#case_turns", context)


def _case_turns_context(case: CaseResult, *, whole: bool = False) -> dict[str, Any]:
    """What the turns fragment needs besides its anchors and prices: while the case runs, the
    version it polls with and the turn it waits for."""
    written = len(case.turns.all())
    repeats = selectors.case_run_repeats(case)
    return {
        "case": case,
        "run": case.run,
        "case_live": case.status == RUNNING,
        "case_version": selectors.case_version(status=case.status, turns=written),
        "turn_running": written,  # the index of the turn being answered while it runs
        "whole": whole,
        **(_repetitions_context(case, repeats) if repeats > 1 else {}),
    }


def _repetitions_context(case: CaseResult, repeats: int) -> dict[str, Any]:
    """A repeated case's switcher (its repetitions) and its stats over them: per turn, and
    per metric its scores' mean and spread (three queries)."""
    turn_stats = selectors.turn_repeat_stats(case=case)
    return {
        "repeats": repeats,
        "repetitions": selectors.case_repetitions(case=case),
        "turn_stats": [(index, turn_stats[index]) for index in sorted(turn_stats)],
        "score_spreads": selectors.case_score_spreads(case=case),
    }


@login_required
@require_GET
def case_detail(request: HttpRequest, run_id: int, case_id: int) -> HttpResponse:
    """A stable page for one case, rendered expanded (anchors ``#turn-N`` point into it)."""
    case = selectors.case_get(run_id=run_id, case_id=case_id)
    context = {
        **_case_turns_context(case, whole=True),
        # Its run's cases, not their repetitions ("case 2 of 3" of a run of 3 cases × 5).
        "case_total": case.run.total_cases // selectors.case_run_repeats(case),
        "summary": selectors.case_summary(case=case),
        "anchor_prefix": "",
        "next_failed": selectors.next_failed_case(case=case),
        "pricing": pricing_for(run_id=run_id),
        # "Re-run this case" (staff's): its form's idempotency key, None when it cannot be.
        "rerun_case_key": uuid.uuid4().hex if run_rerunnable(case.run) else None,
    }
    return render(request, "runs/case_detail.html", context)


# --- errors --------------------------------------------------------------------------------


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """400 with the reason (a query parameter that failed validation says which and why)."""
    message = str(exception) if isinstance(exception, BadRequest) else ""
    if getattr(request, "htmx", False):
        return HttpResponse(message or "Bad request", status=400, content_type="text/plain")
    return render(request, "400.html", {"message": message}, status=400)
