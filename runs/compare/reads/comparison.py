"""Reads for comparing runs, a fixed number of queries whatever the runs' size.

- ``comparison_for``: the runs asked for, their baseline and their comparison: what the compare
  page and ``GET /api/v1/compare`` both show;
- ``runs_for_compare``: the runs asked for (1 query);
- ``baseline_choose``: which run is the baseline, and by which rule (0–2 queries, one git call;
  ``runs.compare.reads.baseline``);
- ``compare_runs``: their case rows (1 query) and turn verdicts (1: one text per case;
  ``runs.selectors.compare_cases``), aligned by
  ``runs.core.comparison.matrix``, each run's summary (stored with the run; from its rows, 3 queries
  for all of them, while a run is active or when it has none) and judge time and cost
  (1 aggregate); the runs in commit order (one git call), for the chronological mode. Runs that
  ended with their compare values stored (``runs.selectors.compare_store``) give their turn
  verdicts with their case rows and their agent and judge times and costs as stored: no turn or
  metric row is read. The compare page of such runs, every row kept in the runs' order, is
  tallied by the database instead (``runs.compare.reads.tally``);
- ``cases_by_key`` and ``runs_for_config``: one case in several runs, two runs' configurations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db.models import Count, OuterRef, Prefetch, Q, Subquery, Sum

from runs.compare.reads.baseline import (
    FINISHED,
    Baseline,
    NoBaseline,
    baseline_choose,
    next_run,
    runs_for_compare,
)
from runs.core import gitutil
from runs.core.commit_order import commit_ordered, on_history
from runs.core.comparison.matrix import (
    BASELINE_ORDER,
    CaseData,
    Matrix,
    TurnSignificance,
    build_matrix,
    case_verdict,
    compared_with,
)
from runs.core.comparison.query import MAX_RUNS
from runs.core.pricing.prices import SplitCost
from runs.core.stats.significance import ScoreResult
from runs.core.verdicts.kinds import JUDGE_KINDS, TOOLS_KIND
from runs.core.verdicts.numbers import pass_rate_of
from runs.core.verdicts.outcomes import Outcome
from runs.core.verdicts.regrades import RegradeSources
from runs.core.verdicts.summary import MetricSummary, OutcomeCounts, RunSummary
from runs.models import CaseRow, MetricRow, Run, TurnRow
from runs.selectors.compare_cases import RunTotals, case_rows, case_turns
from runs.selectors.compare_store import judge_of, stored_values
from runs.selectors.costs import Priced, run_cost, runs_costs
from runs.selectors.runs import run_summaries
from runs.selectors.significance import RunSignificance, samples_by_run, significance_between

__all__ = [  # the baseline's names, read from here by the gate and the trends too
    "FINISHED",
    "MAX_RUNS",
    "Baseline",
    "NoBaseline",
    "baseline_choose",
    "case_turns",
    "runs_for_compare",
]


@dataclass
class Headline:
    """What the top of the compare page shows for one run: its summary (the numbers of its run
    page, whatever the kind filter) and, with a filter, the pass rate over the selected kinds'
    case verdicts (labelled so); regressions and fixes against the baseline."""

    run: Run
    summary: RunSummary
    tool_pass_rate: float | None  # tool assertions, over turns
    tokens: int | None
    agent_ms: int
    judge_ms: int
    cost_usd: float | None
    kind_pass_rate: float | None = None  # only with a kind filter
    # The whole run's cost by the price table (runs.core.pricing.prices), agent and judge apart;
    # None with cost_error when the price file cannot be read.
    cost: SplitCost | None = None
    cost_error: str | None = None
    regressions: int = 0
    fixes: int = 0
    # The cases where a verdict (the case's or a turn's) differs from the compared run's.
    changed: int = 0
    # The summary's metrics of the selected kinds (every metric without a filter).
    metrics: list[MetricSummary] = field(default_factory=list)
    # A repeated run: its cases counted once each, by their verdict over their repetitions
    # (the matrix's cells); its summary counts every repetition (None: not repeated).
    merged_cases: OutcomeCounts | None = None

    @property
    def cases(self) -> OutcomeCounts:
        """Its cases as the matrix shows them: each once, a repeated one by its merged verdict."""
        return self.merged_cases if self.merged_cases is not None else self.summary.cases

    @property
    def pass_rate(self) -> float | None:
        return self.summary.pass_rate

    @property
    def regrade(self) -> RegradeSources | None:
        """A re-grade's sources: its headline says "re-grade of #N with <ref>"."""
        return self.run.regrade


@dataclass
class Comparison:
    runs: list[Run]  # the columns, oldest first (in commit order, else by date)
    baseline: Run
    kinds: list[str]
    matrix: Matrix
    headlines: list[Headline]
    order: str = BASELINE_ORDER
    # How the runs were put in time order: "in commit order of HEAD" or "in date order".
    timeline_note: str = ""
    # With a repeated run among them: run id -> its significance against the run it is
    # compared with, and a merged case's id -> (passed, graded) of its repetitions.
    significance: dict[int, RunSignificance] = field(default_factory=dict)
    repetitions: dict[int, tuple[int, int]] = field(default_factory=dict)
    # With a metric chosen too: run id -> case key -> its scores' change over the repetitions.
    score_significance: dict[int, dict[str, ScoreResult]] = field(default_factory=dict)

    @property
    def mixed_projects(self) -> bool:
        """The runs belong to different projects (or, without one, agents): cases line up by
        name only."""
        return len({run.project_id or run.agent_name for run in self.runs}) > 1

    def against(self, run: Run) -> Run | None:
        """The run ``run`` is compared with (None: the reference column)."""
        other = self.matrix.against.get(run.pk)
        return next((r for r in self.runs if r.pk == other), None)

    @property
    def repeated(self) -> bool:
        """A run among them has repeats: its cases are merged over their repetitions."""
        return any(headline.merged_cases is not None for headline in self.headlines)

    @property
    def metric_names(self) -> list[str]:
        """Every metric of the runs' summaries, whatever the kind filter, by name."""
        return sorted({m.name for h in self.headlines for m in h.summary.metrics})


class RunsMissing(Exception):
    """Some of the runs asked for do not exist (``missing``: their ids, in the order asked)."""

    def __init__(self, missing: list[int]) -> None:
        super().__init__(f"no run #{missing[0]}")
        self.missing = missing


def comparison_for(
    run_ids: list[int],
    *,
    chosen: int | None = None,
    kinds: list[str] | None = None,
    order: str = BASELINE_ORDER,
) -> tuple[Baseline, Comparison]:
    """The runs ``run_ids`` and their baseline (found or chosen among them, or added), oldest
    first, filtered by ``kinds``; ``chosen``: the user's pick of the baseline. Each is compared
    with the baseline or, with ``order="commits"``, with the one before it.

    Raises ``RunsMissing`` when a run does not exist, ``NoBaseline`` when a lone run has no
    baseline (5–7 queries).
    """
    baseline, shown = runs_compared(run_ids, chosen=chosen)
    compared = compare_runs(
        shown, baseline.run, list(kinds or []), order=order, only_significant=True
    )
    return baseline, compared


def runs_compared(run_ids: list[int], *, chosen: int | None = None) -> tuple[Baseline, list[Run]]:
    """The runs a compare of ``run_ids`` shows, the baseline first (added when only one run
    was asked for), and the baseline; raises as ``comparison_for`` (2–4 queries)."""
    runs = runs_for_compare(run_ids)
    found = {run.pk for run in runs}
    missing = [run_id for run_id in run_ids if run_id not in found]
    if missing:
        raise RunsMissing(missing)
    baseline = baseline_choose(runs, chosen=chosen)
    if baseline is None:
        raise NoBaseline(runs[0], next_run(runs[0]))
    return baseline, [baseline.run] + [run for run in runs if run.pk != baseline.run.pk]


# --- the comparison -------------------------------------------------------------------------


def compare_runs(
    runs: list[Run],
    baseline: Run,
    kinds: list[str],
    *,
    order: str = BASELINE_ORDER,
    only_significant: bool = False,
) -> Comparison:
    """Align the runs' cases and turns and sum up each run (3 queries, 6 when a run is active
    or has no stored summary; 1 when every run stored its compare values). The runs are laid
    out oldest first (as in commit order, whatever the order asked); ``order="commits"``: each
    compared with the one before it; else each with ``baseline``. ``only_significant`` (the
    compare page and API): with a repeated run among them, only significant changes are
    regressions and fixes (``runs.core.comparison.matrix``)."""
    runs, timeline_note = runs_in_time_order(runs)
    ids = [run.pk for run in runs]
    # Every run ended with its compare values stored: its turns and metrics are not read.
    stored = {run.pk: found for run in runs if (found := _stored(run)) is not None}
    every = len(stored) == len(runs)
    agent_ms = {run_id: found["agent_ms"] for run_id, found in stored.items()}
    cases, totals, repetitions = case_rows(ids, stored_agent_ms=agent_ms if every else None)
    judge, costs = _judge_and_costs(runs, kinds, stored if every else None)
    against = compared_with(ids, baseline.pk, order)
    significance = _repetition_significance(runs, against) if repetitions else {}
    matrix = build_matrix(
        {run.pk: cases.get(run.pk, []) for run in runs},
        baseline.pk,
        kinds,
        against=against,
        timeline=ids,
        significance=_turn_classes(significance) if significance and only_significant else None,
    )
    summaries = run_summaries(runs)
    headlines = [
        _headline(
            run,
            matrix,
            summary=summaries[run.pk],
            kinds=kinds,
            judge=judge.get(run.pk, (0, None)),
            totals=totals.get(run.pk, RunTotals()),
            priced=costs[run.pk],
            merged=_merged_counts(cases.get(run.pk, []), repetitions),
        )
        for run in runs
    ]
    return Comparison(
        runs=runs,
        baseline=baseline,
        kinds=kinds,
        matrix=matrix,
        headlines=headlines,
        order=order,
        timeline_note=timeline_note,
        significance=significance,
        repetitions=repetitions if significance else {},
    )


def _judge_and_costs(
    runs: list[Run], kinds: list[str], stored: dict[int, dict[str, Any]] | None
) -> tuple[dict[int, tuple[int, float | None]], dict[int, Priced]]:
    """Each run's judge time and cost over the selected kinds, and its cost: from the values
    ``stored`` with every run (and each finished run's cost kept per process), else summed
    over their rows (4 queries)."""
    if stored is not None:
        judge = {run_id: judge_of(found["judge"], kinds) for run_id, found in stored.items()}
        return judge, {run.pk: run_cost(run=run) for run in runs}
    ids = [run.pk for run in runs]
    return _judge_sums(ids, kinds), runs_costs(run_ids=ids)


def _stored(run: Run) -> dict[str, Any] | None:
    """A finished run's stored compare values (``runs.selectors.compare_store``)."""
    return None if run.is_live else stored_values(run)


def _repetition_significance(
    runs: list[Run], against: dict[int, int]
) -> dict[int, RunSignificance]:
    """With a repeated run among them (a case with repetitions): each run's significance
    against the run it is compared with, from their repetitions
    (``runs.selectors.significance``; one query for all)."""
    samples = samples_by_run([run.pk for run in runs])
    return {
        run.pk: significance_between(
            samples[other], samples[run.pk], before_runs=(other,), after_runs=(run.pk,)
        )
        for run in runs
        if (other := against.get(run.pk)) is not None
    }


def _turn_classes(significance: dict[int, RunSignificance]) -> TurnSignificance:
    """(run id, case key, turn index) -> that turn's significance class against the run it is
    compared with (None: not tested)."""

    def of(run_id: int, key: str, turn_index: int) -> str | None:
        found = significance.get(run_id)
        return found.turn_class(key, turn_index) if found is not None else None

    return of


def _merged_counts(
    cases: list[CaseData], repetitions: dict[int, tuple[int, int]]
) -> OutcomeCounts | None:
    """A repeated run's cases by their verdicts over their repetitions, as the matrix's cells
    show them (no kind filter); None for a run without repetitions."""
    if not any(case.case_id in repetitions for case in cases):
        return None
    return OutcomeCounts.counted(case_verdict(case, frozenset()).value for case in cases)


@dataclass(frozen=True)
class _Placed:
    id: int
    commit: str
    created_at: datetime


def runs_in_time_order(runs: list[Run]) -> tuple[list[Run], str]:
    """The runs oldest first, and how: by the position of their commit on the first-parent
    history of HEAD in the newest run's project directory (runs of one commit by date; runs off
    that history merged among them by date), else by date (one git call; none without a
    project directory). A re-grade's commit is its transcripts': it follows the run it
    re-grades."""
    by_date = sorted(runs, key=lambda run: (run.created_at, run.pk))
    history = _history(by_date[-1]) if by_date else None
    if not history:
        return by_date, "in date order"
    places = [_Placed(run.pk, run.git_commit, run.created_at) for run in by_date]
    placed = commit_ordered(places, history)
    by_id = {run.pk: run for run in runs}
    placed_any = any(on_history(run.git_commit, history) for run in by_date)
    note = "in commit order of HEAD" if placed_any else "in date order"
    return [by_id[place.id] for place in placed], note


def _history(run: Run) -> list[str] | None:
    if run.project_id is None or run.project is None:
        return None
    if not Path(run.project.directory).is_dir():
        return None
    try:
        return gitutil.commit_order(Path(run.project.directory))
    except gitutil.GitError:
        return None


def _judge_sums(run_ids: list[int], kinds: list[str]) -> dict[int, tuple[int, float | None]]:
    """Per run: (judge milliseconds, judge cost) over the selected kinds (1 query)."""
    rows = MetricRow.objects.filter(run_id__in=run_ids)
    if kinds:
        rows = rows.filter(kind__in=[kind for kind in kinds if kind != TOOLS_KIND])
    sums = (
        rows.values("run_id")
        .annotate(
            judge_ms=Sum("evaluation_time_ms", filter=Q(kind__in=sorted(JUDGE_KINDS))),
            cost=Sum("judge_cost_usd"),
        )
        .order_by("run_id")
    )
    return {row["run_id"]: (row["judge_ms"] or 0, row["cost"]) for row in sums}


def _headline(
    run: Run,
    matrix: Matrix,
    *,
    summary: RunSummary,
    kinds: list[str],
    judge: tuple[int, float | None],
    totals: RunTotals,
    priced: Priced | None = None,
    merged: OutcomeCounts | None = None,
) -> Headline:
    regressions, fixes = matrix.totals(run.pk) if run.pk in matrix.against else (0, 0)
    kind_pass_rate = None
    if kinds:
        # The selected kinds' verdicts of its cases, as the matrix shows them.
        cells = [cell for cell in matrix.cells_of(run.pk) if cell is not Outcome.ABSENT]
        kind_pass_rate = OutcomeCounts.counted(cells).pass_rate
    return Headline(
        run=run,
        summary=summary,
        kind_pass_rate=kind_pass_rate,
        tool_pass_rate=pass_rate_of(totals.tools_passed, totals.tools_passed + totals.tools_failed),
        tokens=run.total_tokens or None,
        agent_ms=totals.agent_ms,
        judge_ms=judge[0],
        cost_usd=judge[1],
        cost=priced.cost if priced else None,
        cost_error=priced.error if priced else None,
        metrics=[metric for metric in summary.metrics if not kinds or metric.kind in kinds],
        regressions=regressions,
        fixes=fixes,
        changed=matrix.changed_cases(run.pk) if run.pk in matrix.against else 0,
        merged_cases=merged,
    )


# --- one case, several runs; two runs' configurations -----------------------------------------


def cases_by_key(run_ids: list[int], key: str) -> list[CaseRow]:
    """The case called ``key`` (a name, or ``#index`` for unnamed cases) in each run, with
    turns and metrics (3 queries, whatever the number of runs). A repeated run's case is its
    first repetition (as the matrix's links open it), with ``repetition_count``: how many
    repetitions the case has (1 without repeats)."""
    siblings = (
        CaseRow.objects.filter(run_id=OuterRef("run_id"), index=OuterRef("index"))
        .order_by()
        .values("run_id")
        .annotate(count=Count("id"))
        .values("count")
    )
    cases = CaseRow.objects.filter(run_id__in=run_ids, repetition=0).annotate(
        repetition_count=Subquery(siblings)
    )
    # ASCII digits within 64 bits: "#²" passes isdigit() but not int(), and a longer number
    # overflows the database's integer.
    digits = key[1:]
    if key.startswith("#") and digits.isascii() and digits.isdigit() and len(digits) <= 18:
        cases = cases.filter(name="", index=int(key[1:]))
    else:
        cases = cases.filter(name=key)
    turns = TurnRow.objects.order_by("index").prefetch_related(
        Prefetch("metrics", queryset=MetricRow.objects.order_by("position", "id"))
    )
    return list(cases.order_by("index").prefetch_related(Prefetch("turns", queryset=turns)))


def runs_for_config(run_ids: list[int]) -> dict[int, Run]:
    """The runs by id with every column (their agent.yaml and config snapshot), their project
    and their snapshot's manifest; the snapshots' archives are left for the files that differ
    (1 query)."""
    runs = (
        Run.objects.select_related("project", "snapshot")
        .defer("snapshot__archive")
        .filter(pk__in=run_ids)
    )
    return {run.pk: run for run in runs}
