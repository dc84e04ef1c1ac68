"""The one mapping between the wire models (``runs.report``) and the database rows.

Wire -> rows: ``case_values`` (a case row's result columns) and ``turn_rows`` (a case's turn rows
with their metric rows); rows -> wire: ``case_to_wire``, built from a case row and, for a
multi-turn case, its turn rows (``turn_to_wire`` for one turn row). Verdicts are decided here,
once, as the rows are written
(``runs.report.outcomes``); nothing recomputes them on read. Adding a result field means adding
it to the wire model, the row model and this module, nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from runs.models import CaseResult, MetricResult, TurnResult
from runs.report import models as wire
from runs.report.outcomes import (
    case_kind_outcomes,
    case_outcome,
    metric_outcome,
    turn_kind_outcomes,
    turn_outcome,
)

# --- wire -> rows ---------------------------------------------------------------------------


def case_values(result: wire.TestResult, turns: Sequence[wire.TurnResult]) -> dict[str, Any]:
    """The result columns of a case row (its roll-up), verdict included."""
    return {
        "test_input": result.test_input,
        "agent_response": result.agent_response,
        "ground_truth": result.ground_truth,
        "expected_tools": result.expected_tools,
        "tool_calls": result.tool_calls,
        "tools_matched": result.tools_matched,
        "metric_results": [m.model_dump(mode="json") for m in result.metric_results],
        "processed_files": [f.model_dump(mode="json") for f in result.processed_files],
        "errors": result.errors,
        "execution_time_ms": result.execution_time_ms,
        "token_usage": _usage(result.token_usage),
        "timestamp": result.timestamp,
        "passed": result.passed,
        "outcome": case_outcome(result),
        "kind_outcomes": case_kind_outcomes(turn_kind_outcomes(turn) for turn in turns),
        "turn_count": len(turns),
        "turns_passed": sum(1 for turn in turns if turn.passed),
    }


def turn_rows(
    *, run_id: int, case: CaseResult, turns: Iterable[wire.TurnResult]
) -> list[tuple[TurnResult, list[MetricResult]]]:
    """Unsaved turn rows, each with its unsaved metric rows (their ``turn`` set on save)."""
    return [(_turn_row(run_id, case, turn), _metric_rows(run_id, turn)) for turn in turns]


def case_turns(result: wire.TestResult) -> list[wire.TurnResult]:
    """Every case has turn rows: a single-turn (legacy) case is seen as its one turn."""
    if result.turns is not None:
        return list(result.turns)
    return [
        wire.TurnResult(
            turn_index=0,
            input=result.test_input,
            response=result.agent_response,
            ground_truth=result.ground_truth,
            expected_tools=result.expected_tools,
            tool_calls=result.tool_calls,
            tool_invocations=result.tool_invocations,
            tools_matched=result.tools_matched,
            metric_results=result.metric_results,
            passed=result.passed,
            execution_time_ms=result.execution_time_ms,
            token_usage=result.token_usage,
            errors=result.errors,
        )
    ]


def _turn_row(run_id: int, case: CaseResult, turn: wire.TurnResult) -> TurnResult:
    return TurnResult(
        run_id=run_id,
        case=case,
        index=turn.turn_index,
        input=turn.input,
        response=turn.response,
        ground_truth=turn.ground_truth,
        expected_tools=turn.expected_tools,
        tool_calls=turn.tool_calls,
        tool_invocations=[call.model_dump(mode="json") for call in turn.tool_invocations],
        tools_matched=turn.tools_matched,
        arg_match_details=turn.arg_match_details,
        passed=turn.passed,
        skipped=turn.skipped,
        outcome=turn_outcome(turn),
        kind_outcomes=turn_kind_outcomes(turn),
        execution_time_ms=turn.execution_time_ms,
        token_usage=_usage(turn.token_usage),
        errors=turn.errors,
        grader_details=turn.grader_details,
    )


def _metric_rows(run_id: int, turn: wire.TurnResult) -> list[MetricResult]:
    return [
        MetricResult(
            run_id=run_id,
            position=position,
            metric_name=metric.metric_name,
            kind=metric.kind,
            score=metric.score,
            threshold=metric.threshold,
            passed=metric.passed,
            outcome=metric_outcome(metric),
            scale="" if metric.scale is None else str(metric.scale),
            error=metric.error,
            retry_count=metric.retry_count,
            evaluation_time_ms=metric.evaluation_time_ms,
            model_used=metric.model_used,
            reasoning=metric.reasoning,
            judge_usage=_usage(metric.judge_usage),
            judge_cost_usd=metric.judge_cost_usd,
        )
        for position, metric in enumerate(turn.metric_results)
    ]


def _usage(usage: wire.TokenUsage | None) -> dict[str, int] | None:
    return usage.model_dump() if usage else None


# --- rows -> wire ---------------------------------------------------------------------------


def case_to_wire(
    case: CaseResult,
    turns: Sequence[TurnResult] = (),
    metrics_by_turn: dict[int, list[MetricResult]] | None = None,
) -> wire.TestResult:
    """A case row as a wire TestResult; a multi-turn case carries ``turns`` (pass its turn rows
    and their metric rows by turn id)."""
    result = wire.TestResult(
        test_name=case.name or None,
        test_input=case.test_input,
        processed_files=[wire.ProcessedFileInput.model_validate(f) for f in case.processed_files],
        agent_response=case.agent_response,
        tool_calls=case.tool_calls,
        expected_tools=case.expected_tools,
        tools_matched=case.tools_matched,
        metric_results=[wire.MetricResult.model_validate(m) for m in case.metric_results],
        ground_truth=case.ground_truth,
        passed=bool(case.passed),
        execution_time_ms=case.execution_time_ms,
        errors=case.errors,
        timestamp=case.timestamp or (case.finished_at.isoformat() if case.finished_at else ""),
        token_usage=_wire_usage(case.token_usage),
    )
    if not case.is_multi_turn:
        if turns:  # the legacy shape keeps its one turn's tool invocations
            invocations = [wire.ToolInvocation.model_validate(i) for i in turns[0].tool_invocations]
            result = result.model_copy(update={"tool_invocations": invocations})
        return result
    metrics_by_turn = metrics_by_turn or {}
    wire_turns = [turn_to_wire(turn, metrics_by_turn.get(turn.pk, [])) for turn in turns]
    invocations = [call for turn in wire_turns for call in turn.tool_invocations]
    return result.model_copy(update={"turns": wire_turns, "tool_invocations": invocations})


def turn_to_wire(turn: TurnResult, metrics: Sequence[MetricResult]) -> wire.TurnResult:
    return wire.TurnResult(
        turn_index=turn.index,
        input=turn.input,
        response=turn.response,
        ground_truth=turn.ground_truth,
        expected_tools=turn.expected_tools,
        tool_calls=turn.tool_calls,
        tool_invocations=[wire.ToolInvocation.model_validate(i) for i in turn.tool_invocations],
        tools_matched=turn.tools_matched,
        arg_match_details=turn.arg_match_details,
        metric_results=[_metric_to_wire(metric) for metric in metrics],
        passed=turn.passed,
        execution_time_ms=turn.execution_time_ms,
        token_usage=_wire_usage(turn.token_usage),
        errors=turn.errors,
        skipped=turn.skipped,
        grader_details=turn.grader_details,
    )


def _metric_to_wire(metric: MetricResult) -> wire.MetricResult:
    scale: int | str | None = metric.scale or None
    if isinstance(scale, str) and scale.isdigit():
        scale = int(scale)
    return wire.MetricResult(
        metric_name=metric.metric_name,
        kind=metric.kind,  # type: ignore[arg-type]  # stored from a MetricKind
        score=metric.score,
        threshold=metric.threshold,
        passed=metric.passed,
        scale=scale,
        error=metric.error,
        retry_count=metric.retry_count,
        evaluation_time_ms=metric.evaluation_time_ms,
        model_used=metric.model_used,
        reasoning=metric.reasoning,
        judge_usage=_wire_usage(metric.judge_usage),
        judge_cost_usd=metric.judge_cost_usd,
    )


def _wire_usage(data: dict[str, Any] | None) -> wire.TokenUsage | None:
    return wire.TokenUsage.model_validate(data) if data else None
