"""Reads for a compare's CSV (``runs.writers.compare_csv``): the runs the compare page shows,
in its column order, the metrics to score, and their cases a slice of case indexes at a time.

The runs are the compare page's (``runs_compared``: the baseline added to a lone run, oldest
first by ``runs_in_time_order``). The cases come in slices of consecutive case indexes, each
slice read with two queries (its cases, and their scores of the chosen metrics: range scans of
the case index) and handed out before the next is read: memory holds one slice (about
``SLICE_ROWS`` rows) whatever the compare's size, and the queries are bounded by ranges of
indexes, never by lists of ids.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from django.db.models import Avg, Max, Min, TextField
from django.db.models.functions import Cast

from runs.comparison.matrix import CaseData, case_verdict
from runs.models import CaseResult, MetricResult, Run, TurnResult
from runs.selectors.compare import runs_compared, runs_in_time_order
from runs.selectors.compare_cases import KindsCache
from runs.verdicts.kinds import TOOLS_KIND
from runs.writers.compare_csv import CsvCase, CsvRun

SLICE_ROWS = 2000  # about how many case rows (of every run) one slice reads
NO_KINDS: frozenset[str] = frozenset()


def export_runs(run_ids: list[int], *, chosen: int | None = None) -> list[Run]:
    """The compared runs as the compare page lays them out, oldest first (raises RunsMissing
    and NoBaseline as ``comparison_for``; 2–4 queries and one git call)."""
    _, shown = runs_compared(run_ids, chosen=chosen)
    ordered, _ = runs_in_time_order(shown)
    return ordered


def export_metric_names(run_ids: Sequence[int], kinds: Sequence[str] = ()) -> list[str]:
    """Every metric of the runs (of ``kinds``, when given), by name (1 query)."""
    rows = MetricResult.objects.filter(run_id__in=run_ids)
    if kinds:
        rows = rows.filter(kind__in=[kind for kind in kinds if kind != TOOLS_KIND])
    names = rows.order_by("metric_name").values_list("metric_name", flat=True).distinct()
    return list(names)


def export_cases(runs: Sequence[Run], metrics: Sequence[str]) -> Iterator[CsvCase]:
    """Every case of ``runs`` (each repetition of a repeated one), by case index, then in the
    runs' order, then by repetition; with each chosen metric's score (2 queries, then 2 per
    slice of indexes that holds cases)."""
    ids = [run.pk for run in runs]
    column = {run.pk: position for position, run in enumerate(runs)}
    shown = {run.pk: CsvRun(run.pk, run.git_commit, run.git_subject) for run in runs}
    per_slice = max(1, SLICE_ROWS // _rows_per_index(ids))
    bounds = CaseResult.objects.filter(run_id__in=ids).aggregate(
        low=Min("index"), high=Max("index")
    )
    if bounds["low"] is None:
        return
    kinds_of = KindsCache()
    for low in range(bounds["low"], bounds["high"] + 1, per_slice):
        high = low + per_slice - 1
        rows = sorted(_slice_cases(ids, low, high), key=lambda r: (r[1], column[r[0]], r[2]))
        scores = _slice_scores(ids, low, high, metrics) if metrics and rows else {}
        for run_id, index, repetition, name, status, outcome, text, turns, ms, case_id in rows:
            kinds = kinds_of(text)
            data = CaseData(case_id, index, name, status, outcome or "", kinds)
            yield CsvCase(
                index=index,
                name=name,
                run=shown[run_id],
                repetition=repetition,
                outcome=case_verdict(data, NO_KINDS).value,
                kinds=kinds,
                turns=turns,
                execution_time_ms=ms,
                scores=scores.get(case_id, {}),
            )


def _rows_per_index(ids: list[int]) -> int:
    """How many case rows one case index has at most: a row per run, per repetition (1 query)."""
    return sum(Run.objects.filter(pk__in=ids).values_list("repeats", flat=True)) or 1


def _slice_cases(ids: list[int], low: int, high: int) -> list[tuple[Any, ...]]:
    return list(
        CaseResult.objects.filter(run_id__in=ids, index__gte=low, index__lte=high)
        .order_by()
        .annotate(kinds_text=Cast("kind_outcomes", TextField()))
        .values_list(
            "run_id",
            "index",
            "repetition",
            "name",
            "status",
            "outcome",
            "kinds_text",
            "turn_count",
            "execution_time_ms",
            "id",
        )
    )


def _slice_scores(
    ids: list[int], low: int, high: int, metrics: Sequence[str]
) -> dict[int, dict[str, float]]:
    """Case id -> metric -> the mean of its turns' stored scores, for the slice's cases."""
    rows = (
        TurnResult.objects.filter(
            run_id__in=ids,
            case__index__gte=low,
            case__index__lte=high,
            metrics__metric_name__in=list(metrics),
            metrics__score__isnull=False,
        )
        .order_by()
        .values("case_id", "metrics__metric_name")
        .annotate(mean=Avg("metrics__score"))
        .values_list("case_id", "metrics__metric_name", "mean")
    )
    scores: dict[int, dict[str, float]] = {}
    for case_id, metric, mean in rows:
        if mean is not None:
            scores.setdefault(case_id, {})[metric] = mean
    return scores
