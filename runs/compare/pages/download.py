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

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, StreamingHttpResponse
from django.views.decorators.http import require_GET

from runs.compare.csv_download import MOST_METRICS, CsvSettings, UnknownMetric, compare_csv_response
from runs.compare.pages.params import runs_query
from runs.compare.reads.comparison import RunsMissing
from runs.core.comparison.query import MAX_METRIC
from runs.web.params import BadParam, Query, text_list_param


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
