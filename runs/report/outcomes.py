"""Verdicts of metrics, turns and cases, decided once when a result is written.

The rows store what these return; pages and the compare code read the stored value and never
decide again. "Not graded" is its own outcome: a turn or case whose only failures are metrics
that could not grade (a judge without a verdict, a grader that errored) is neither passed nor
failed, because the agent may well have been right.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from runs.report.models import MetricResult, TestResult, TurnResult

MetricOutcome = Literal["passed", "failed", "error", "not_graded", "skipped"]
TurnOutcome = Literal["passed", "failed", "not_graded", "skipped"]
CaseOutcome = Literal["passed", "failed", "not_graded", "cancelled"]

JUDGE_KINDS = frozenset({"geval", "rag"})


def metric_outcome(metric: MetricResult) -> MetricOutcome:
    """``error``: a deterministic or code grader could not grade (a parse failure, an
    exception); ``not_graded``: an LLM judge gave no verdict (no judge, timeout, bad JSON)."""
    if metric.passed:
        return "passed"
    if metric.error is not None:
        return "not_graded" if metric.kind in JUDGE_KINDS else "error"
    return "failed"


def turn_outcome(turn: TurnResult) -> TurnOutcome:
    if turn.skipped:
        return "skipped"
    if turn.passed:
        return "passed"
    if turn.errors or turn.tools_matched is False:
        return "failed"
    return "not_graded" if only_ungraded_failures(turn.metric_results) else "failed"


def case_outcome(result: TestResult, *, cancelled: bool = False) -> CaseOutcome:
    """A case cancelled before it ran is ``cancelled``; otherwise as a turn (its roll-up)."""
    if cancelled:
        return "cancelled"
    if result.passed:
        return "passed"
    if result.errors or result.tools_matched is False:
        return "failed"
    return "not_graded" if only_ungraded_failures(result.metric_results) else "failed"


def only_ungraded_failures(metrics: Iterable[MetricResult]) -> bool:
    """True when at least one metric failed and every failed one could not grade."""
    failed = [metric for metric in metrics if not metric.passed]
    return bool(failed) and all(metric.error is not None for metric in failed)
