"""The public grading API: a turn's stored facts graded against configs as written in
agent.yaml, with the results the engine records."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from runs.core.engine.grading import (
    TurnFacts,
    TurnGrades,
    expectations_from_yaml,
    grade_turn,
    grade_turn_sync,
    metrics_from_yaml,
)
from runs.core.wire.models import ToolInvocation


def test_the_documented_example_grades_a_numeric_answer(tmp_path: Path) -> None:
    numeric = {"type": "standard", "metric": "numeric", "accept_percent": True}
    metrics = metrics_from_yaml([numeric], base_dir=tmp_path)
    facts = TurnFacts(input="What was the change?", response="14.1%", ground_truth="0.141")
    grades = grade_turn_sync(facts, metrics=metrics)
    (result,) = grades.metric_results
    assert (result.metric_name, result.kind, result.score, result.passed) == (
        "numeric",
        "standard",
        1.0,
        True,
    )
    assert grades.passed


def test_tool_expectations_are_asserted_on_the_turns_calls() -> None:
    expected = expectations_from_yaml([{"name": "divide", "args": {"a": {"fuzzy": "25,587"}}}])
    calls = [{"name": "divide", "args": {"a": 25587, "b": 181001}, "result": 0.1413}]
    grades = grade_turn_sync(TurnFacts(input="q", tool_invocations=calls), expected_tools=expected)
    assert grades.tools_matched is True and grades.arg_match_details
    assert grades.arg_match_details[0]["tool"] == "divide"
    missing = grade_turn_sync(TurnFacts(input="q"), expected_tools=expected)
    assert missing.tools_matched is False and not missing.passed


def test_a_code_grader_is_resolved_relative_to_the_base_dir(tmp_path: Path) -> None:
    (tmp_path / "checks.py").write_text(
        "from graders.code import GraderResult\n\n"
        "def longer_than(ctx):\n"
        "    n = ctx.turn_config.get('n', 3)\n"
        "    return GraderResult(score=float(len(ctx.agent_response) > n), details={'n': n})\n"
    )
    metrics = metrics_from_yaml(
        [{"type": "code", "grader": "checks:longer_than", "name": "long"}], base_dir=tmp_path
    )
    facts = TurnFacts(input="q", response="a long answer", turn_config={"n": 5})
    grades = grade_turn_sync(facts, metrics=metrics)
    assert grades.metric_results[0].passed and grades.grader_details == {"long": {"n": 5}}


def test_metrics_that_need_a_ground_truth_are_skipped_without_one(tmp_path: Path) -> None:
    metrics = metrics_from_yaml([{"type": "standard", "metric": "equality"}], base_dir=tmp_path)
    grades = grade_turn_sync(TurnFacts(input="q", response="a"), metrics=metrics)
    assert grades.metric_results == [] and grades.passed


def test_the_sync_form_refuses_llm_judges_and_the_async_form_grades_them(tmp_path: Path) -> None:
    metrics = metrics_from_yaml(
        [
            {
                "type": "geval",
                "name": "polite",
                "criteria": "Is it polite?",
                "model": {"provider": "scripted", "name": "no-judge"},
            }
        ],
        base_dir=tmp_path,
    )
    with pytest.raises(ValueError, match="need an LLM judge: await grade_turn"):
        grade_turn_sync(TurnFacts(input="q", response="a"), metrics=metrics)
    grades = asyncio.run(grade_turn(TurnFacts(input="q", response="a"), metrics=metrics))
    (result,) = grades.metric_results
    assert result.error and "cannot judge" in result.error and not result.passed


def test_a_bad_metric_config_names_the_item_and_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"metrics\[1\]"):
        metrics_from_yaml(
            [{"type": "standard", "metric": "bleu"}, {"type": "standard", "metric": "vibes"}],
            base_dir=tmp_path,
        )


def test_a_fail_on_error_metric_that_cannot_grade_says_the_case_must_stop(tmp_path: Path) -> None:
    (tmp_path / "boom.py").write_text("def check(ctx):\n    raise RuntimeError('no')\n")
    metrics = metrics_from_yaml(
        [{"type": "code", "grader": "boom:check", "fail_on_error": True}], base_dir=tmp_path
    )
    grades = grade_turn_sync(TurnFacts(input="q", response="a"), metrics=metrics)
    assert grades.stop_reason and "RuntimeError: no" in grades.stop_reason


# --- the sync form at grader speed: same grades, nothing kept between calls --------------------

CHECKS = """\
import asyncio
import contextvars
import threading
import time

from graders.code import GraderResult

seen = contextvars.ContextVar("seen", default=None)


def echo(ctx):
    seen.set(ctx.agent_response)
    calls = [t["name"] for t in ctx.tool_invocations]
    return GraderResult(
        score=0.5 if ctx.agent_response else 0.0,
        reason=f"graded {ctx.agent_response!r}",
        details={"response": ctx.agent_response, "calls": calls},
    )


def crash(ctx):
    raise KeyError("program")


def leave(ctx):
    raise SystemExit(3)


def words(ctx):
    return "a string"


async def later(ctx):
    await asyncio.sleep(0)
    return len(ctx.agent_response) > 3


def slow(ctx):
    time.sleep(float(ctx.turn_config.get("sleep", 0)))
    return True


def where(ctx):
    return GraderResult(score=1.0, details={"thread": threading.get_ident()})
"""

METRICS: list[dict[str, Any]] = [
    {"type": "standard", "metric": "equality", "case_insensitive": True, "strip_whitespace": True},
    {"type": "standard", "metric": "numeric", "name": "pct", "accept_percent": True},
    {"type": "standard", "metric": "equality", "name": "leaf", "response_path": "answer.value"},
    {"type": "code", "grader": "checks:echo", "name": "echo", "threshold": 0.4},
    {"type": "code", "grader": "checks:crash", "name": "crash"},
    {"type": "code", "grader": "checks:leave", "name": "leave"},
    {"type": "code", "grader": "checks:words", "name": "words"},
    {"type": "code", "grader": "checks:later", "name": "later"},
    {"type": "code", "grader": "checks:slow", "name": "bounded", "timeout_ms": 5000},
]
EXPECTED: list[Any] = [
    "lookup",
    {"name": "subtract", "args": {"a": 206588, "b": {"fuzzy": "181,001"}}},
    {"name": "divide", "args": {"a": {"regex": "25587(\\.0+)?"}, "b": 181001.0}, "count": 2},
]
CALLS: list[dict[str, Any]] = [
    {"name": "lookup", "args": {"year": 2009}, "result": 206588},
    {"name": "mcp__fin__subtract", "args": {"a": 206588, "b": "181 001"}, "result": 25587},
    {"name": "divide", "args": {"a": 25587.0, "b": 181001}, "result": 0.14136},
    {"name": "divide", "args": {"a": "25587"}, "result": None, "bytes": 4, "error": "bad args"},
]
FACTS = [
    TurnFacts(input="q", response="14.14%", ground_truth="0.1414", tool_invocations=CALLS),
    TurnFacts(input="q", response=" 14.14 % ", ground_truth="14.14%", tool_invocations=CALLS[:2]),
    TurnFacts(input="q", response='{"answer": {"value": "Yes"}}', ground_truth="Yes"),
    TurnFacts(input="q", response="about a seventh", ground_truth="0.1414", turn_config={"k": 1}),
    TurnFacts(input="q", response="", ground_truth=None, tool_invocations=CALLS[3:]),
]


def _shown(grades: TurnGrades) -> dict[str, Any]:
    """A turn's grades as recorded, without the timings."""
    return {
        "metrics": [
            m.model_dump(mode="json", exclude={"evaluation_time_ms"}) for m in grades.metric_results
        ],
        "details": grades.grader_details,
        "tools": grades.arg_match_details,
        "matched": grades.tools_matched,
        "stop": grades.stop_reason,
        "passed": grades.passed,
    }


def _configs(tmp_path: Path) -> tuple[list[Any], list[Any]]:
    (tmp_path / "checks.py").write_text(CHECKS)
    return metrics_from_yaml(METRICS, base_dir=tmp_path), expectations_from_yaml(EXPECTED)


def test_the_sync_form_records_exactly_what_the_async_form_does(tmp_path: Path) -> None:
    metrics, expected = _configs(tmp_path)
    for facts in FACTS:
        sync = grade_turn_sync(facts, metrics=metrics, expected_tools=expected)
        live = asyncio.run(grade_turn(facts, metrics=metrics, expected_tools=expected))
        assert _shown(sync) == _shown(live)


def test_representative_grades_are_pinned(tmp_path: Path) -> None:
    metrics, expected = _configs(tmp_path)
    grades = grade_turn_sync(FACTS[0], metrics=metrics, expected_tools=expected)
    outcome = {m.metric_name: (m.score, m.passed, m.error) for m in grades.metric_results}
    assert outcome == {
        "equality": (0.0, False, None),
        "pct": (1.0, True, None),
        "leaf": (None, False, "response_path 'answer.value': the response is not JSON: '14.14%'"),
        "echo": (0.5, True, None),
        "crash": (None, False, "KeyError: 'program'"),
        "leave": (None, False, "SystemExit: 3"),
        "words": (None, False, SUPPORTED_TYPES),
        "later": (1.0, True, None),
        "bounded": (1.0, True, None),
    }
    assert grades.grader_details == {
        "echo": {
            "response": "14.14%",
            "calls": ["lookup", "mcp__fin__subtract", "divide", "divide"],
        }
    }
    lookup, subtract, divide = grades.arg_match_details or []
    assert (lookup["passed"], lookup["matched_call_index"]) == (True, 0)
    assert (subtract["passed"], subtract["matched_call_index"]) == (True, 1)
    assert divide["passed"] is False and divide["matching_calls"] == [2]
    assert divide["unmatched_reason"] == "1 of 2 required calls matched"
    assert grades.tools_matched is False and not grades.passed


SUPPORTED_TYPES = "unsupported return type str; return a bool, a number in 0..1 or a GraderResult"


def test_tool_calls_given_as_dicts_or_wire_objects_grade_the_same() -> None:
    expected = expectations_from_yaml(EXPECTED)
    as_dicts = grade_turn_sync(
        TurnFacts(input="q", tool_invocations=CALLS), expected_tools=expected
    )
    wire = [ToolInvocation.model_validate(call) for call in CALLS]
    as_wire = grade_turn_sync(TurnFacts(input="q", tool_invocations=wire), expected_tools=expected)  # type: ignore[arg-type]
    assert as_dicts.arg_match_details == as_wire.arg_match_details


@pytest.mark.parametrize(
    "call",
    [
        {"name": 3, "args": {}},
        {"name": "divide", "args": {"a": 1}, "extra": True},
        {"name": "divide", "args": None},
        {"name": "divide", "bytes": -1},
    ],
)
def test_a_malformed_tool_call_is_still_refused(call: dict[str, Any]) -> None:
    expected = expectations_from_yaml(["divide"])
    with pytest.raises(ValidationError):
        grade_turn_sync(TurnFacts(input="q", tool_invocations=[call]), expected_tools=expected)


def test_nothing_of_one_call_appears_in_the_next(tmp_path: Path) -> None:
    metrics, expected = _configs(tmp_path)
    first = grade_turn_sync(FACTS[0], metrics=metrics, expected_tools=expected)
    second = grade_turn_sync(FACTS[4], metrics=metrics, expected_tools=expected)
    assert second.grader_details == {"echo": {"response": "", "calls": ["divide"]}}
    echo = next(m for m in second.metric_results if m.metric_name == "echo")
    assert (echo.score, echo.reasoning) == (0.0, "graded ''")
    assert [m.metric_name for m in second.metric_results] == [
        "echo",
        "crash",
        "leave",
        "words",
        "later",
        "bounded",
    ]
    lookup, subtract, divide = second.arg_match_details or []
    assert lookup["unmatched_reason"] == "no call to a tool named like 'lookup' (calls: divide)"
    assert subtract["closest_call_index"] is None and divide["matching_calls"] == []
    # ... and the first call's grades are left as they were.
    assert first.grader_details["echo"]["response"] == "14.14%"
    assert len(first.metric_results) == len(METRICS)
    assert first.metric_results is not second.metric_results


def test_a_grader_cannot_change_the_callers_context_or_facts(tmp_path: Path) -> None:
    metrics, _ = _configs(tmp_path)
    echo = next(m for m in metrics if m.metric_name == "echo")
    seen = echo.callable.__globals__["seen"]  # the ContextVar the grader sets
    facts = FACTS[3]
    grades = grade_turn_sync(facts, metrics=metrics)
    assert grades.grader_details["echo"]["response"] == "about a seventh"
    assert seen.get() is None
    assert facts.turn_config == {"k": 1} and facts.response == "about a seventh"


def test_the_sync_form_refuses_to_run_inside_a_running_event_loop(tmp_path: Path) -> None:
    numeric = metrics_from_yaml([{"type": "standard", "metric": "numeric"}], base_dir=tmp_path)
    facts = TurnFacts(input="q", response="1", ground_truth="1")

    async def inside() -> None:
        grade_turn_sync(facts, metrics=numeric)

    with pytest.raises(RuntimeError, match=r"running event loop: await grade_turn"):
        asyncio.run(inside())

    async def beside() -> TurnGrades:
        # A worker thread of a running loop has no loop of its own: it may grade.
        return await asyncio.to_thread(grade_turn_sync, facts, metrics=numeric)

    assert asyncio.run(beside()).passed


def test_several_threads_grade_with_the_same_configs_at_once(tmp_path: Path) -> None:
    metrics, expected = _configs(tmp_path)
    alone = [_shown(grade_turn_sync(f, metrics=metrics, expected_tools=expected)) for f in FACTS]

    def grade_all(_: int) -> list[dict[str, Any]]:
        shown = []
        for _round in range(5):
            for facts in FACTS:
                grades = grade_turn_sync(facts, metrics=metrics, expected_tools=expected)
                shown.append(_shown(grades))
        return shown

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(grade_all, range(4)))
    assert all(shown == alone * 5 for shown in results)


def test_a_code_grader_with_a_timeout_gives_up_in_time_and_the_next_call_is_not_held_up(
    tmp_path: Path,
) -> None:
    (tmp_path / "checks.py").write_text(CHECKS)
    bounded = metrics_from_yaml(
        [{"type": "code", "grader": "checks:slow", "name": "bounded", "timeout_ms": 100}],
        base_dir=tmp_path,
    )
    stuck = grade_turn_sync(
        TurnFacts(input="q", turn_config={"sleep": 1.5}), metrics=bounded
    ).metric_results[0]
    assert stuck.error == "timed out after 0.1s" and not stuck.passed
    # The stuck grader still holds its thread: the next call gets another one and is graded.
    quick = grade_turn_sync(TurnFacts(input="q"), metrics=bounded).metric_results[0]
    assert quick.passed and quick.error is None


@pytest.mark.parametrize(
    "call",
    [
        {"name": "divide", "args": {"a": 1}},
        {"name": "divide", "args": {"a": 1}, "result": 0.5, "error": None},
        {"name": "divide", "args": {}, "result": {"nested": [1]}, "bytes": 12, "duration_ms": 3},
        {"name": "divide", "args": {"a": 1}, "result": 10**5000},
        {"name": "divide", "args": {"a": 1}, "result": [1, 2]},
        {"name": "divide", "args": {1: 1}},
        {"name": "divide", "bytes": True},
        {"name": "divide", "duration_ms": "3"},
        {"name": "divide", "error": 3},
        {"args": {}},
    ],
)
def test_a_tool_call_read_without_validation_is_one_validation_accepts(
    call: dict[str, Any],
) -> None:
    from runs.core.engine.grading import _plain_call

    if _plain_call(call):
        wire = ToolInvocation.model_validate(call)
        assert (wire.name, wire.args) == (call["name"], call.get("args", {}))
