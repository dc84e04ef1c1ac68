"""A compare as CSV, for the compare page's "Download CSV" link (``/compare/export.csv``, the
page's query string) and ``GET /api/v1/compare.csv``: one row per case and run
(``runs.core.comparison.csv_export``), streamed as it is read (``runs.compare.reads.export``).

It holds the compare page's runs (the baseline added to a lone run) and every case of them:
the page's row filters (show, q, min_drop, sort, page) choose what the page lists, not what the
file holds. ``kinds`` chooses the per-kind verdict columns (every kind by default) and the
metrics scored by default (those of the kinds); ``metric`` (repeated) chooses the metrics.
Each row has its case's tokens and cost, and per metric its score and its delta against the
baseline's (the compare page's baseline: ``baseline``, else the rule's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, StreamingHttpResponse
from django.views.decorators.http import require_GET

from runs.compare.pages.params import runs_query
from runs.compare.reads.comparison import NoBaseline, RunsMissing
from runs.compare.reads.export import export_cases, export_metric_names, export_runs
from runs.core.comparison.csv_export import csv_chunks
from runs.core.comparison.query import MAX_METRIC, ComparisonQuery
from runs.core.verdicts.kinds import KINDS
from runs.web.params import BadParam, Query, text_list_param

MOST_METRICS = 100  # metric= values in one request


@dataclass(frozen=True)
class CsvSettings:
    query: ComparisonQuery  # the runs, the baseline picked and the kinds
    metrics: list[str]  # empty: every metric of the runs (of the kinds)


class UnknownMetric(Exception):
    """A metric asked for is none of the runs'."""


@login_required
@require_GET
def compare_csv(request: HttpRequest) -> StreamingHttpResponse:
    settings = _csv_params(request)
    if not settings.query.run_ids:
        raise BadParam("runs", "?runs= takes the ids of the runs to compare")
    try:
        return compare_csv_response(settings)
    except RunsMissing as exc:
        raise Http404(str(exc)) from None
    except UnknownMetric as exc:
        raise BadParam("metric", str(exc)) from None


def _csv_params(request: Query) -> CsvSettings:
    return CsvSettings(
        query=runs_query(request),
        metrics=text_list_param(request, "metric", most=MOST_METRICS, max_length=MAX_METRIC),
    )


def compare_csv_response(settings: CsvSettings) -> StreamingHttpResponse:
    """The compare as a CSV attachment, streamed. Raises RunsMissing, UnknownMetric (before
    anything is streamed)."""
    baseline: int | None
    try:
        runs, baseline = export_runs(settings.query.run_ids, chosen=settings.query.chosen)
    except NoBaseline as exc:  # a lone run with nothing to compare it with: the run alone
        runs, baseline = [exc.run], None
    ids = [run.pk for run in runs]
    metrics = _metrics(ids, settings)
    kinds = settings.query.kinds or list(KINDS)
    response = StreamingHttpResponse(
        csv_chunks(export_cases(runs, metrics, baseline=baseline), kinds, metrics),
        content_type="text/csv; charset=utf-8",
    )
    filename = f"compare-runs-{'-'.join(map(str, ids))}.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _metrics(ids: Sequence[int], settings: CsvSettings) -> list[str]:
    if not settings.metrics:
        return export_metric_names(ids, settings.query.kinds)
    known = set(export_metric_names(ids))
    for metric in settings.metrics:
        if metric not in known:
            raise UnknownMetric(f"no metric “{metric[:60]}” in these runs")
    return settings.metrics
