"""Compare: the compare page's data (headline, regressions and fixes by kind, the matrix).

Each run's headline carries its summary (``RunSummary``, the run page's numbers: cases and
turns by outcome, the pass rate, per metric the turns it graded), whatever the kind filter;
``kind_pass_rate`` is the one number the filter changes. Matrix cells are outcomes
(``runs.core.verdicts.outcomes.Outcome``): the stored verdict, ``pending``, ``absent`` or ``none``.

``order=commits`` lays the runs out oldest first, each compared with the one before it (as the
page's chronological mode); ``metric`` adds each row's scores and deltas of that metric; ``q``
keeps the rows where a text occurs in a turn's input or response.

``GET /compare.csv`` is the compare as CSV, one row per case and run (the compare page's
"Download CSV"; ``runs.compare.csv_download``).
"""

from typing import Annotated, Any, Literal

from django.http import HttpRequest
from django.http.response import HttpResponseBase
from ninja import Field, Query, Router, Schema
from ninja.errors import HttpError
from pydantic import BeforeValidator

from runs.api.schemas import Id, SafeText, responses
from runs.compare.csv_download import (
    MOST_METRICS,
    CsvSettings,
    UnknownMetric,
    compare_csv_response,
)
from runs.compare.reads.compared_rows import compare_rows
from runs.compare.reads.comparison import Comparison, Headline, NoBaseline, RunsMissing
from runs.core.comparison.matrix import Row
from runs.core.comparison.query import MAX_RUNS, SHOW_ALIASES, ComparisonQuery
from runs.core.pricing.prices import Cost, SplitCost
from runs.core.verdicts.kinds import KINDS, MetricKind
from runs.core.verdicts.regrades import RegradeSources
from runs.core.verdicts.summary import RunSummary
from runs.selectors.significance import RunSignificance

router = Router(tags=["compare"])

# ``runs.core.comparison.matrix.ORDERS`` as a type (a test checks they agree).
Order = Literal["baseline", "commits"]
# ``runs.core.comparison.query.SHOWS`` and its alias, as on the compare page.
Show = Literal["all", "regressions", "fixes", "unstable", "changed", "partial", "flaky"]
# ``runs.core.comparison.query.SORTS`` as a type (a test checks they agree).
Sort = Literal["case", "regressions", "name", "delta"]
# ``runs.core.verdicts.kinds.KINDS`` as a type, so the schema validates and documents it (a test
# checks they agree).
Kind = Literal[MetricKind, "tools"]


def comma_separated(value: Any) -> Any:
    """``runs=7,8,9`` as ``runs=7&runs=8&runs=9``: the compare page takes both forms, and so
    does the API (empty parts dropped)."""
    items = value if isinstance(value, list) else [value]
    split: list[Any] = []
    for item in items:
        if isinstance(item, str):
            split += [part.strip() for part in item.split(",") if part.strip()]
        else:
            split.append(item)
    return split


# Run ids and kinds, repeated or comma-separated (a metric's name may hold a comma: never split).
RunIds = Annotated[list[Id], BeforeValidator(comma_separated)]
Kinds = Annotated[list[Kind], BeforeValidator(comma_separated)]


class RunsQuery(Schema):
    """The runs compared, and the baseline picked: what the compare and its CSV both take."""

    runs: RunIds = Field(
        ...,
        min_length=1,
        max_length=MAX_RUNS,
        description="run ids, repeated (runs=7&runs=8) or comma-separated (runs=7,8); one: "
        "with its baseline",
    )
    baseline: Id | None = None


class CompareQuery(RunsQuery):
    kinds: Kinds = Field(
        default_factory=list, description="repeated (kinds=a&kinds=b) or comma-separated"
    )
    order: Order = Field(
        default="baseline",
        description="the runs are listed oldest first (commit order, else date) either way; "
        "baseline: every run against the baseline; commits: each against the one before it",
    )
    show: Show = Field(
        default="all",
        description="the rows the compare page's show= keeps: regressions (a turn graded "
        "passed in the compared run failed or errored; with repeats, only significant ones), "
        "fixes, unstable, changed (any verdict differs from the compared run's, or not in "
        "every run), partial",
    )
    sort: Sort = Field(
        default="case",
        description="the rows' order, as the compare page's sort=: case (the runs' order), "
        "regressions (most first), name, delta (the metric's largest drop first; needs metric)",
    )
    metric: SafeText | None = Field(
        default=None,
        description="a metric of the runs: each row gets its cases' scores (the mean of their "
        "turns' stored scores) and their deltas against the compared run's",
    )
    min_drop: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="keep the rows where the metric's score fell by at least this much against "
        "the compared run's, as the compare page's min_drop= (needs metric)",
    )
    q: SafeText | None = Field(
        default=None,
        description="keep the rows where this text occurs in a turn's input or response in one "
        "of the runs (case-insensitive); each row says in which turns (hits)",
    )
    offset: int = Field(default=0, ge=0, le=10_000_000)
    limit: int = Field(default=500, ge=1, le=5000, description="matrix rows")

    def comparison_query(self) -> ComparisonQuery:
        """The compare page's query of these parameters (``runs.core.comparison.query``)."""
        return ComparisonQuery(
            run_ids=list(dict.fromkeys(self.runs)),
            chosen=self.baseline,
            kinds=[kind for kind in KINDS if kind in self.kinds],
            order=self.order,
            show=SHOW_ALIASES.get(self.show, self.show),
            sort=self.sort,
            metric=self.metric or "",
            min_drop=self.min_drop,
            q=self.q or "",
        )


class BaselineOut(Schema):
    run_id: int
    rule: str
    added: bool


class CostPartOut(Schema):
    usd: float | None = Field(
        description="USD; null when a model has no price (then unpriced names it)"
    )
    priced_usd: float = Field(description="the part that has a price")
    unpriced: list[str] = Field(description="models whose tokens have no price")


class CostOut(Schema):
    total: CostPartOut
    agent: CostPartOut
    judge: CostPartOut


class HeadlineOut(Schema):
    run_id: int
    git_commit: str = Field(description="a re-grade's is its transcripts' commit")
    git_branch: str
    git_subject: str = Field(description="the subject of git_commit (empty when unknown)")
    regrade_of: int | None = Field(
        description="a re-grade: the run it re-grades (headline: re-grade of #N with <ref>)"
    )
    graded_with: str | None = Field(
        description="a re-grade: the git ref of the agent.yaml it was graded with, or "
        "'the working tree'"
    )
    grading_commit: str | None = Field(
        description="a re-grade: the commit of the agent.yaml it was graded with"
    )
    transcripts_run: int | None = Field(
        description="a re-grade: the run whose transcripts it grades"
    )
    summary: RunSummary = Field(description="the run's own numbers; metrics counted per turn")
    kind_pass_rate: float | None = Field(
        description="with a kind filter: the pass rate over those kinds' case verdicts"
    )
    tool_pass_rate: float | None = Field(description="tool assertions, over turns")
    tokens: int | None
    agent_ms: int
    judge_ms: int
    cost_usd: float | None = Field(description="judge cost as deepeval recorded it (kind-filtered)")
    cost: CostOut | None = Field(
        default=None,
        description="the whole run's cost by the price table (docs/cost.md), agent and judge "
        "apart; null when the price file cannot be read",
    )
    regressions: int
    fixes: int
    changed: int = Field(
        description="cases where a verdict (the case's or a turn's) differs from the compared "
        "run's: the rows of show=changed that are in every run"
    )


class ChangesOut(Schema):
    run_id: int
    regressions: int
    fixes: int


def _by_run(description: str) -> Any:
    """A row's field that says something per run id, only where a run has it."""
    return Field(default_factory=dict, description=description)


class RowOut(Schema):
    key: str
    cells: dict[str, str] = Field(description="run id -> outcome of the case")
    turns: list[dict[str, str]] = Field(description="per turn index: run id -> outcome")
    regressions: int
    fixes: int
    unstable: bool = Field(
        description="a turn's verdict changed back and forth (passed, failed, passed again, or "
        "the other way round) along the runs in commit order; a change, not flakiness"
    )
    flaky: bool = Field(
        description="deprecated, the same value as unstable (kept for old clients): it never "
        "meant flakiness, which needs repeated runs of one commit"
    )
    partial: bool
    changed: bool = Field(
        description="a verdict differs between a run and the run it is compared with, or a "
        "turn changed back and forth: the rows show=changed keeps (with the partial ones)"
    )
    changed_in: list[int] = Field(
        description="the runs where a verdict of the row differs from the compared run's"
    )
    noise: int = Field(
        description="with repeats: turns whose verdict moved within noise (not significant), "
        "counted neither as regressions nor as fixes"
    )
    scores: dict[str, float] = _by_run(
        "with metric: run id -> the case's score (runs without one left out)"
    )
    deltas: dict[str, float] = _by_run(
        "with metric: run id -> score minus the compared run's (both must have one)"
    )
    hits: dict[str, list[int]] = _by_run(
        "with q: run id -> indexes of the turns where the text occurs"
    )
    significance: dict[str, str] = _by_run(
        "with a repeated run among them: run id -> significantly_worse, "
        "significantly_better or no_evidence against the run it is compared with, over their "
        "repetitions (docs/significance.md)"
    )
    repetitions: dict[str, list[int]] = _by_run(
        "a repeated run's case: run id -> [passed, graded] of its repetitions"
    )
    score_significance: dict[str, str] = _by_run(
        "with metric and a repeated run among them: run id -> significantly_worse, "
        "significantly_better or no_evidence, the case's scores over its repetitions against "
        "the compared run's (Mann–Whitney, Benjamini–Hochberg)"
    )


class PairSignificanceOut(Schema):
    run_id: int
    against: int
    worse_cases: int
    better_cases: int
    noise_cases: int
    worse_turns: int
    better_turns: int
    noise_turns: int
    text: str = Field(description="the turns' verdict in words")
    pass_rate_change: float | None = Field(description="in points, over the cases both have")
    ci_low: float | None
    ci_high: float | None
    confidence: float


class CompareOut(Schema):
    runs: list[int] = Field(description="the columns, in order")
    order: str
    against: dict[str, int] = Field(
        description="run id -> the run it is compared with (every run but the first)"
    )
    baseline: BaselineOut
    kinds: list[str]
    headline: list[HeadlineOut]
    by_kind: dict[str, list[ChangesOut]]
    rows: list[RowOut]
    row_count: int = Field(description="rows in all (those that show and q keep)")
    mixed_projects: bool
    significance: list[PairSignificanceOut] = Field(
        default_factory=list,
        description="with a repeated run among them: each run against the run it is compared with",
    )


@router.get("/compare", response=responses({200: CompareOut}, 404, 422))
def compare(request: HttpRequest, query: Query[CompareQuery]) -> object:
    """The compare page's data: its rows are the page's for the same options
    (``runs.compare.reads.compared_rows``)."""
    try:
        found = compare_rows(query.comparison_query())
    except RunsMissing as exc:
        raise HttpError(404, f"no run #{min(exc.missing)}") from None
    except NoBaseline as exc:
        raise HttpError(422, str(exc)) from None
    if found.errors:  # a setting the runs refuse: the page's message, at its parameter
        raise HttpError(422, _refused(found.errors, query))
    comparison, baseline = found.comparison, found.baseline
    matrix = comparison.matrix
    rows = found.rows[query.offset : query.offset + query.limit]
    return {
        "runs": [run.pk for run in comparison.runs],
        "order": comparison.order,
        "against": {str(run_id): other for run_id, other in matrix.against.items()},
        "baseline": {"run_id": baseline.run.pk, "rule": baseline.rule, "added": baseline.added},
        "kinds": list(query.kinds),
        "headline": [_headline_out(headline) for headline in comparison.headlines],
        "by_kind": {
            kind: [{"run_id": r, "regressions": c[0], "fixes": c[1]} for r, c in counts.items()]
            for kind, counts in matrix.by_kind.items()
        },
        "rows": [_row_out(comparison, row) for row in rows],
        "row_count": len(found.rows),
        "mixed_projects": comparison.mixed_projects,
        "significance": [
            _significance_out(run_id, matrix.against[run_id], found)
            for run_id, found in comparison.significance.items()
        ],
    }


def _refused(errors: dict[str, str], query: CompareQuery) -> str:
    if "metric" in errors:
        return f"no metric {(query.metric or '')[:60]!r} in these runs"
    return "; ".join(f"{name}: {message}" for name, message in errors.items())


def _headline_out(h: Headline) -> dict[str, object]:
    return {
        "run_id": h.run.pk,
        "git_commit": h.run.git_commit,
        "git_branch": h.run.git_branch,
        "git_subject": h.run.git_subject,
        **_regrade_fields(h.regrade),
        "summary": h.summary,
        "kind_pass_rate": h.kind_pass_rate,
        "tool_pass_rate": h.tool_pass_rate,
        "tokens": h.tokens,
        "agent_ms": h.agent_ms,
        "judge_ms": h.judge_ms,
        "cost_usd": h.cost_usd,
        "cost": _cost_out(h.cost),
        "regressions": h.regressions,
        "fixes": h.fixes,
        "changed": h.changed,
    }


def _row_out(comparison: Comparison, row: Row) -> dict[str, object]:
    return {
        "key": row.key,
        "cells": {str(k): v for k, v in row.cells.items()},
        "turns": [{str(k): v for k, v in line.items()} for line in row.turns],
        "regressions": row.regressions,
        "fixes": row.fixes,
        "unstable": row.unstable,
        "flaky": row.unstable,
        "partial": row.partial,
        "changed": row.changed,
        "changed_in": list(row.changed_in),
        "noise": row.noise,
        "scores": {str(k): v for k, v in row.scores.items()},
        "deltas": {str(k): v for k, v in row.deltas.items()},
        "hits": {str(k): list(v) for k, v in row.hits.items()},
        **_row_repeats(comparison, row),
    }


class CompareCsvQuery(RunsQuery):
    kinds: Kinds = Field(
        default_factory=list,
        description="the kinds whose verdict columns are written (every kind by default), and "
        "whose metrics are scored when no metric is given; repeated or comma-separated",
    )
    metric: list[SafeText] = Field(
        default_factory=list,
        max_length=MOST_METRICS,
        description="the metrics to score, repeated (metric=a&metric=b); every metric of the "
        "runs by default",
    )


@router.get(
    "/compare.csv",
    response=responses({200: None}, 404),
    summary="The compare as CSV: one row per case and run (per repetition), streamed",
)
def compare_csv(request: HttpRequest, query: Query[CompareCsvQuery]) -> HttpResponseBase:
    """Columns: case_index (0-based), case_name, run_id, commit, commit_subject, repetition,
    outcome, verdict:<kind> per kind, turns, execution_time_ms, prompt_tokens,
    completion_tokens, total_tokens, cost_usd, agent_cost_usd, judge_cost_usd (USD, empty
    when unknown), cost_unpriced (the models without a price), score:<metric> per metric (the
    mean of the case's turns' scores), delta:<metric> per metric (the score less the
    baseline's, for the same case). Every case of the compared runs, whatever show or q would
    keep."""
    settings = CsvSettings(
        query=ComparisonQuery(
            run_ids=list(dict.fromkeys(query.runs)),
            chosen=query.baseline,
            kinds=[kind for kind in KINDS if kind in query.kinds],
        ),
        metrics=list(dict.fromkeys(query.metric)),
    )
    try:
        return compare_csv_response(settings)
    except RunsMissing as exc:
        raise HttpError(404, f"no run #{min(exc.missing)}") from None
    except UnknownMetric as exc:
        raise HttpError(422, str(exc)) from None


def _row_repeats(comparison: Comparison, row: Row) -> dict[str, object]:
    if not comparison.significance and not comparison.repetitions:
        return {}
    classes = {
        str(run_id): unit.classification
        for run_id, found in comparison.significance.items()
        if (unit := found.cases.units.get(row.key)) is not None
    }
    counts = {
        str(run_id): list(comparison.repetitions[case_id])
        for run_id, case_id in row.case_ids.items()
        if case_id in comparison.repetitions
    }
    scores = {
        str(run_id): score.classification
        for run_id, found in comparison.score_significance.items()
        if (score := found.get(row.key)) is not None
    }
    return {"significance": classes, "repetitions": counts, "score_significance": scores}


def _significance_out(run_id: int, against: int, found: RunSignificance) -> dict[str, object]:
    rate = found.pass_rate
    return {
        "run_id": run_id,
        "against": against,
        "worse_cases": found.cases.worse,
        "better_cases": found.cases.better,
        "noise_cases": found.cases.noise,
        "worse_turns": found.turns.worse,
        "better_turns": found.turns.better,
        "noise_turns": found.turns.noise,
        "text": found.turns.text,
        "pass_rate_change": rate.difference,
        "ci_low": rate.ci_low,
        "ci_high": rate.ci_high,
        "confidence": rate.confidence,
    }


def _cost_out(cost: SplitCost | None) -> dict[str, object] | None:
    if cost is None:
        return None
    return {"total": _part(cost.both), "agent": _part(cost.agent), "judge": _part(cost.judge)}


def _part(cost: Cost) -> dict[str, object]:
    return {
        "usd": cost.usd if not cost.unpriced else None,
        "priced_usd": cost.usd,
        "unpriced": list(cost.unpriced),
    }


def _regrade_fields(sources: RegradeSources | None) -> dict[str, object]:
    if sources is None:
        return dict.fromkeys(("regrade_of", "graded_with", "grading_commit", "transcripts_run"))
    return {
        "regrade_of": sources.of,
        "graded_with": sources.grading.label,
        "grading_commit": sources.grading.commit,
        "transcripts_run": sources.transcripts.run,
    }
