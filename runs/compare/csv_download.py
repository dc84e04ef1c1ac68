"""A compare as a CSV download, streamed: the same response for the compare page's "Download
CSV" (``runs.compare.pages.download``) and ``GET /api/v1/compare.csv`` (``runs.compare.api``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.http import StreamingHttpResponse

from runs.compare.reads.comparison import NoBaseline
from runs.compare.reads.export import export_cases, export_metric_names, export_runs
from runs.core.comparison.csv_export import csv_chunks
from runs.core.comparison.query import ComparisonQuery
from runs.core.verdicts.kinds import KINDS

MOST_METRICS = 100  # metric= values in one request


@dataclass(frozen=True)
class CsvSettings:
    query: ComparisonQuery  # the runs, the baseline picked and the kinds
    metrics: list[str]  # empty: every metric of the runs (of the kinds)


class UnknownMetric(Exception):
    """A metric asked for is none of the runs'."""


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
