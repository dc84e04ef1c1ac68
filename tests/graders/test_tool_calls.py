from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from graders.matchers import ArgMatcher, parse_arg_matcher
from graders.tool_calls import (
    ToolAssertionVerdict,
    ToolExpectation,
    assert_tools,
    tools_matched,
)


@dataclass(frozen=True)
class ToolCall:
    """A call as the engine passes it (anything with a name and args)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


def expect(name: str, args: dict[str, Any] | None = None, count: int = 1) -> ToolExpectation:
    matchers: dict[str, ArgMatcher] | None = None
    if args is not None:
        matchers = {key: parse_arg_matcher(value) for key, value in args.items()}
    return ToolExpectation(name=name, args=matchers, count=count)


def one(expectation: ToolExpectation, calls: list[ToolCall]) -> ToolAssertionVerdict:
    [verdict] = assert_tools([expectation], calls)
    return verdict


SUBTRACT = ToolCall("subtract", {"a": 206588, "b": 181001})

# (name, expectation, calls, passes?, matched call index)
ASSERTION_CASES: list[tuple[str, ToolExpectation, list[ToolCall], bool, int | None]] = [
    ("name only matches any call", expect("subtract"), [SUBTRACT], True, 0),
    ("literal args match numerically", expect("subtract", {"a": 206588.0}), [SUBTRACT], True, 0),
    ("a wrong literal fails", expect("subtract", {"a": 206000}), [SUBTRACT], False, None),
    ("extra args are allowed", expect("subtract", {"b": 181001}), [SUBTRACT], True, 0),
    ("a missing asserted arg fails", expect("subtract", {"c": 1}), [SUBTRACT], False, None),
    ("extra tools are allowed", expect("subtract"), [ToolCall("add", {}), SUBTRACT], True, 1),
    (
        "the name is a substring of the called name",
        expect("lookup"),
        [ToolCall("mcp__fin__lookup", {}), ToolCall("finance-lookup", {})],
        True,
        0,
    ),
    ("the name match is case sensitive", expect("Lookup"), [ToolCall("lookup", {})], False, None),
    (
        "only the second of two calls matches",
        expect("subtract", {"a": {"fuzzy": "206,588"}}),
        [ToolCall("subtract", {"a": 1}), ToolCall("subtract", {"a": "206588"})],
        True,
        1,
    ),
    (
        "count is a lower bound",
        expect("subtract", count=2),
        [SUBTRACT, SUBTRACT, SUBTRACT],
        True,
        0,
    ),
    (
        "count 2 with one matching call fails and names no matched call",
        expect("subtract", {"a": 206588}, count=2),
        [SUBTRACT, ToolCall("subtract", {"a": 5})],
        False,
        None,
    ),
    ("no calls at all fails", expect("subtract"), [], False, None),
]


@pytest.mark.parametrize(
    ("expectation", "calls", "passes", "matched"),
    [pytest.param(e, c, p, m, id=name) for name, e, c, p, m in ASSERTION_CASES],
)
def test_each_assertion_case_passes_or_fails_as_the_contract_says(
    expectation: ToolExpectation, calls: list[ToolCall], passes: bool, matched: int | None
) -> None:
    verdict = one(expectation, calls)

    assert verdict.passed is passes
    assert verdict.matched_call_index == matched
    assert (verdict.unmatched_reason is None) is passes


def test_a_missing_arg_fails_with_a_reason_naming_it() -> None:
    verdict = one(expect("subtract", {"a": 206588, "c": 3}), [SUBTRACT])

    assert verdict.unmatched_reason == "arg 'c': missing from the call (call args: a, b)"
    missing = verdict.arg_verdicts[1]
    assert (missing.arg, missing.actual_present, missing.actual) == ("c", False, None)
    assert not missing.passed


def test_no_call_by_that_name_lists_the_calls_that_were_made() -> None:
    calls = [ToolCall("add", {}), ToolCall("divide", {}), ToolCall("add", {})]

    verdict = one(expect("subtract"), calls)

    assert verdict.unmatched_reason == (
        "no call to a tool named like 'subtract' (calls: add, divide)"
    )
    assert verdict.closest_call_index is None
    assert verdict.arg_verdicts == []


def test_no_calls_at_all_says_so() -> None:
    verdict = one(expect("subtract"), [])

    assert verdict.unmatched_reason == (
        "no call to a tool named like 'subtract' (no tools were called)"
    )


def test_an_unmet_count_says_how_many_matched() -> None:
    verdict = one(expect("subtract", {"a": 206588}, count=2), [SUBTRACT])

    assert not verdict.passed
    assert verdict.unmatched_reason == "1 of 2 required calls matched"
    assert verdict.matching_call_indices == [0]


def test_a_failed_count_names_no_matched_call_but_reports_the_closest_one() -> None:
    calls = [ToolCall("add", {}), SUBTRACT, ToolCall("subtract", {"a": 5})]

    verdict = one(expect("subtract", {"a": 206588}, count=2), calls)

    assert not verdict.passed
    assert verdict.matched_call_index is None
    assert verdict.matching_call_indices == [1]
    assert verdict.closest_call_index == 1
    assert [v.passed for v in verdict.arg_verdicts] == [True]
    wire = verdict.to_wire()
    assert (wire["matched_call_index"], wire["closest_call_index"]) == (None, 1)
    assert "candidate_call_index" not in wire


def test_a_passing_assertion_names_its_matched_call_and_the_same_closest_call() -> None:
    calls = [ToolCall("add", {}), ToolCall("subtract", {"a": 5}), SUBTRACT, SUBTRACT]

    verdict = one(expect("subtract", {"a": 206588}, count=2), calls)

    assert verdict.passed
    assert verdict.matched_call_index == 2
    assert verdict.matching_call_indices == [2, 3]
    assert verdict.closest_call_index == 2
    wire = verdict.to_wire()
    assert (wire["matched_call_index"], wire["closest_call_index"]) == (2, 2)


def test_a_failed_arg_assertion_names_no_matched_call_and_diffs_the_closest() -> None:
    calls = [ToolCall("subtract", {"a": 1, "b": 2}), ToolCall("subtract", {"a": 206588, "b": 2})]

    verdict = one(expect("subtract", {"a": 206588, "b": 181001}), calls)

    assert verdict.matched_call_index is None
    assert verdict.closest_call_index == 1
    assert [(v.arg, v.actual, v.passed) for v in verdict.arg_verdicts] == [
        ("a", 206588, True),
        ("b", 2, False),
    ]


def test_a_wrong_arg_reason_shows_the_matcher_and_both_values() -> None:
    calls = [ToolCall("subtract", {"a": 205000})]

    verdict = one(expect("subtract", {"a": {"fuzzy": "206588"}}), calls)

    assert verdict.unmatched_reason == "arg 'a': expected fuzzy '206588', got 205000"


def test_the_closest_candidate_is_the_call_with_most_passing_args() -> None:
    calls = [
        ToolCall("subtract", {"a": 1, "b": 2}),
        ToolCall("subtract", {"a": 206588, "b": 2}),
        ToolCall("subtract", {"a": 206588, "b": 3}),
    ]

    verdict = one(expect("subtract", {"a": 206588, "b": 181001}), calls)

    assert verdict.closest_call_index == 1
    assert [v.passed for v in verdict.arg_verdicts] == [True, False]
    assert verdict.unmatched_reason == (
        "arg 'b': expected 181001, got 2 (closest of 3 calls named like 'subtract': call 1)"
    )


def test_arg_verdicts_describe_the_matched_call_when_there_is_one() -> None:
    calls = [ToolCall("subtract", {"a": "x"}), ToolCall("subtract", {"a": "14.14 %"})]

    verdict = one(expect("subtract", {"a": {"fuzzy": "0.1414"}}), calls)

    [arg] = verdict.arg_verdicts
    assert (arg.arg, arg.matcher, arg.expected, arg.actual) == ("a", "fuzzy", "0.1414", "14.14 %")
    assert arg.expected_normalized == pytest.approx(0.1414)
    assert arg.actual_normalized == pytest.approx(0.1414)
    assert arg.passed and arg.actual_present and arg.reason is None


def test_malformed_call_args_count_as_no_args() -> None:
    verdict = one(expect("subtract", {"a": 1}), [ToolCall("subtract", "not json")])  # type: ignore[arg-type]

    assert not verdict.passed
    assert verdict.unmatched_reason is not None
    assert "missing" in verdict.unmatched_reason


def test_to_wire_has_the_seed_keys_and_the_diff_and_is_json_safe() -> None:
    calls = [ToolCall("subtract", {"a": float("nan"), "b": 181001})]
    verdict = one(expect("subtract", {"a": 1, "b": {"regex": r"\d+"}}), calls)

    wire = verdict.to_wire()

    json.dumps(wire, allow_nan=False)
    assert wire["tool"] == "subtract"
    assert wire["args_asserted"] == ["a", "b"]
    assert wire["matched_call_index"] is None
    assert wire["unmatched_reason"] == "arg 'a': expected 1, got nan"
    assert wire["passed"] is False
    assert wire["count"] == 1
    assert wire["matching_calls"] == []
    assert wire["closest_call_index"] == 0
    assert wire["args"][0] == {
        "arg": "a",
        "matcher": "literal",
        "expected": 1,
        "actual": "nan",
        "actual_present": True,
        "expected_normalized": 1,
        "actual_normalized": "nan",
        "passed": False,
        "reason": "expected 1, got nan",
    }
    assert wire["args"][1]["matcher"] == "regex"
    assert wire["args"][1]["passed"] is True


def test_one_verdict_per_expectation_in_order() -> None:
    verdicts = assert_tools([expect("add"), expect("subtract")], [SUBTRACT])

    assert [v.tool for v in verdicts] == ["add", "subtract"]
    assert [v.passed for v in verdicts] == [False, True]


def test_tools_matched_is_none_without_expectations_and_all_passed_otherwise() -> None:
    assert tools_matched([]) is None
    assert tools_matched(assert_tools([expect("subtract")], [SUBTRACT])) is True
    assert tools_matched(assert_tools([expect("subtract"), expect("add")], [SUBTRACT])) is False
