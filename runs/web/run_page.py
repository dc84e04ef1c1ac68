"""The run page: its header, tiles and case list, the poll that keeps a live run's page current,
and what staff do on it (cancel, keep); its download."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from runs import selectors
from runs.core.reviewing.vocabulary import Role
from runs.core.verdicts.repeats import RunRepeatStats, run_repeat_stats
from runs.core.verdicts.summary import RunSummary
from runs.selectors.costs import Priced, run_cost
from runs.selectors.replays import run_replay_line
from runs.selectors.reruns import run_rerun_state, run_rerunnable
from runs.services.launch import run_cancel as cancel_run
from runs.services.retention import run_keep_set
from runs.shared.downloads import EXPORT_FORMATS, run_export_response
from runs.web.case_list import case_filters, case_list_context, case_query
from runs.web.params import choice_param, datetime_param, int_param, text_param
from runs.web.row_html import case_group_rows_html, case_rows_html
from runs.web.views import (
    CASES_PER_PAGE,
    HTMX_STOP_POLLING,
    HtmxHttpRequest,
    project_of_run,
    role_required,
    run_page_redirect,
)

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from django.http.request import _ImmutableQueryDict

    from runs.core.writers.results import ExportFormat
    from runs.models import CaseRow, Run


def _run_context(request: HtmxHttpRequest, run: Run) -> dict[str, Any]:
    return {
        **case_list_context(request, run),
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
_live_lock = threading.Lock()


class _LiveCache[T]:
    """The last value counted of each live run, and when: what the poll shows again while it
    is less than LIVE_SUMMARY_SECONDS old."""

    def __init__(self, count: Callable[[Run], T]) -> None:
        self.count = count
        self.values: dict[uuid.UUID, tuple[float, T]] = {}

    def get(self, run: Run) -> T:
        return self.got(run)[0]

    def got(self, run: Run) -> tuple[T, bool]:
        """The value, and whether it was counted just now (not an earlier poll's)."""
        if not run.is_live:
            return self.count(run), True
        now = time.monotonic()
        with _live_lock:
            cached = self.values.get(run.uid)
        if cached is not None and now - cached[0] < LIVE_SUMMARY_SECONDS:
            return cached[1], False
        value = self.count(run)
        with _live_lock:
            if len(self.values) > 100:  # runs that ended while nobody polled them
                self.values.clear()
            self.values[run.uid] = (now, value)
        return value, True


_polled_summary = _LiveCache[RunSummary](lambda run: selectors.run_summary(run=run)).got
# The run's cost for the poll: recounted (over all its cases and judge metrics) as often as
# the live summary is.
_polled_cost = _LiveCache[Priced](lambda run: run_cost(run=run)).get


def _run_state(run: Run, *, polled: bool = False) -> dict[str, Any]:
    """What the header, the tiles and the progress box show of the run."""
    # Stored when the run ended; while it runs, live from its rows (the poll's metrics at most
    # LIVE_SUMMARY_SECONDS old, its cases and turns counted now: the tiles and the progress
    # box read the same counts, which add up).
    summary, fresh = _polled_summary(run) if polled else (selectors.run_summary(run=run), True)
    summary = summary if fresh else selectors.run_summary_now(run=run, summary=summary)
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
        "repeat_stats": _repeat_stats(run),
        # What it re-ran, its re-runs, its failed cases to re-run (the button's form's key).
        # HoloDeck's own summary of the result file counts the cases that ran, passed or not.
        **_holodeck_counts(summary),
        "rerun": run_rerun_state(run=run),
        "rerun_key": uuid.uuid4().hex,
        # What a replay changed (None: no replay), and whether this run can be replayed.
        "replay": run_replay_line(run=run),
        "replayable": run_rerunnable(run),
    }


def _repeat_stats(run: Run) -> RunRepeatStats | None:
    """A repeated run's tile: stored when it ended, else counted from its rows (one query);
    None for a run that ran each case once (no query)."""
    if run.repeats == 1:
        return None
    stored = selectors.repeats_stored(run=run)
    if stored is not None:
        return stored
    repeated = selectors.case_repeat_stats(run=run)
    return run_repeat_stats(repeated, run.repeats, live=run.is_live) if repeated else None


def _holodeck_counts(summary: RunSummary) -> dict[str, int]:
    """What HoloDeck's ``ReportSummary`` of the run's result file says: its results are the
    cases that ran (not the cancelled ones); every one that did not pass is "failed"."""
    cases = summary.cases
    ran = cases.done - cases.cancelled
    return {"holodeck_total": ran, "holodeck_failed": ran - cases.passed}


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
        return render(request, "runs/run_detail.html#case_rows", case_list_context(request, run))
    if request.htmx and request.htmx.target == "case-list":
        # A filter or a search: the case list, and a live run's progress box (its poll takes
        # the new filters); not the header's reason, the tiles or the cost.
        context = case_list_context(request, run) | {
            "poll_since": timezone.now().isoformat(),
            "version": run_version(run),
            # The progress box's counts (its metrics are not shown there).
            "summary": selectors.run_summary_now(run=run, summary=RunSummary.empty()),
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
    filters = case_filters(request)
    # A small overlap: a case finishing during the previous render is swapped twice, not never.
    since = datetime_param(request, "since", margin=timedelta(seconds=2))
    known = int_param(request, "known")
    shown = text_param(request, "v", max_length=100)
    progress = selectors.run_progress_get(run_id=run_id)
    if shown and shown == run_version(progress) and progress.is_live:
        return HttpResponse(status=204)
    run = selectors.run_get(run_id=run_id)
    rows = selectors.case_rows(run=run, filters=filters)
    changed_html, count = None, None
    # While it runs, the rows that changed since the page's render replace theirs, when the
    # page lists as many rows as there are; once it has ended, the whole list is drawn.
    if since is not None and run.is_live:
        count = selectors.listed(run, rows).count()
        if known == count:
            changed_html = _changed_rows_html(run, rows, since)
    if changed_html is None:
        cases = case_list_context(request, run) | {"full_list": True}
    else:
        cases = {
            "changed_rows_html": changed_html,
            "failures_query": case_query(filters),
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


def _changed_rows_html(run: Run, rows: QuerySet[CaseRow], since: datetime) -> str | None:
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


@role_required(Role.RUNNER, action="cancel runs", project_of=project_of_run)
@require_POST
def run_cancel(request: HtmxHttpRequest, run_id: int) -> HttpResponse:

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
    return run_page_redirect(run.pk)


def _page_query(request: HtmxHttpRequest) -> _ImmutableQueryDict:
    """The query string of the page an htmx request came from (``HX-Current-URL``): its case
    list's filters; none when one of them is refused."""
    query = QueryDict(urlsplit(request.htmx.current_url or "").query)
    try:
        case_filters(query)
    except BadRequest:
        return QueryDict()
    return query


@role_required(Role.RUNNER, action="keep runs", project_of=project_of_run)
@require_POST
def run_keep(request: HttpRequest, run_id: int) -> HttpResponse:
    """Keep the run from retention (``keep=1``) or let it go again (``keep=0``)."""

    keep = request.POST.get("keep", "")
    if keep not in ("0", "1"):
        raise BadRequest("keep must be 0 or 1")
    run = run_keep_set(run=selectors.run_row(run_id=run_id), keep=keep == "1")
    kept = "is kept: retention will not delete it" if run.keep else "is no longer kept"
    messages.success(request, f"Run {run.pk} {kept}.")
    return run_page_redirect(run.pk)
