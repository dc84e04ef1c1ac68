"""Pure functions that assemble report objects from turn results (the engine calls these).

The roll-up of a multi-turn case follows seed 000 §9 / DESIGN.md §5 exactly; the summary
counts test cases, never turns (seed 000 §11).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from runs.core.verdicts import summary as run_summary
from runs.core.verdicts.kinds import TOOLS_KIND
from runs.core.verdicts.numbers import turn_text
from runs.core.verdicts.outcomes import rolled_up_metric_outcome
from runs.core.wire.models import (
    MetricResult,
    ProcessedFileInput,
    ReportSummary,
    TestResult,
    TokenUsage,
    TurnResult,
)

TURN_INPUT_SEPARATOR = "\n---\n"


def summarize(results: Sequence[TestResult], total_duration_ms: int) -> ReportSummary:
    """Counts, pass rate (0–100, two decimals) and per-metric count / mean score.

    ``metrics_evaluated`` counts every result carrying the metric (errored ones included: the
    metric was evaluated, it just could not grade); ``average_scores`` averages the non-None
    scores and leaves out a metric that never produced one.
    """
    total = len(results)
    passed = sum(1 for result in results if result.passed)
    counts: dict[str, int] = {}
    scores: dict[str, list[float]] = {}
    for result in results:
        for metric in result.metric_results:
            counts[metric.metric_name] = counts.get(metric.metric_name, 0) + 1
            if metric.score is not None:
                scores.setdefault(metric.metric_name, []).append(metric.score)
    return ReportSummary(
        total_tests=total,
        passed=passed,
        failed=total - passed,
        pass_rate=round(passed / total * 100, 2) if total else 0.0,
        total_duration_ms=total_duration_ms,
        metrics_evaluated=counts,
        average_scores={name: _mean(values) for name, values in scores.items()},
    )


def case_turns(result: TestResult) -> list[TurnResult]:
    """Every case has turns: a single-turn (legacy) case is seen as its one turn."""
    if result.turns is not None:
        return list(result.turns)
    return [
        TurnResult(
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
            transcript=result.transcript,
        )
    ]


def single_turn_result(
    turn: TurnResult,
    test_name: str | None,
    timestamp: str,
    processed_files: Sequence[ProcessedFileInput] = (),
) -> TestResult:
    """A legacy single-turn case: the one turn's fields at test-case level, ``turns=None``.

    This is HoloDeck's legacy shape; the turn-only fields (``arg_match_details``,
    ``grader_details``, ``skipped``) have no place in it, so callers that need them keep the
    ``TurnResult`` as well.
    """
    return TestResult(
        test_name=test_name,
        test_input=turn.input,
        processed_files=list(processed_files),
        agent_response=turn.response,
        tool_calls=list(turn.tool_calls),
        tool_invocations=list(turn.tool_invocations),
        expected_tools=None if turn.expected_tools is None else list(turn.expected_tools),
        tools_matched=turn.tools_matched,
        metric_results=list(turn.metric_results),
        ground_truth=turn.ground_truth,
        passed=turn.passed,
        execution_time_ms=turn.execution_time_ms,
        errors=list(turn.errors),
        timestamp=timestamp,
        token_usage=turn.token_usage,
        turns=None,
        transcript=turn.transcript,
    )


def rollup_turns(
    turns: Sequence[TurnResult],
    *,
    test_name: str | None,
    timestamp: str,
    processed_files: Sequence[ProcessedFileInput] = (),
) -> TestResult:
    """Roll the turns of a multi-turn case up into its test-case ``TestResult``."""
    if not turns:
        raise ValueError("a multi-turn case has at least one turn")
    return TestResult(
        test_name=test_name,
        test_input=TURN_INPUT_SEPARATOR.join(turn.input for turn in turns),
        processed_files=list(processed_files),
        agent_response=turns[-1].response,
        tool_calls=[name for turn in turns for name in turn.tool_calls],
        tool_invocations=[call for turn in turns for call in turn.tool_invocations],
        expected_tools=_union_expected_tools(turns),
        tools_matched=_rollup_tools_matched(turns),
        metric_results=rollup_metrics(turns),
        ground_truth=None,
        passed=all(turn.passed for turn in turns),
        execution_time_ms=sum(turn.execution_time_ms for turn in turns),
        errors=[
            f"[{turn_text(turn.turn_index)}] {error}" for turn in turns for error in turn.errors
        ],
        timestamp=timestamp,
        token_usage=sum_usage(turn.token_usage for turn in turns),
        turns=list(turns),
    )


def sum_usage(usages: Iterable[TokenUsage | None]) -> TokenUsage | None:
    """Element-wise sum of the reported usages; None when nothing was reported."""
    reported = [usage for usage in usages if usage is not None]
    if not reported:
        return None
    total = TokenUsage.zero()
    for usage in reported:
        total = total + usage
    return total


def rollup_metrics(turns: Sequence[TurnResult]) -> list[MetricResult]:
    """One entry per metric name, in first-seen order; turns that did not run it don't count."""
    by_name: dict[str, list[tuple[int, MetricResult]]] = {}
    for turn in turns:
        for metric in turn.metric_results:
            by_name.setdefault(metric.metric_name, []).append((turn.turn_index, metric))
    return [_rollup_metric(entries) for entries in by_name.values()]


def _rollup_metric(entries: list[tuple[int, MetricResult]]) -> MetricResult:
    first = entries[0][1]
    metrics = [metric for _, metric in entries]
    scores = [metric.score for metric in metrics if metric.score is not None]
    judge_usages = [metric.judge_usage for metric in metrics if metric.judge_usage is not None]
    costs = [metric.judge_cost_usd for metric in metrics if metric.judge_cost_usd is not None]
    return MetricResult(
        metric_name=first.metric_name,
        kind=first.kind,
        score=_mean(scores) if scores else None,
        threshold=first.threshold,
        passed=all(metric.passed for metric in metrics),
        scale=first.scale,
        error=_prefixed_join(entries, "error"),
        retry_count=_sum_optional(metric.retry_count for metric in metrics),
        evaluation_time_ms=_sum_optional(metric.evaluation_time_ms for metric in metrics),
        model_used=next((m.model_used for m in metrics if m.model_used is not None), None),
        reasoning=_prefixed_join(entries, "reasoning"),
        judge_usage=sum_usage(judge_usages),
        judge_cost_usd=sum(costs) if costs else None,
        outcome=rolled_up_metric_outcome(m.outcome or "" for m in metrics).value,  # type: ignore[arg-type]
    )


def _prefixed_join(entries: list[tuple[int, MetricResult]], field: str) -> str | None:
    """Per-turn texts as ``[turn N] text`` lines (N from 1); None when no turn had one."""
    parts = [
        f"[{turn_text(index)}] {value}"
        for index, metric in entries
        if (value := getattr(metric, field)) is not None
    ]
    return "\n".join(parts) if parts else None


def _union_expected_tools(turns: Sequence[TurnResult]) -> list[str | dict[str, Any]] | None:
    """Every turn's expected tools, duplicates dropped, in turn order (display only)."""
    if all(turn.expected_tools is None for turn in turns):
        return None
    seen: set[str] = set()
    union: list[str | dict[str, Any]] = []
    for turn in turns:
        for tool in turn.expected_tools or []:
            key = json.dumps(tool, sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                union.append(tool)
    return union


def _rollup_tools_matched(turns: Sequence[TurnResult]) -> bool | None:
    if all(turn.tools_matched is None for turn in turns):
        return None
    return all(turn.tools_matched is not False for turn in turns)


def _sum_optional(values: Iterable[int | None]) -> int | None:
    present = [value for value in values if value is not None]
    return sum(present) if present else None


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def summary_of_results(
    results: Sequence[TestResult], *, unfinished: Iterable[str] = ()
) -> run_summary.RunSummary:
    """The summary of wire results (``runs.core.wire.models.TestResult`` with their turns; a
    single-turn case is its one turn), plus the outcomes of cases that have no result
    (errored, cancelled, pending)."""
    case_values: list[str | None] = list(unfinished)
    turn_values: list[str | None] = []
    tool_values: list[str] = []
    marks: list[run_summary.MetricMark] = []
    for result in results:
        case_values.append(result.outcome)
        for turn in case_turns(result):
            turn_values.append(turn.outcome)
            if (tools := (turn.kind_outcomes or {}).get(TOOLS_KIND)) is not None:
                tool_values.append(tools)
            marks.extend(
                run_summary.MetricMark(m.metric_name, m.kind, m.outcome or "", m.score)
                for m in turn.metric_results
            )
    return run_summary.summarize(
        case_outcomes=case_values,
        turn_outcomes=turn_values,
        metrics=marks,
        tool_outcomes=tool_values,
    )
