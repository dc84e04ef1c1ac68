"""Why a run has its status, in words, from its counts (runs.core.verdicts.status)."""

from __future__ import annotations

from types import SimpleNamespace

from runs.core.verdicts.status import (
    ERROR_QUERY,
    FAILURES_QUERY,
    NOT_GRADED_QUERY,
    counters_of,
    most_common_cause,
    run_status_reason,
)
from runs.core.verdicts.summary import OutcomeCounts


def test_it_says_a_run_failed_only_by_cases_that_could_not_be_graded_and_that_none_failed() -> None:
    counts = OutcomeCounts(total=133, passed=129, not_graded=4)
    reason = run_status_reason(
        status="failed", counts=counts, not_graded_cause="AuthenticationError: no API key"
    )
    assert reason.sentence == (
        "failed: 4 cases could not be graded (AuthenticationError: no API key); none failed"
    )
    assert [part.query for part in reason.parts] == [NOT_GRADED_QUERY, ""]
    assert reason.look == "not_graded"  # amber, not the red of failing tests


def test_it_lists_failed_errored_and_not_graded_cases_worst_first_each_with_its_filter() -> None:
    counts = OutcomeCounts(total=10, passed=5, failed=2, error=1, not_graded=2)
    reason = run_status_reason(status="failed", counts=counts, error_cause="TimeoutError: 60 s")
    assert reason.text == (
        "2 cases failed; 1 case errored (TimeoutError: 60 s); 2 cases could not be graded"
    )
    assert [part.query for part in reason.parts] == [FAILURES_QUERY, ERROR_QUERY, NOT_GRADED_QUERY]
    assert reason.look == "failed"


def test_it_says_a_passed_run_passed_every_case() -> None:
    assert run_status_reason(status="passed", counts=OutcomeCounts(total=4, passed=4)).sentence == (
        "passed: all 4 cases passed"
    )


def test_it_says_an_errored_run_without_cases_by_its_run_error() -> None:
    reason = run_status_reason(
        status="error", counts=OutcomeCounts(), run_error="could not load agent.yaml\nTraceback"
    )
    assert reason.sentence == "error: could not load agent.yaml"


def test_it_says_how_far_a_cancelled_run_got() -> None:
    counts = OutcomeCounts(total=133, passed=90, failed=2, cancelled=41)
    reason = run_status_reason(status="cancelled", counts=counts)
    assert reason.text == "cancelled after 92 of 133 cases had run; 2 cases failed"
    assert reason.look == "cancelled"


def test_counts_from_the_run_counters_give_each_word_its_own_column_and_add_up() -> None:
    row = SimpleNamespace(
        total_cases=10, cases_done=8, passed_cases=4, failed_cases=2, errored_cases=1,
        not_graded_cases=0, cancelled_cases=1,
    )  # fmt: skip
    counts = counters_of(row)
    assert counts == OutcomeCounts(
        total=10, passed=4, failed=2, error=1, not_graded=0, cancelled=1, pending=2
    )
    assert counts.sum == counts.total


def test_the_most_common_cause_is_the_first_line_of_the_commonest_error() -> None:
    errors = [
        "[turn 2] TimeoutError: 60 s",
        "AuthenticationError: no api key\nTraceback ...",
        "AuthenticationError: no api key",
        None,
    ]
    assert most_common_cause(errors) == "AuthenticationError: no api key"
    assert most_common_cause([]) == ""
    assert len(most_common_cause(["x" * 500])) == 100
