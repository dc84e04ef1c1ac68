"""The runs page: every run, filtered and paged."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.dateparse import parse_date
from django.views.decorators.http import require_GET

from runs import selectors
from runs.web.params import (
    BadParam,
    Query,
    choice_param,
    datetime_param,
    float_param,
    int_param,
    page_param,
    params_or_errors,
    shown_value,
    text_param,
)
from runs.web.views import RUNS_PER_PAGE


@login_required
@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    # A refused filter value shows the form again with the message next to its field (400),
    # and no runs: a list without that filter would read as its answer.
    filters, errors = params_or_errors(request, _run_list_filters)
    page = None
    if not errors:
        runs = selectors.run_list(filters=filters)
        page = Paginator(runs, RUNS_PER_PAGE).get_page(page_param(request, "page"))
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
