"""The one read of a compare's rows: the compare page and ``GET /api/v1/compare`` both ask
``compare_rows`` with a ``ComparisonQuery`` (``runs.core.comparison.query``), so they keep the same
rows, in the same order, for the same options.

The comparison itself is ``comparison_for`` (5–7 queries); a chosen metric adds the cases'
scores (1 query) and, with a repeated run among them, whether each case's score changed
significantly over its repetitions; a search adds the turns where the text occurs (1 query).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from django.db.models import Avg, Q

from runs.compare.reads.comparison import (
    Baseline,
    Comparison,
    Headline,
    comparison_for,
)
from runs.compare.reads.tally import PagedRows, comparison_tallied
from runs.core.comparison.matrix import Row
from runs.core.comparison.query import (
    ComparisonQuery,
    attach_hits,
    attach_scores,
    checked,
    rows_dropping,
    rows_matching,
    select_rows,
    sort_rows,
)
from runs.core.stats.significance import ScoreResult, classify_score_changes
from runs.models import TurnRow
from runs.selectors.calibration import metric_agreements


@dataclass(frozen=True)
class ComparedRows:
    """A compare's runs and the rows its query keeps, in its order."""

    baseline: Baseline
    comparison: Comparison
    query: ComparisonQuery  # as the runs take it: a refused setting left out
    rows: Sequence[Row]
    errors: dict[str, str]  # parameter -> why the runs refuse it (empty when none)


def compare_rows(query: ComparisonQuery) -> ComparedRows:
    """The comparison of ``query.run_ids`` and the rows ``query`` keeps. Raises ``RunsMissing``
    and ``NoBaseline`` as ``comparison_for``; a setting the runs refuse (``checked``) is left
    out and said in ``errors``. Every row in the runs' order, of finished runs: tallied by the
    database and read per slice (``runs.compare.reads.tally``)."""
    read = comparison_tallied if every_row(query) else comparison_for
    baseline, comparison = read(
        query.run_ids, chosen=query.chosen, kinds=query.kinds, order=query.order
    )
    query, errors = checked(query, comparison.metric_names)
    if isinstance(comparison.matrix.rows, PagedRows):
        return ComparedRows(baseline, comparison, query, comparison.matrix.rows, errors)
    return ComparedRows(baseline, comparison, query, rows_of(comparison, query), errors)


def every_row(query: ComparisonQuery) -> bool:
    """The query keeps every row in the runs' order, and reads no metric nor search."""
    return (
        query.show == "all"
        and query.sort == "case"
        and not query.metric
        and not query.q
        and query.min_drop is None
    )


def rows_of(comparison: Comparison, query: ComparisonQuery) -> list[Row]:
    """The matrix's rows the query keeps, in its order: with a metric, each row carries its
    cases' scores and deltas (1 query); with a search, only the rows where the text occurs
    (1 query)."""
    matrix = comparison.matrix
    if query.metric:
        samples = case_score_samples(matrix.run_ids, query.metric)
        attach_scores(matrix, {case_id: fmean(scores) for case_id, scores in samples.items()})
        if comparison.significance:  # repeated runs: is each case's score change real?
            comparison.score_significance = _score_significance(comparison, samples)
    if query.q:
        attach_hits(matrix, turn_hits(matrix.run_ids, query.q))
    rows = select_rows(matrix.rows, query.show)
    if query.q:
        rows = rows_matching(rows)
    if query.min_drop is not None:
        rows = rows_dropping(rows, query.min_drop)
    return sort_rows(rows, query.sort)


def _score_significance(
    comparison: Comparison, samples: dict[int, list[float]]
) -> dict[int, dict[str, ScoreResult]]:
    """Per run, each case's scores over its repetitions against the compared run's
    (Mann–Whitney, Benjamini–Hochberg over the cases; ``runs.core.stats.significance``)."""
    found = {}
    for run_id, other in comparison.matrix.against.items():
        units = {
            row.key: (samples[row.case_ids[other]], samples[row.case_ids[run_id]])
            for row in comparison.matrix.rows
            if row.case_ids.get(other) in samples and row.case_ids.get(run_id) in samples
        }
        found[run_id] = classify_score_changes(units)
    return found


def metric_agreement_texts(headlines: Sequence[Headline]) -> dict[str, str]:
    """Per metric of the runs, how it agrees with the people who reviewed its turns in the
    runs' projects (``runs.selectors.calibration``; one query), for metrics with reviewed
    turns: the headline says it beside the metric's name."""
    found = metric_agreements(
        project_ids=[h.run.project_id for h in headlines if h.run.project_id is not None],
        metric_names={metric.name for h in headlines for metric in h.metrics},
    )
    return {name: agreement.summary for name, agreement in found.items() if agreement.n}


def case_score_samples(run_ids: list[int], metric: str) -> dict[int, list[float]]:
    """Case id (a repeated case's first repetition's) -> the case's score of ``metric`` in each
    of its repetitions that has one (one value without repeats; 1 query)."""
    # From the turns (their covering index holds run and case), then each turn's metrics by
    # the turn: cheaper than from the metrics, whose turn must then be read for its case.
    rows = (
        TurnRow.objects.filter(
            run_id__in=run_ids, metrics__metric_name=metric, metrics__score__isnull=False
        )
        .order_by()
        .values("case_id", "run_id", "case__index", "case__repetition")
        .annotate(mean=Avg("metrics__score"))
        .values_list("case_id", "run_id", "case__index", "case__repetition", "mean")
    )
    first: dict[tuple[int, int], int] = {}
    values: dict[tuple[int, int], list[float]] = defaultdict(list)
    for case_id, run_id, index, repetition, mean in rows:
        if mean is None:
            continue
        if repetition == 0:
            first[(run_id, index)] = case_id
        values[(run_id, index)].append(mean)
    return {first[unit]: scores for unit, scores in values.items() if unit in first}


def turn_hits(run_ids: list[int], text: str) -> dict[int, set[int]]:
    """Case id -> the indexes of its turns whose input or response holds ``text``, case
    folded as the database does (``icontains``; SQLite folds ASCII letters only) (1 query)."""
    rows = (
        TurnRow.objects.filter(run_id__in=run_ids)
        .filter(Q(input__icontains=text) | Q(response__icontains=text))
        .order_by()
        .values_list("case_id", "index")
    )
    hits: dict[int, set[int]] = defaultdict(set)
    for case_id, index in rows:
        hits[case_id].add(index)
    return dict(hits)
