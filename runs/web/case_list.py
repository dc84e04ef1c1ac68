"""The run page's case list: its filters (the toolbar's links, the searches), one page of rows,
and what it says when empty. The run page draws it, its poll and its "load more" too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from django.core.paginator import InvalidPage, Page, Paginator
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from runs import selectors
from runs.core.verdicts.outcomes import Outcome
from runs.selectors.cases import CaseFilters, MetricFailureList
from runs.selectors.reruns import run_rerunnable
from runs.selectors.review_panels import (
    DISAGREES,
    REVIEW_FILTERS,
    TRIAGED,
    UNTRIAGED,
    cases_by_review,
    review_list_count,
)
from runs.web.params import (
    Query,
    choice_param,
    flag_param,
    int_param,
    page_param,
    params_or_errors,
    shown_value,
    text_param,
)
from runs.web.row_html import case_group_rows_html, case_rows_html
from runs.web.views import CASES_PER_PAGE, HtmxHttpRequest

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from runs.models import CaseRow, Run


@dataclass(frozen=True)
class RunCaseFilters(CaseFilters):
    """The run page's case filters: the case list's (``selectors.CaseFilters``) and what people
    said of the cases' failing turns (``review``: untriaged, triaged, disagrees; the
    ``runs.selectors.review_panels`` filters)."""

    review: str = ""


def _case_page(request: HtmxHttpRequest, run: Run, filters: RunCaseFilters) -> Page[Any]:
    """One page of the case list: of case rows, or of case indices for a repeated run (one row
    per case, its repetitions under it: ``selectors.case_groups``)."""
    # A MetricFailureList pages as a query does (its count and slices).
    listed = _case_list(run, filters)
    paginator = Paginator(cast("QuerySet[Any, Any]", listed), CASES_PER_PAGE)
    if not filters.review:
        stored = selectors.list_count_stored(run=run, filters=filters)
    elif filters == RunCaseFilters(review=filters.review):
        stored = review_list_count(run=run, which=filters.review)  # from the reviews' side
    else:
        stored = None
    if stored is not None:  # a finished run's count under this filter, stored when it ended
        paginator.count = stored  # type: ignore[misc]
    after = int_param(request, "after")
    if after is None:
        return paginator.get_page(page_param(request, "page"))
    # "Load more" (keyset): the rows after the last one shown, read from the index where the
    # last page ended rather than counted past; ``page`` numbers what it says.
    try:
        number = paginator.validate_number(page_param(request, "page") or 2)
    except InvalidPage:  # a page past the last: numbered as the last
        number = paginator.num_pages
    following = (
        listed.after(after)
        if isinstance(listed, MetricFailureList)
        else (listed.filter(index__gt=after))
    )
    return Page(list(following[:CASES_PER_PAGE]), number, paginator)


def _case_list(run: Run, filters: RunCaseFilters) -> QuerySet[Any, Any] | MetricFailureList:
    """What the case list pages: the run's case rows (a repeated run's case indices) that pass
    ``filters``; a metric's failures alone through their own index."""
    if filters == RunCaseFilters(metric=filters.metric) and filters.metric:
        return selectors.MetricFailureList(run=run, metric=filters.metric)
    cases: QuerySet[CaseRow] = selectors.case_rows(run=run, filters=filters)
    cases = cases_by_review(cases, run=run, which=filters.review)
    return selectors.listed(run, cases)


def _last_index(case_page: Page[Any]) -> int | None:
    """The case index of the last row of ``case_page`` (a case row, or a repeated run's index)."""
    rows = list(case_page.object_list)
    if not rows:
        return None
    last = rows[-1]
    return last if isinstance(last, int) else int(last.index)


def _case_rows_html(run: Run, case_page: Page[Any]) -> SafeString:
    """The rows of one page of the case list (``_case_page``)."""
    if run.repeats > 1:
        groups = selectors.case_groups(run=run, indices=case_page.object_list)
        return case_group_rows_html(groups, run_id=run.pk, stopping=run.is_stopping)
    return case_rows_html(case_page, run_id=run.pk, stopping=run.is_stopping)


def case_query(filters: RunCaseFilters) -> str:
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
    if filters.review:
        params["review"] = filters.review
    params.update(_searches(filters))
    return f"{urlencode(params)}&" if params else ""


def _searches(filters: RunCaseFilters) -> dict[str, str]:
    """The case list's searches (a name, a text in the responses) as query parameters: what
    every filter link keeps."""
    params = {"q": filters.query} if filters.query else {}
    if filters.text:
        params["text"] = filters.text
    return params


def case_list_context(request: HtmxHttpRequest, run: Run) -> dict[str, Any]:
    """The case list: its filters and one page of rows (two queries: a count and the page); a
    refused filter is left out and said at its field (``errors``). A repeated run's list counts
    and pages its cases, each row one case with its repetitions."""
    filters, errors = params_or_errors(request, case_filters)
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
        # The last row's case index: "load more" reads the rows after it (keyset).
        "after_index": _last_index(case_page),
        "only_failures": filters.failures,
        "query": query,
        "failures_query": case_query(filters),
        # A filtered list's cases can be replayed with changes (runs.web.replays).
        "replayable": run_rerunnable(run),
        "known_cases": case_page.paginator.count,
        "errors": errors,
        "bad_q": shown_value(request, "q", errors),
        "bad_text": shown_value(request, "text", errors),
        "empty_text": _empty_text(run, filters, links) if not case_page.paginator.count else "",
    }


def _empty_text(run: Run, filters: RunCaseFilters, links: list[FilterLink]) -> str:
    """What an empty case list says: what the searches found none of (and among which cases),
    else what the filter (of ``links``, the one on) found none of, else that no case has
    started."""
    filtered = (
        filters.failures or filters.flaky or filters.outcome or filters.metric or filters.review
    )
    among = ""
    if filters.failures:
        among = " among the failures"
    elif filtered or filters.tools:
        among = " among these cases"
    if filters.query and filters.text:
        return (f"No case whose name contains “{filters.query}” has “{filters.text}” in a"
                f" response or transcript{among}.")  # fmt: skip
    if filters.query:
        return f"No case name contains “{filters.query}”{among}."
    if filters.text:
        return f"No case has “{filters.text}” in a response or transcript{among}."
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


def _filter_links(run: Run, filters: RunCaseFilters) -> list[FilterLink]:
    """The case toolbar's filters: all, only failures, errored only, not graded only, flaky
    only (a repeated run's), and the metric filter when one is given (the metric summary links
    each metric's failures to it)."""

    def url(**params: str) -> str:
        return urlencode({**_searches(filters), **params})

    unfiltered = not _filtered(filters)
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
    if run.project_id is not None and not run.is_live:
        links.extend(_review_links(url, filters.review))
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


def _filtered(filters: RunCaseFilters) -> bool:
    """Some filter narrows the list (the searches aside)."""
    return bool(
        filters.failures or filters.flaky or filters.outcome or filters.metric or filters.tools
    ) or bool(filters.review)


def _review_links(url: Any, review: str) -> list[FilterLink]:
    """The filters by what people said of the failing turns (their reviews)."""
    return [
        FilterLink("untriaged", url(review=UNTRIAGED), review == UNTRIAGED,
                   "Every failing turn of this run is triaged.",
                   "cases with a failing turn no one has triaged yet (people's reviews)",
                   "filter-review"),
        FilterLink("triaged", url(review=TRIAGED), review == TRIAGED,
                   "No case has all its failing turns triaged.",
                   "cases whose failing turns people have all triaged", "filter-review"),
        FilterLink("human disagrees", url(review=DISAGREES), review == DISAGREES,
                   "No reviewer disagrees with the machine's verdict in this run.",
                   "cases with a review saying the verdict should have been the other one",
                   "filter-review"),
    ]  # fmt: skip


def case_filters(request: Query) -> RunCaseFilters:
    """The run page's case-list filters (``selectors.CaseFilters``): ``failures``, ``q``,
    ``flaky``, ``outcome`` (a stored verdict), ``metric`` (a metric's name), ``tools`` (a tool
    verdict: ``failed``) and ``text`` (a text in the responses); and ``review`` (what people
    said: ``untriaged``, ``triaged``, ``disagrees``)."""
    return RunCaseFilters(
        failures=flag_param(request, "failures"),
        query=text_param(request, "q"),
        flaky=flag_param(request, "flaky"),
        outcome=choice_param(request, "outcome", selectors.CASE_OUTCOMES),
        metric=text_param(request, "metric"),
        tools=choice_param(request, "tools", selectors.TOOL_VERDICTS),
        text=text_param(request, "text"),
        review=choice_param(request, "review", REVIEW_FILTERS),
    )
