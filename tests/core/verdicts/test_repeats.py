"""A unit's repetitions together (runs.core.verdicts.repeats): counts, pass@k and pass^k, flaky, the
merged verdict compare shows and a repeated case merged into one case of a comparison."""

from __future__ import annotations

import pytest

from runs.core.comparison.matrix import CaseData, TurnData
from runs.core.comparison.repeats import repetitions_merged
from runs.core.verdicts.repeats import (
    merged_outcome,
    repeat_stats,
    run_repeat_stats,
    score_spreads,
)
from runs.core.wire.repetitions import repetition_summaries


def test_repetitions_count_errors_as_failures_and_leave_the_ungraded_out() -> None:
    stats = repeat_stats(["passed", "failed", "error", "not_graded", "passed"])
    assert (stats.repetitions, stats.passed, stats.failed, stats.graded) == (5, 2, 2, 4)
    assert stats.rate == 50 and stats.flaky
    assert stats.pass_at(1) == pytest.approx(50) and stats.pass_all(2) == pytest.approx(100 / 6)
    assert stats.ks == [1, 2, 3, 4]


def test_a_unit_that_always_passes_or_always_fails_is_not_flaky() -> None:
    assert not repeat_stats(["passed"] * 3).flaky
    assert not repeat_stats(["failed", "error"]).flaky
    assert repeat_stats(["not_graded"]).rate is None


@pytest.mark.parametrize(
    ("outcomes", "merged"),
    [
        (["passed", "passed", "failed"], "passed"),
        (["passed", "failed"], "failed"),  # half is no majority
        (["passed", "failed", "error"], "failed"),
        (["error", "error", "not_graded"], "error"),
        (["not_graded", "skipped"], "not_graded"),
        (["passed", "not_graded"], "passed"),
    ],
)
def test_the_merged_verdict_is_the_majority_of_the_graded_repetitions(
    outcomes: list[str], merged: str
) -> None:
    assert merged_outcome(outcomes) == merged


def test_a_repeated_case_merges_into_one_case_with_its_first_repetitions_row() -> None:
    def case(case_id: int, *turns: str) -> CaseData:
        lines = tuple(TurnData(i, o, {"standard": o}) for i, o in enumerate(turns))
        return CaseData(case_id, 4, "refund", "done", turns[-1], {"standard": turns[-1]}, lines)

    merged = repetitions_merged([case(7, "passed", "failed"), case(8, "passed", "failed"),
                                 case(9, "passed", "passed")])  # fmt: skip
    assert (merged.case_id, merged.index, merged.key) == (7, 4, "refund")
    assert [turn.outcome for turn in merged.turns] == ["passed", "failed"]
    assert merged.turns[1].kinds == {"standard": "failed"}
    assert merged.outcome == "failed" and merged.kinds == {"standard": "failed"}


def test_a_run_sums_its_flaky_cases_and_averages_pass_at_k_over_them() -> None:
    by_case = {0: repeat_stats(["passed", "failed"]), 1: repeat_stats(["passed", "passed"])}
    run = run_repeat_stats(by_case, 2)
    assert (run.cases, run.flaky) == (2, 1)
    assert run.pass_at_k == pytest.approx(100) and run.pass_hat_k == pytest.approx(50)


def test_summaries_per_case_their_turns_and_their_metrics() -> None:
    from runs.core.wire.models import MetricResult, TestResult, TurnResult

    def result(*turns: str, score: float) -> TestResult:
        lines = [
            TurnResult(
                turn_index=i,
                input="q",
                response="a",
                passed=o == "passed",
                execution_time_ms=1,
                metric_results=[
                    MetricResult(metric_name="rouge", score=score, threshold=0.5, passed=True)
                ],
            )
            for i, o in enumerate(turns)
        ]
        return TestResult(
            test_name="a",
            test_input="q",
            passed=all(o == "passed" for o in turns),
            execution_time_ms=1,
            timestamp="2026-01-01T00:00:00Z",
            turns=lines,
        )

    worse, better = result("passed", "failed", score=0.5), result("passed", "passed", score=1.0)
    [first] = repetition_summaries([(0, "a", worse), (0, "a", better)], 2)
    assert (first.test_name, first.passed, first.failed, first.flaky) == ("a", 1, 1, True)
    assert first.pass_at_k == pytest.approx(100) and first.pass_hat_k == pytest.approx(0)
    assert [(t.turn_index, t.passed, t.flaky) for t in first.turns] == [(0, 2, False), (1, 1, True)]
    [rouge] = first.metrics
    assert (rouge.metric_name, rouge.count, rouge.mean, rouge.spread) == ("rouge", 4, 0.75, 0.25)


def test_score_spreads_leave_missing_scores_out() -> None:
    [spread] = score_spreads([("rouge", 0.5), ("rouge", 1.0), ("rouge", None)])
    assert (spread.count, spread.mean, spread.spread) == (2, 0.75, 0.25)
