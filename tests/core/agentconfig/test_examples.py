"""The example agent projects load cleanly, and the ConvFinQA grader judges their turns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from graders.code import GraderContext, GraderResult
from graders.matchers import RegexMatcher
from graders.tool_calls import assert_tools, tools_matched
from runs.core.agentconfig.loader import LoadedAgent, load_agent
from runs.core.agentconfig.metrics import CodeMetric
from runs.core.wire.models import ToolInvocation

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples").glob("*/agent.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_every_example_agent_loads_without_problems(path: Path) -> None:
    agent = load_agent(path, environ={})
    assert agent.config.test_cases
    assert agent.instructions.strip()
    transcript = agent.config.model.transcript
    assert transcript is not None
    cases = yaml.safe_load((agent.base_dir / transcript).read_text())["cases"]
    # one transcript entry per case, one step per turn
    assert {c.name: len(c.as_turns()) for c in agent.config.test_cases} == {
        name: len(turns) for name, turns in cases.items()
    }


def test_the_examples_include_convfinqa_and_support_bot() -> None:
    assert {p.parent.name for p in EXAMPLES} >= {"convfinqa", "support-bot"}


@pytest.fixture(scope="module")
def convfinqa() -> LoadedAgent:
    return load_agent(next(p for p in EXAMPLES if p.parent.name == "convfinqa"), environ={})


def test_convfinqa_asserts_tools_with_all_three_matcher_kinds(convfinqa: LoadedAgent) -> None:
    kinds = {
        type(matcher).__name__
        for case in convfinqa.config.test_cases
        for turn in case.as_turns()
        for expected in turn.tool_expectations()
        for matcher in (expected.args or {}).values()
    }
    assert kinds == {"LiteralMatcher", "FuzzyMatcher", "RegexMatcher"}
    assert RegexMatcher.__name__ in kinds


def replay(agent: LoadedAgent) -> list[tuple[str, int, GraderResult]]:
    """Run the transcript's tool calls on the real tools and grade each numeric turn."""
    assert agent.config.evaluations is not None
    grader = next(m for m in agent.config.evaluations.metrics if isinstance(m, CodeMetric))
    tools = {tool.name: tool.callable for tool in agent.config.tools if tool.type == "function"}
    transcript = yaml.safe_load((agent.base_dir / "transcript.yaml").read_text())["cases"]
    graded = []
    for case in agent.config.test_cases:
        for index, (turn, step) in enumerate(
            zip(case.as_turns(), transcript[case.name], strict=True)
        ):
            if turn.evaluations:  # the yes/no turn uses equality instead
                continue
            calls: list[dict[str, Any]] = [
                {**c, "result": tools[c["name"]](**c["args"]), "error": None}
                for c in step.get("tool_calls", [])
            ]
            ctx = GraderContext(
                turn_input=turn.input,
                agent_response=step["response"],
                ground_truth=turn.ground_truth,
                tool_invocations=calls,
                turn_index=index,
                test_case_name=case.name,
                turn_config=turn.turn_config or {},
            )
            graded.append((str(case.name), index, grader.callable(ctx)))
    return graded


def test_convfinqa_program_grader_passes_good_turns_and_fails_the_planted_one(
    convfinqa: LoadedAgent,
) -> None:
    graded = replay(convfinqa)
    failed = [(case, index) for case, index, result in graded if not result.passed]
    assert failed == [("northwind_capex_decline", 3)]
    assert len(graded) == 9
    _, _, bad = graded[-1]
    assert bad.details is not None and bad.details["program_matches_ground_truth"] is True
    assert [s["found_in_tool_results"] for s in bad.details["steps"]] == [False, False]


def test_convfinqa_programs_reproduce_every_ground_truth(convfinqa: LoadedAgent) -> None:
    for case, index, result in replay(convfinqa):
        assert result.details is not None
        assert result.details["program_matches_ground_truth"] is True, (case, index)


def test_convfinqa_tool_assertions_fail_only_on_the_planted_turn(convfinqa: LoadedAgent) -> None:
    tools = {tool.name: tool.callable for tool in convfinqa.config.tools if tool.type == "function"}
    transcript = yaml.safe_load((convfinqa.base_dir / "transcript.yaml").read_text())["cases"]
    unmatched = []
    for case in convfinqa.config.test_cases:
        for index, (turn, step) in enumerate(
            zip(case.as_turns(), transcript[case.name], strict=True)
        ):
            calls = [
                ToolInvocation(name=c["name"], args=c["args"]) for c in step.get("tool_calls", [])
            ]
            for call in calls:
                tools[call.name](**call.args)  # every scripted call is valid for the real tool
            if tools_matched(assert_tools(turn.tool_expectations(), calls)) is False:
                unmatched.append((case.name, index))
    assert unmatched == [("northwind_capex_decline", 3)]
