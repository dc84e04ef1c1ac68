from __future__ import annotations

import pytest

from runs.core.wire.build import rollup_turns, single_turn_result, summarize
from runs.core.wire.models import ProcessedFileInput, TestResult, TokenUsage, ToolInvocation
from tests.core.wire.factories import TIMESTAMP, metric, result, turn, usage

LOOKUP = ToolInvocation(name="lookup", args={"id": 1}, result="row")
CALC = ToolInvocation(name="calc", args={"a": 1}, result=2)
LOOKUP_AGAIN = ToolInvocation(name="lookup", args={"id": 2}, result="other row")


def _three_turn_case() -> TestResult:
    """Turn 0 passes; turn 1 fails (tools, metric, grader error) and skips `tone`;
    turn 2 is skipped because the session became unrecoverable."""
    turns = [
        turn(
            0,
            input="q0",
            response="a0",
            tool_calls=["lookup"],
            tool_invocations=[LOOKUP],
            expected_tools=["lookup"],
            tools_matched=True,
            metric_results=[
                metric("bleu", 0.4, threshold=0.4),
                metric("tone", 0.9, kind="geval", threshold=0.7, model_used="judge-1"),
            ],
            token_usage=usage(10, 5, cache_read_tokens=2),
            execution_time_ms=100,
        ),
        turn(
            1,
            input="q1",
            response="a1",
            tool_calls=["calc", "lookup"],
            tool_invocations=[CALC, LOOKUP_AGAIN],
            expected_tools=[{"name": "calc", "args": {"a": 1}, "count": 1}, "lookup"],
            tools_matched=False,
            metric_results=[metric("bleu", 0.8, passed=False, threshold=0.9)],
            token_usage=usage(20, 10, cache_creation_tokens=4),
            errors=["grader exploded"],
            passed=False,
            execution_time_ms=250,
        ),
        turn(
            2,
            input="q2",
            response=None,
            skipped=True,
            passed=False,
            errors=["skipped: two consecutive session errors"],
            execution_time_ms=0,
        ),
    ]
    return rollup_turns(turns, test_name="conversation", timestamp=TIMESTAMP)


def test_rollup_joins_inputs_and_keeps_the_last_response() -> None:
    rolled = _three_turn_case()

    assert rolled.test_input == "q0\n---\nq1\n---\nq2"
    assert rolled.agent_response is None  # the skipped last turn never answered
    assert rolled.test_name == "conversation"
    assert rolled.timestamp == TIMESTAMP
    assert rolled.ground_truth is None


def test_rollup_flattens_tool_calls_and_invocations_in_turn_order() -> None:
    rolled = _three_turn_case()

    assert rolled.tool_calls == ["lookup", "calc", "lookup"]
    assert rolled.tool_invocations == [LOOKUP, CALC, LOOKUP_AGAIN]


def test_rollup_unions_expected_tools_without_duplicates() -> None:
    assert _three_turn_case().expected_tools == [
        "lookup",
        {"name": "calc", "args": {"a": 1}, "count": 1},
    ]


def test_rollup_fails_tools_matched_when_any_asserting_turn_failed() -> None:
    assert _three_turn_case().tools_matched is False


def test_rollup_sums_token_usage_element_wise() -> None:
    assert _three_turn_case().token_usage == TokenUsage(
        prompt_tokens=30,
        completion_tokens=15,
        total_tokens=45,
        cache_creation_tokens=4,
        cache_read_tokens=2,
    )


def test_rollup_averages_each_metric_over_the_turns_that_ran_it() -> None:
    bleu, tone = _three_turn_case().metric_results

    assert (bleu.metric_name, bleu.kind, bleu.threshold) == ("bleu", "standard", 0.4)
    assert bleu.score == pytest.approx(0.6)
    assert bleu.passed is False
    assert (tone.metric_name, tone.kind, tone.score, tone.passed) == ("tone", "geval", 0.9, True)
    assert tone.model_used == "judge-1"


def test_rollup_prefixes_errors_with_their_turn_numbered_from_one() -> None:
    assert _three_turn_case().errors == [
        "[turn 2] grader exploded",
        "[turn 3] skipped: two consecutive session errors",
    ]


def test_rollup_fails_the_case_and_sums_time_and_keeps_every_turn() -> None:
    rolled = _three_turn_case()

    assert rolled.passed is False
    assert rolled.execution_time_ms == 350
    assert rolled.turns is not None
    assert [t.turn_index for t in rolled.turns] == [0, 1, 2]
    assert rolled.turns[2].skipped is True


def test_rollup_passes_when_every_turn_passed() -> None:
    rolled = rollup_turns([turn(0), turn(1)], test_name=None, timestamp=TIMESTAMP)

    assert rolled.passed is True
    assert rolled.errors == []


def test_rollup_leaves_tools_matched_and_expected_tools_unset_when_no_turn_asserted() -> None:
    rolled = rollup_turns([turn(0), turn(1)], test_name="t", timestamp=TIMESTAMP)

    assert rolled.tools_matched is None
    assert rolled.expected_tools is None


def test_rollup_ignores_turns_without_assertions_when_matching_tools() -> None:
    turns = [turn(0, tools_matched=True, expected_tools=["a"]), turn(1)]

    assert rollup_turns(turns, test_name="t", timestamp=TIMESTAMP).tools_matched is True


def test_rollup_reports_no_usage_when_no_turn_reported_any() -> None:
    assert rollup_turns([turn(0), turn(1)], test_name="t", timestamp=TIMESTAMP).token_usage is None


def test_rollup_omits_a_metric_that_no_turn_ran() -> None:
    turns = [turn(0, metric_results=[metric("bleu")]), turn(1)]

    rolled = rollup_turns(turns, test_name="t", timestamp=TIMESTAMP)

    assert [m.metric_name for m in rolled.metric_results] == ["bleu"]
    assert rollup_turns([turn(0)], test_name="t", timestamp=TIMESTAMP).metric_results == []


def test_rollup_joins_metric_errors_and_averages_only_real_scores() -> None:
    turns = [
        turn(0, metric_results=[metric("judge", None, passed=False, error="no verdict")]),
        turn(1, metric_results=[metric("judge", 0.7)]),
    ]

    (judge,) = rollup_turns(turns, test_name="t", timestamp=TIMESTAMP).metric_results

    assert judge.score == 0.7
    assert judge.passed is False
    assert judge.error == "[turn 1] no verdict"


def test_rollup_leaves_the_score_empty_when_no_turn_could_grade() -> None:
    turns = [
        turn(i, metric_results=[metric("judge", None, passed=False, error="x")]) for i in (0, 1)
    ]

    (judge,) = rollup_turns(turns, test_name="t", timestamp=TIMESTAMP).metric_results

    assert judge.score is None
    assert judge.error == "[turn 1] x\n[turn 2] x"


def test_rollup_sums_judge_accounting() -> None:
    turns = [
        turn(i, metric_results=[metric("g", 1.0, judge_usage=usage(1, 1), judge_cost_usd=0.5)])
        for i in (0, 1)
    ]

    (g,) = rollup_turns(turns, test_name="t", timestamp=TIMESTAMP).metric_results

    assert g.judge_usage == usage(2, 2)
    assert g.judge_cost_usd == 1.0


def test_rollup_refuses_an_empty_turn_list() -> None:
    with pytest.raises(ValueError, match="at least one turn"):
        rollup_turns([], test_name="t", timestamp=TIMESTAMP)


def test_rollup_keeps_the_processed_files_it_is_given() -> None:
    files = [ProcessedFileInput(original={"path": "a.pdf"}, markdown_content="# A")]

    rolled = rollup_turns([turn(0)], test_name="t", timestamp=TIMESTAMP, processed_files=files)

    assert rolled.processed_files == files


# ------------------------------------------------------------------ single-turn


def test_a_single_turn_case_copies_its_turn_and_keeps_the_ground_truth() -> None:
    only = turn(
        0,
        input="q",
        response="a",
        ground_truth="gt",
        tool_calls=["lookup"],
        tool_invocations=[LOOKUP],
        expected_tools=["lookup"],
        tools_matched=True,
        metric_results=[metric("bleu", 0.3, passed=False)],
        token_usage=usage(1, 2),
        errors=["boom"],
        passed=False,
        execution_time_ms=42,
    )

    single = single_turn_result(only, "legacy", TIMESTAMP)

    assert single.turns is None
    assert (single.test_name, single.test_input, single.agent_response) == ("legacy", "q", "a")
    assert single.ground_truth == "gt"
    assert single.tool_calls == ["lookup"]
    assert single.tool_invocations == [LOOKUP]
    assert single.expected_tools == ["lookup"]
    assert single.tools_matched is True
    assert single.metric_results == only.metric_results
    assert single.token_usage == usage(1, 2)
    assert single.errors == ["boom"]  # no turn prefix on a legacy case
    assert (single.passed, single.execution_time_ms, single.timestamp) == (False, 42, TIMESTAMP)


# ------------------------------------------------------------------ summary


def test_summary_counts_cases_and_rounds_the_pass_rate() -> None:
    results = [result("a"), result("b"), result("c", passed=False)]

    summary = summarize(results, total_duration_ms=1234)

    assert (summary.total_tests, summary.passed, summary.failed) == (3, 2, 1)
    assert summary.pass_rate == 66.67
    assert summary.total_duration_ms == 1234


def test_summary_counts_metrics_and_averages_their_real_scores() -> None:
    results = [
        result("a", metric_results=[metric("bleu", 0.2), metric("judge", None, error="x")]),
        result("b", metric_results=[metric("bleu", 0.6)]),
    ]

    summary = summarize(results, total_duration_ms=0)

    assert summary.metrics_evaluated == {"bleu": 2, "judge": 1}
    assert summary.average_scores == {"bleu": pytest.approx(0.4)}


def test_summary_of_no_results_has_a_zero_pass_rate() -> None:
    summary = summarize([], total_duration_ms=0)

    assert (summary.total_tests, summary.pass_rate) == (0, 0.0)
