"""Re-grade a stored case: its transcript (inputs, responses, tool calls and results, usage,
timings) graded again with another agent.yaml's metrics and tool expectations, without
calling the agent. Django-free; the worker feeds it stored turns and records what it returns.

A stored turn is graded only when the chosen agent.yaml still has that turn with the same
input; otherwise it is recorded as skipped, "not re-gradable", with the reason, never guessed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from runs.core.engine.executor import as_text, is_tool_of, serialize_expected
from runs.core.engine.grading import grade_turn, graded_turn
from runs.core.engine.metrics import MetricRunner, TurnFacts, turn_metrics
from runs.core.verdicts.numbers import turn_text
from runs.core.wire.build import rollup_turns, single_turn_result
from runs.core.wire.models import TestResult, TurnResult
from runs.core.wire.times import grading_ms

if TYPE_CHECKING:
    from runs.core.agentconfig.loader import LoadedAgent
    from runs.core.agentconfig.test_cases import TestCase, Turn

NOT_REGRADABLE = "not re-gradable"
TurnCallback = Callable[[TurnResult], Awaitable[None]]


async def regrade_case(
    agent: LoadedAgent,
    *,
    case_name: str | None,
    case_index: int,
    stored: Sequence[TurnResult],
    multi_turn: bool,
    on_turn: TurnCallback | None = None,
    runner: MetricRunner | None = None,
) -> tuple[TestResult, list[TurnResult]]:
    """Grade the stored turns of one case with ``agent``'s config (its case of the same name,
    else of the same index when unnamed); returns the case result and its turns."""
    if not stored:
        raise ValueError(f"case #{case_index} has no stored turn to re-grade")
    case = config_case(agent, case_name, case_index)
    runner = runner or MetricRunner(agent)
    retrieval_tools = [t.name for t in agent.config.tools if getattr(t, "is_retrieval", False)]
    retrieval: list[str] = []
    stop_reason: str | None = None
    turns: list[TurnResult] = []
    for old in stored:
        turn = _config_turn(case, old.turn_index)
        problem = _not_regradable(case, case_name, case_index, turn, old)
        if problem is not None:
            result = _ungraded(old, f"{NOT_REGRADABLE}: {problem}")
        elif old.skipped:
            result = _ungraded(old, *(old.errors or ["skipped"]))
        elif stop_reason is not None:
            result = _ungraded(old, f"skipped: {stop_reason}")
        else:
            assert case is not None and turn is not None
            _collect_retrieval(old, retrieval_tools, retrieval)
            result, stop = await _regrade_turn(case, turn, old, retrieval, runner)
            stop_reason = stop_reason or stop
        turns.append(result)
        if on_turn is not None:
            await on_turn(result)
    timestamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    if multi_turn:
        rolled = rollup_turns(turns, test_name=case_name, timestamp=timestamp)
    else:
        rolled = single_turn_result(turns[0], case_name, timestamp)
    # Its time: the transcripts' turns and their new grading (runs.core.wire.times; no session).
    spent = rolled.execution_time_ms + sum(grading_ms(turn) for turn in turns)
    return rolled.model_copy(update={"execution_time_ms": spent}), turns


def config_case(agent: LoadedAgent, name: str | None, index: int) -> TestCase | None:
    """The case a stored case is graded by: the one of the same name, else (unnamed) the one
    at the same index, if unnamed too."""
    cases = agent.config.test_cases
    if name:
        return next((case for case in cases if case.name == name), None)
    if index < len(cases) and not cases[index].name:
        return cases[index]
    return None


def _config_turn(case: TestCase | None, index: int) -> Turn | None:
    if case is None:
        return None
    turns = case.as_turns()
    return turns[index] if index < len(turns) else None


def _not_regradable(
    case: TestCase | None, name: str | None, index: int, turn: Turn | None, old: TurnResult
) -> str | None:
    label = repr(name) if name else f"#{index}"
    if case is None:
        return f"the agent.yaml has no test case {label}"
    if turn is None:
        return f"test case {label} has no {turn_text(old.turn_index)} in the agent.yaml"
    if turn.input != old.input:
        turn_said = turn_text(old.turn_index)
        return f"{turn_said}'s input in the agent.yaml is not the one this run sent"
    return None


async def _regrade_turn(
    case: TestCase, turn: Turn, old: TurnResult, retrieval: list[str], runner: MetricRunner
) -> tuple[TurnResult, str | None]:
    metrics = turn_metrics(runner.agent.config, case, turn) if runner.agent else []
    facts = TurnFacts(
        case_name=case.name,
        turn_index=old.turn_index,
        input=old.input,
        response=old.response or "",
        ground_truth=turn.ground_truth,
        retrieval_context=turn.retrieval_context or (list(retrieval) or None),
        tool_invocations=[call.model_dump() for call in old.tool_invocations],
        turn_config=turn.turn_config,
    )
    answered = old.response is not None and not old.errors
    grades = await grade_turn(
        facts,
        metrics=metrics if answered else [],
        expected_tools=turn.tool_expectations(),
        runner=runner,
    )
    base = old.changed(
        ground_truth=turn.ground_truth, expected_tools=serialize_expected(turn.expected_tools)
    )
    result = graded_turn(base, grades)
    return result, grades.stop_reason


def _ungraded(old: TurnResult, *errors: str) -> TurnResult:
    return old.changed(
        metric_results=[],
        tools_matched=None,
        arg_match_details=None,
        grader_details=None,
        passed=False,
        skipped=True,
        errors=list(errors),
    )


def _collect_retrieval(old: TurnResult, tools: list[str], retrieval: list[str]) -> None:
    for call in old.tool_invocations:
        if call.error is None and any(is_tool_of(call.name, name) for name in tools):
            retrieval.append(as_text(call.result))
