"""A case's verdict over its turns, and a metric's over the turns that ran it."""

from __future__ import annotations

from runs.core.verdicts.outcomes import Outcome, case_outcome_of_turns, rolled_up_metric_outcome
from runs.core.verdicts.summary import summarize
from runs.core.wire.build import rollup_turns
from runs.core.wire.models import TurnResult


def judged_turn(index: int, *, score: float | None, error: str | None = None) -> TurnResult:
    metric = {"metric_name": "judge", "kind": "geval", "score": score, "threshold": 0.5,
              "passed": score is not None and score >= 0.5, "error": error}  # fmt: skip
    return TurnResult(
        turn_index=index,
        input=f"question {index}",
        passed=bool(metric["passed"]),
        execution_time_ms=1,
        metric_results=[metric],
    )


def test_a_case_with_a_failed_turn_and_an_ungraded_turn_failed() -> None:
    failed, ungraded = judged_turn(0, score=0.2), judged_turn(1, score=None, error="timeout")
    assert (failed.outcome, ungraded.outcome) == ("failed", "not_graded")

    case = rollup_turns([failed, ungraded], test_name="mixed", timestamp="t")

    assert case.outcome == Outcome.FAILED
    assert case.metric_results[0].outcome == Outcome.FAILED
    assert case.kind_outcomes == {"geval": "failed"}


def test_a_case_whose_only_failures_could_not_be_graded_is_not_graded() -> None:
    case = rollup_turns(
        [judged_turn(0, score=0.9), judged_turn(1, score=None, error="timeout")],
        test_name="ungraded",
        timestamp="t",
    )
    assert case.outcome == Outcome.NOT_GRADED
    assert case.metric_results[0].outcome == Outcome.NOT_GRADED


def test_failed_and_errored_turns_fail_their_case() -> None:
    assert case_outcome_of_turns(["passed", "error"]) == Outcome.FAILED
    assert case_outcome_of_turns(["passed", "failed", "skipped"]) == Outcome.FAILED
    assert case_outcome_of_turns(["error", "skipped", "skipped"]) == Outcome.FAILED
    assert case_outcome_of_turns(["passed", "passed"]) == Outcome.PASSED
    assert case_outcome_of_turns(["not_graded", "passed"]) == Outcome.NOT_GRADED


def test_a_metric_rolled_up_over_turns_failed_if_it_failed_on_one() -> None:
    assert rolled_up_metric_outcome(["passed", "error", "failed"]) == Outcome.FAILED
    assert rolled_up_metric_outcome(["passed", "not_graded"]) == Outcome.NOT_GRADED
    assert rolled_up_metric_outcome(["passed", "error"]) == Outcome.ERROR
    assert rolled_up_metric_outcome(["passed"]) == Outcome.PASSED


def test_a_run_passes_only_when_every_case_passed_and_errors_only_when_all_errored() -> None:
    def status(*cases: str) -> str:
        return summarize(case_outcomes=cases, turn_outcomes=[], metrics=[]).run_status()

    assert status("passed", "passed") == "passed"
    assert status("passed", "not_graded") == "failed"  # not graded is no pass either
    assert status("error", "error") == "error"
    assert status("error", "passed") == "failed"
    assert status() == "failed"


def test_a_case_is_never_failed_when_none_of_its_turns_failed() -> None:
    # Turns skipped with none failed (not re-gradable, stopped): the case could not be graded
    # whole; it did not fail. (A cancel makes the case "cancelled": the recorder stores it.)
    assert case_outcome_of_turns(["passed", "skipped"]) == Outcome.NOT_GRADED
    assert case_outcome_of_turns(["passed", "not_graded", "skipped"]) == Outcome.NOT_GRADED
