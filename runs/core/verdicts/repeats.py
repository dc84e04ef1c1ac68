"""What a case's (or a turn's) repetitions say together, read from their stored outcomes: how
often it passed, pass@k and pass^k, and whether it is flaky — it passed in some repetitions and
failed in others of the same run (the only thing called "flaky"). Django-free: the run page,
the exports and the API count repetitions with these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean, pstdev

from runs.compare.core.matrix import CaseData, TurnData
from runs.core.stats.significance import pass_at_k, pass_hat_k
from runs.core.verdicts.outcomes import BAD, GRADED_VALUES, Outcome
from runs.core.wire.models import (
    MetricResult,
    MetricSpread,
    RepetitionSummary,
    TestResult,
    TurnRepetitions,
)


@dataclass(frozen=True)
class RepeatStats:
    """The repetitions of one case or turn: ``graded`` of them passed or failed (errored counts
    as failed, as in pass rates); the others were not graded, skipped, cancelled or pending."""

    repetitions: int
    passed: int
    failed: int

    @property
    def graded(self) -> int:
        return self.passed + self.failed

    @property
    def rate(self) -> float | None:
        """Passed over graded repetitions, in %; None when none was graded."""
        return self.passed * 100 / self.graded if self.graded else None

    @property
    def flaky(self) -> bool:
        return self.passed > 0 and self.failed > 0

    def pass_at(self, k: int) -> float | None:
        """pass@k in %: the chance that at least one of k repetitions drawn passes."""
        value = pass_at_k(self.graded, self.passed, k) if self.graded else None
        return None if value is None else value * 100

    def pass_all(self, k: int) -> float | None:
        """pass^k in %: the chance that all of k repetitions drawn pass."""
        value = pass_hat_k(self.graded, self.passed, k) if self.graded else None
        return None if value is None else value * 100

    @property
    def ks(self) -> list[int]:
        """The k shown for pass@k and pass^k: 1 up to the graded repetitions (at most 5)."""
        return list(range(1, min(self.graded, 5) + 1))


def repeat_stats(outcomes: Iterable[str]) -> RepeatStats:
    """The stats of one unit's repetitions from their stored outcomes."""
    values = list(outcomes)
    return RepeatStats(
        repetitions=len(values),
        passed=sum(1 for value in values if value == Outcome.PASSED),
        failed=sum(1 for value in values if value in BAD),
    )


def stats_by_unit(rows: Iterable[tuple[int, str]]) -> dict[int, RepeatStats]:
    """``repeat_stats`` of each unit (a case's index, a turn's index) of (unit, outcome) rows."""
    grouped: dict[int, list[str]] = {}
    for unit, outcome in rows:
        grouped.setdefault(unit, []).append(outcome)
    return {unit: repeat_stats(values) for unit, values in grouped.items()}


@dataclass(frozen=True)
class RunRepeatStats:
    """A repeated run's cases together. pass@k and pass^k are at k = the run's repeats and
    averaged over its ``complete`` cases only — those all of whose repetitions were graded —
    so a case cancelled, pending or not graded in some repetition claims nothing (as τ-bench
    reports pass^k over finished trials); ``flaky`` counts the cases with a pass and a failure,
    of ``judged``, those with two graded repetitions or more. ``live``: the run goes on, and
    the tile says "so far"."""

    repeats: int
    cases: int
    complete: int
    judged: int
    flaky: int
    pass_at_k: float | None
    pass_hat_k: float | None
    live: bool = False

    @property
    def incomplete(self) -> int:
        """Cases with a repetition not graded (yet): left out of pass@k and pass^k."""
        return self.cases - self.complete


def run_repeat_stats(
    by_case: Mapping[int, RepeatStats], repeats: int, *, live: bool = False
) -> RunRepeatStats:
    complete = [stats for stats in by_case.values() if stats.graded >= repeats]
    at = [v for stats in complete if (v := stats.pass_at(repeats)) is not None]
    all_ = [v for stats in complete if (v := stats.pass_all(repeats)) is not None]
    return RunRepeatStats(
        repeats=repeats,
        cases=len(by_case),
        complete=len(complete),
        judged=sum(1 for stats in by_case.values() if stats.graded >= 2),
        flaky=sum(1 for stats in by_case.values() if stats.flaky),
        pass_at_k=fmean(at) if at else None,
        pass_hat_k=fmean(all_) if all_ else None,
        live=live,
    )


@dataclass(frozen=True)
class ScoreSpread:
    """One metric's scores over a case's repetitions: their mean and (population) spread."""

    name: str
    count: int
    mean: float
    spread: float


def score_spreads(rows: Iterable[tuple[str, float | None]]) -> list[ScoreSpread]:
    """Per metric name (in the order first seen), the mean and spread of its stored scores."""
    scores: dict[str, list[float]] = {}
    for name, score in rows:
        if score is not None:
            scores.setdefault(name, []).append(float(score))
    return [_spread(name, values) for name, values in scores.items()]


def _spread(name: str, values: Sequence[float]) -> ScoreSpread:
    return ScoreSpread(name=name, count=len(values), mean=fmean(values), spread=pstdev(values))


def repetition_summaries(
    entries: Iterable[tuple[int, str | None, TestResult]], repeats: int
) -> list[RepetitionSummary]:
    """One summary per case, in the order first seen, of (case index, name, result) entries:
    one per repetition (a result file's ``report.repetitions``), with each turn over the
    repetitions and each metric's mean and spread."""
    names: dict[int, str | None] = {}
    results: dict[int, list[TestResult]] = {}
    for index, name, result in entries:
        names.setdefault(index, name)
        results.setdefault(index, []).append(result)
    return [_summary(index, names[index], listed, repeats) for index, listed in results.items()]


def _summary(
    index: int, name: str | None, results: Sequence[TestResult], repeats: int
) -> RepetitionSummary:
    stats = repeat_stats(result.outcome or "" for result in results)
    k = min(repeats, stats.graded)
    turns: dict[int, list[str]] = {}
    scores: list[tuple[str, float | None]] = []
    for result in results:
        for turn_index, outcome, metrics in _turns_of(result):
            turns.setdefault(turn_index, []).append(outcome)
            scores += [(metric.metric_name, metric.score) for metric in metrics]
    return RepetitionSummary(
        test_name=name,
        case_index=index,
        repetitions=stats.repetitions,
        passed=stats.passed,
        failed=stats.failed,
        pass_rate=stats.rate,
        pass_at_k=stats.pass_at(k) if k else None,
        pass_hat_k=stats.pass_all(k) if k else None,
        flaky=stats.flaky,
        turns=[_turn_summary(i, turns[i]) for i in sorted(turns)],
        metrics=[
            MetricSpread(metric_name=m.name, count=m.count, mean=m.mean, spread=m.spread)
            for m in score_spreads(scores)
        ],
    )


def _turns_of(result: TestResult) -> list[tuple[int, str, Sequence[MetricResult]]]:
    """(turn index, outcome, metrics) of each turn of a result (a single-turn case's result is
    its one turn)."""
    if result.turns:
        return [(t.turn_index, t.outcome or "", t.metric_results) for t in result.turns]
    return [(0, result.outcome or "", result.metric_results)]


def _turn_summary(turn_index: int, outcomes: Sequence[str]) -> TurnRepetitions:
    stats = repeat_stats(outcomes)
    return TurnRepetitions(
        turn_index=turn_index,
        passed=stats.passed,
        failed=stats.failed,
        pass_rate=stats.rate,
        flaky=stats.flaky,
    )


# --- a repeated case as one case of a comparison ----------------------------------------------


def merged_outcome(outcomes: Sequence[str]) -> str:
    """One verdict for a unit's repetitions, as compare reads it: passed when more than half of
    its graded repetitions passed (it passes as a rule), else failed — errored when every
    graded one errored; a unit with no graded repetition keeps the first's verdict (not graded,
    skipped, cancelled, pending). How far from certain that is, the cell's count and the
    significance test say."""
    graded = [outcome for outcome in outcomes if outcome in GRADED_VALUES]
    if not graded:
        return outcomes[0] if outcomes else ""
    if all(outcome == Outcome.ERROR for outcome in graded):
        return Outcome.ERROR.value
    passed = sum(1 for outcome in graded if outcome == Outcome.PASSED)
    return Outcome.PASSED.value if passed * 2 > len(graded) else Outcome.FAILED.value


def repetitions_merged(cases: Sequence[CaseData]) -> CaseData:
    """A case's repetitions (in order) as one case of a comparison: the first repetition's row
    (its links), each verdict merged over them (``merged_outcome``): the case's, each turn's and
    each kind's."""
    first = cases[0]
    turns = []
    for position, turn in enumerate(first.turns):
        lines = [case.turns[position] for case in cases if len(case.turns) > position]
        kinds = {
            kind: merged_outcome([line.kinds[kind] for line in lines if kind in line.kinds])
            for kind in turn.kinds
        }
        turns.append(TurnData(turn.index, merged_outcome([line.outcome for line in lines]), kinds))
    kinds = {
        kind: merged_outcome([case.kinds[kind] for case in cases if kind in case.kinds])
        for kind in first.kinds
    }
    return CaseData(
        case_id=first.case_id,
        index=first.index,
        name=first.name,
        status=first.status,
        outcome=merged_outcome([case.outcome for case in cases]),
        kinds=kinds,
        turns=tuple(turns),
    )
