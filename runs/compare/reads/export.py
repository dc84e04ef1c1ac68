"""Reads for a compare's CSV (``runs.core.comparison.csv_export``): the runs the compare page shows,
in its column order, the metrics to score, and their cases a slice of case indexes at a time.

The runs are the compare page's (``runs_compared``: the baseline added to a lone run, oldest
first by ``runs_in_time_order``). The cases come in slices of consecutive case indexes, each
slice read with two queries (its cases, and their scores of the chosen metrics: range scans of
the case index) and handed out before the next is read: memory holds one slice (about
``SLICE_ROWS`` rows) whatever the compare's size, and the queries are bounded by ranges of
indexes, never by lists of ids.

Each row carries the case's agent tokens and its cost (``runs.core.pricing.prices``: the agent's
tokens at the run's agent model, each judge's at its model; a third query per slice reads the
slice's judge grades), people's reviews of the case and its turns (a fourth query per slice),
and the baseline run's scores of the same case for the score deltas: read once before the
first slice (one query, a score per case and metric of the baseline).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Avg, Max, Min, Q, TextField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from runs.compare.reads.comparison import runs_compared, runs_in_time_order
from runs.core.comparison.csv_export import CsvCase, CsvReview, CsvRun, CsvTokens
from runs.core.comparison.matrix import CaseData, case_verdict
from runs.core.pricing.prices import Cost, PriceTable, SplitCost, judge_cost, total, usage_cost
from runs.core.verdicts.kinds import TOOLS_KIND
from runs.models import CaseRow, MetricRow, Run, TurnRow
from runs.review_models import Review
from runs.selectors.compare_cases import KindsCache
from runs.selectors.costs import prices
from runs.selectors.runs import MODEL_NAME

SLICE_ROWS = 2000  # about how many case rows (of every run) one slice reads
NO_KINDS: frozenset[str] = frozenset()


def export_runs(run_ids: list[int], *, chosen: int | None = None) -> tuple[list[Run], int]:
    """The compared runs as the compare page lays them out, oldest first, and the baseline's id
    (raises RunsMissing and NoBaseline as ``comparison_for``; 2–4 queries and one git call)."""
    baseline, shown = runs_compared(run_ids, chosen=chosen)
    ordered, _ = runs_in_time_order(shown)
    return ordered, baseline.run.pk


def export_metric_names(run_ids: Sequence[int], kinds: Sequence[str] = ()) -> list[str]:
    """Every metric of the runs (of ``kinds``, when given), by name (1 query)."""
    rows = MetricRow.objects.filter(run_id__in=run_ids)
    if kinds:
        rows = rows.filter(kind__in=[kind for kind in kinds if kind != TOOLS_KIND])
    names = rows.order_by("metric_name").values_list("metric_name", flat=True).distinct()
    return list(names)


@dataclass
class _Export:
    """What every slice reads with: the runs' columns, agent models and the price table, the
    baseline's scores."""

    ids: list[int]
    shown: dict[int, CsvRun]
    column: dict[int, int]
    models: dict[int, str | None]
    table: PriceTable | None
    baseline: int | None
    base_scores: _BaselineScores
    kinds_of: KindsCache = field(default_factory=KindsCache)


def export_cases(
    runs: Sequence[Run], metrics: Sequence[str], *, baseline: int | None = None
) -> Iterator[CsvCase]:
    """Every case of ``runs`` (each repetition of a repeated one), by case index, then in the
    runs' order, then by repetition; with each chosen metric's score, the baseline's score of
    the same case, its tokens and cost (2 queries, a third for the baseline's scores, then 3
    per slice of indexes that holds cases)."""
    ids = [run.pk for run in runs]
    repeats, models = _runs_facts(ids)
    table = prices()
    export = _Export(
        ids=ids,
        shown={run.pk: CsvRun(run.pk, run.git_commit, run.git_subject) for run in runs},
        column={run.pk: position for position, run in enumerate(runs)},
        models=models,
        table=None if isinstance(table, str) else table,
        baseline=baseline if len(ids) > 1 else None,
        base_scores=_BaselineScores(),
    )
    bounds = CaseRow.objects.filter(run_id__in=ids).aggregate(low=Min("index"), high=Max("index"))
    if bounds["low"] is None:
        return
    if export.baseline is not None and metrics:
        export.base_scores = _baseline_scores(export.baseline, metrics)
    per_slice = max(1, SLICE_ROWS // (repeats or 1))
    for low in range(bounds["low"], bounds["high"] + 1, per_slice):
        yield from _slice(export, low, low + per_slice - 1, metrics)


def _slice(export: _Export, low: int, high: int, metrics: Sequence[str]) -> Iterator[CsvCase]:
    ids, column = export.ids, export.column
    rows = sorted(_slice_cases(ids, low, high), key=lambda r: (r[1], column[r[0]], r[2]))
    if not rows:
        return
    scores = _slice_scores(ids, low, high, metrics) if metrics else {}
    judges = _slice_judge_costs(ids, low, high, export.table) if export.table else {}
    reviews = _slice_reviews(ids, low, high)
    for run_id, index, repetition, name, status, outcome, text, turns, ms, case_id, usage in rows:
        kinds = export.kinds_of(text)
        data = CaseData(case_id, index, name, status, outcome or "", kinds)
        cost = None
        if export.table is not None:
            agent = usage_cost(usage, export.models.get(run_id), export.table)
            cost = SplitCost(agent, judges.get(case_id, Cost()))
        yield CsvCase(
            index=index,
            name=name,
            run=export.shown[run_id],
            repetition=repetition,
            outcome=case_verdict(data, NO_KINDS).value,
            kinds=kinds,
            turns=turns,
            execution_time_ms=ms,
            scores=scores.get(case_id, {}),
            tokens=_tokens(usage),
            cost=cost,
            baseline=None
            if run_id == export.baseline
            else export.base_scores.of(name, index, repetition),
            reviews=reviews.get(case_id, ()),
        )


def _slice_reviews(ids: list[int], low: int, high: int) -> dict[int, tuple[CsvReview, ...]]:
    """Case id -> people's reviews of it and its turns (reopened ones left out), the case's
    first, then by turn (1 query)."""
    rows = (
        Review.objects.filter(
            run_id__in=ids, case__index__gte=low, case__index__lte=high, reopened=False
        )
        .order_by()
        .values_list("case_id", "turn__index", "verdict", "category__name", "note")
    )
    found: dict[int, list[CsvReview]] = {}
    for case_id, turn, verdict, category, note in rows:
        found.setdefault(case_id, []).append(CsvReview(turn, verdict, category or "", note))
    return {
        case_id: tuple(sorted(listed, key=lambda r: -1 if r.turn is None else r.turn))
        for case_id, listed in found.items()
    }


def _runs_facts(ids: list[int]) -> tuple[int, dict[int, str | None]]:
    """How many case rows one case index has at most (a row per run, per repetition), and each
    run's agent model (1 query)."""
    rows = Run.objects.filter(pk__in=ids).values_list("pk", "repeats", KT(MODEL_NAME))
    repeats, models = 0, {}
    for run_id, run_repeats, model in rows:
        repeats += run_repeats
        models[run_id] = model or None
    return repeats, models


def _tokens(usage: Any) -> CsvTokens | None:
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    return CsvTokens(prompt, completion, usage.get("total_tokens") or prompt + completion)


@dataclass
class _BaselineScores:
    """The baseline's scores by case key (its name, ``#index`` unnamed), case index and
    repetition."""

    by_key: dict[str, dict[int, dict[int, dict[str, float]]]] = field(default_factory=dict)

    def add(self, name: str, index: int, repetition: int, metric: str, score: float) -> None:
        key = name or f"#{index}"
        found = self.by_key.setdefault(key, {}).setdefault(index, {})
        found.setdefault(repetition, {})[metric] = score

    def of(self, name: str, index: int, repetition: int) -> dict[str, float]:
        """The baseline's case of that name (its index, when the name is there more than once),
        at the same repetition, else its first; {} when it has no score."""
        cases = self.by_key.get(name or f"#{index}", {})
        reps = next(iter(cases.values())) if len(cases) == 1 else cases.get(index, {})
        if not reps:
            return {}
        return reps.get(repetition) or reps[min(reps)]


def _baseline_scores(baseline: int, metrics: Sequence[str]) -> _BaselineScores:
    """Each case of the baseline: the mean of its turns' stored scores per metric (1 query)."""
    rows = (
        TurnRow.objects.filter(
            run_id=baseline,
            metrics__metric_name__in=list(metrics),
            metrics__score__isnull=False,
        )
        .order_by()
        .values("case__name", "case__index", "case__repetition", "metrics__metric_name")
        .annotate(mean=Avg("metrics__score"))
        .values_list(
            "case__name", "case__index", "case__repetition", "metrics__metric_name", "mean"
        )
    )
    scores = _BaselineScores()
    for name, index, repetition, metric, mean in rows:
        if mean is not None:
            scores.add(name, index, repetition, metric, mean)
    return scores


def _slice_cases(ids: list[int], low: int, high: int) -> list[tuple[Any, ...]]:
    return list(
        CaseRow.objects.filter(run_id__in=ids, index__gte=low, index__lte=high)
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
            "token_usage",
        )
    )


def _slice_judge_costs(ids: list[int], low: int, high: int, table: PriceTable) -> dict[int, Cost]:
    """Case id -> what its judges cost, for the slice's cases (1 query)."""
    rows = (
        MetricRow.objects.filter(
            run_id__in=ids, turn__case__index__gte=low, turn__case__index__lte=high
        )
        .filter(Q(judge_usage__isnull=False) | Q(judge_cost_usd__isnull=False))
        .order_by()
        .values_list("turn__case_id", "model_used", "judge_usage", "judge_cost_usd")
    )
    costs: dict[int, list[Cost]] = {}
    for case_id, model, usage, recorded in rows:
        costs.setdefault(case_id, []).append(judge_cost(usage, model, recorded, table))
    return {case_id: total(found) for case_id, found in costs.items()}


def _slice_scores(
    ids: list[int], low: int, high: int, metrics: Sequence[str]
) -> dict[int, dict[str, float]]:
    """Case id -> metric -> the mean of its turns' stored scores, for the slice's cases."""
    rows = (
        TurnRow.objects.filter(
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
