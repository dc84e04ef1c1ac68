"""The public grading API: a turn's stored facts graded against configs as written in
agent.yaml, with the results the engine records."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runs.engine.grading import (
    TurnFacts,
    expectations_from_yaml,
    grade_turn,
    grade_turn_sync,
    metrics_from_yaml,
)


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
