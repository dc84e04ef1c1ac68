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
# "error": the turn did not get an answer to grade (the agent failed, timed out, no session).
TurnOutcome = Literal["passed", "failed", "error", "not_graded", "skipped"]
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
    if turn.errors:
        return "error"
    if turn.tools_matched is False:
        return "failed"
    return "not_graded" if only_ungraded_failures(turn.metric_results) else "failed"


def case_outcome(result: TestResult) -> CaseOutcome:
    """As a turn, over the case's roll-up. (A case cancelled before it ran has no result: the
    recorder stores ``cancelled`` for it.)"""
    if result.passed:
        return "passed"
    if result.errors or result.tools_matched is False:
        return "failed"
    return "not_graded" if only_ungraded_failures(result.metric_results) else "failed"


def only_ungraded_failures(metrics: Iterable[MetricResult]) -> bool:
    """True when at least one metric failed and every failed one could not grade."""
    failed = [metric for metric in metrics if not metric.passed]
    return bool(failed) and all(metric.error is not None for metric in failed)


# --- verdicts by kind ----------------------------------------------------------------------------
# The compare view filters on metric kind; tool assertions count as a kind of their own. Each
# turn stores one verdict per kind it was graded on, so a filtered compare reads no metric rows.

TOOLS_KIND = "tools"
KindOutcomes = dict[str, str]


def turn_kind_outcomes(turn: TurnResult) -> KindOutcomes:
    """``{kind: passed | failed | not_graded}`` for every metric kind the turn ran, and
    ``tools`` when it asserted tool calls."""
    by_kind: dict[str, list[MetricOutcome]] = {}
    for metric in turn.metric_results:
        by_kind.setdefault(metric.kind, []).append(metric_outcome(metric))
    verdicts = {kind: _combined(outcomes) for kind, outcomes in by_kind.items()}
    if turn.tools_matched is not None:
        verdicts[TOOLS_KIND] = "passed" if turn.tools_matched else "failed"
    return dict(sorted(verdicts.items()))


def case_kind_outcomes(turns: Iterable[KindOutcomes]) -> KindOutcomes:
    """A case's verdict per kind over its turns: failed if any turn failed it, and so on."""
    by_kind: dict[str, list[str]] = {}
    for verdicts in turns:
        for kind, outcome in verdicts.items():
            by_kind.setdefault(kind, []).append(outcome)
    return {kind: _combined(outcomes) for kind, outcomes in sorted(by_kind.items())}


def _combined(outcomes: Iterable[str]) -> str:
    seen = set(outcomes)
    if "failed" in seen:
        return "failed"
    if seen & {"error", "not_graded"}:
        return "not_graded"
    return "passed"
