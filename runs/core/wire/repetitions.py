"""A result file's ``report.repetitions``: each repeated case summed up over its repetitions
(each turn's pass rate and flakiness, each metric's mean and spread), from the wire results,
counted by the rules of ``runs.core.verdicts.repeats``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from runs.core.verdicts.repeats import repeat_stats, score_spreads
from runs.core.wire.models import (
    MetricResult,
    MetricSpread,
    RepetitionSummary,
    TestResult,
    TurnRepetitions,
)


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
