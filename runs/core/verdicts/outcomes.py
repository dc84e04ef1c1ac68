"""The verdict vocabulary: every outcome a metric, a turn, a case or a compare cell can have,
with the words and marks pages show for it, and the rules that decide it — once, when a result
is built. Rows store what these return; pages, exports, compare, trends and the CI gate read
the stored value and never decide again.

"Not graded" is its own outcome: a turn or case whose only failures are metrics that could not
grade (a judge without a verdict, a grader that errored) is neither passed nor failed, because
the agent may well have been right. "Error" is a turn (or case) that got no answer to grade: the
agent failed, timed out, or its worker gave up. Pass rates count errors as failures and leave
"not graded" (and cancelled, pending) out.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Literal

from runs.core.verdicts.graded import GradedCase, GradedMetric, GradedTurn
from runs.core.verdicts.kinds import JUDGE_KINDS, TOOLS_KIND

__all__ = [
    "BAD",
    "COUNTED_OUTCOMES",
    "GRADED",
    "GRADED_VALUES",
    "JUDGE_KINDS",
    "MAIN_OUTCOMES",
    "RARE_OUTCOMES",
    "RUN_ACTIVE",
    "RUN_ACTIVE_STATES",
    "RUN_FINISHED_STATES",
    "TOOLS_KIND",
    "CaseOutcome",
    "CaseState",
    "KindOutcomes",
    "MetricOutcome",
    "Outcome",
    "RunState",
    "RunStatus",
    "TurnOutcome",
    "case_kind_outcomes",
    "case_outcome",
    "case_outcome_of_turns",
    "metric_outcome",
    "only_ungraded_failures",
    "rolled_up_metric_outcome",
    "turn_kind_outcomes",
    "turn_outcome",
]


class Outcome(StrEnum):
    """Every verdict, stored or shown. The first six are stored on rows; ``pending`` (no verdict
    yet), ``absent`` (the run has no such case or turn) and ``none`` (the turn ran none of the
    selected kinds of grading) exist only where runs are shown side by side.

    Pages ask the outcome, never compare words: ``{% with verdict=turn.outcome|outcome %}``
    then ``verdict.is_failed``, ``verdict.label``, ``verdict.css`` (its mark) or
    ``verdict.chip`` (its chip)."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    NOT_GRADED = "not_graded"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    PENDING = "pending"
    ABSENT = "absent"
    NONE = "none"

    @property
    def label(self) -> str:
        return _LOOK[self][2]

    @property
    def css(self) -> str:
        """The class of its mark (``v-ok``, ``v-bad``, ...: a coloured symbol)."""
        return _LOOK[self][0]

    @property
    def chip(self) -> str:
        """The class of its chip (``chip-passed``, ``chip-not_graded``, ...)."""
        return f"chip-{self.value}"

    @property
    def symbol(self) -> str:
        return _LOOK[self][1]

    @property
    def emoji(self) -> str:
        """Its mark in Markdown (a PR comment, a summary file); "" for none."""
        return _LOOK[self][3]

    @property
    def is_graded(self) -> bool:
        """Counted in a pass rate (passed, failed, error)."""
        return self in GRADED

    @property
    def is_passed(self) -> bool:
        return self is Outcome.PASSED

    @property
    def is_failed(self) -> bool:
        return self is Outcome.FAILED

    @property
    def is_error(self) -> bool:
        return self is Outcome.ERROR

    @property
    def is_not_graded(self) -> bool:
        return self is Outcome.NOT_GRADED

    @property
    def is_skipped(self) -> bool:
        return self is Outcome.SKIPPED

    @property
    def is_cancelled(self) -> bool:
        return self is Outcome.CANCELLED

    @classmethod
    def of(cls, value: str | None) -> Outcome:
        """A stored value (``""`` or None: no verdict yet) as an Outcome."""
        if not value:
            return cls.PENDING
        return cls(value)

    @classmethod
    def shown(cls, value: str | None) -> Outcome:
        """As ``of``, but a value that is no outcome reads ``none`` ("not assessed"): for
        pages, which draw whatever a row holds."""
        try:
            return cls.of(value)
        except ValueError:
            return cls.NONE


# outcome -> (css class, symbol, words for the page, screen readers and exports, Markdown mark)
_LOOK: dict[Outcome, tuple[str, str, str, str]] = {
    Outcome.PASSED: ("v-ok", "✓", "passed", "✅"),
    Outcome.FAILED: ("v-bad", "✗", "failed", "❌"),
    Outcome.ERROR: ("v-err", "!", "errored", "💥"),
    Outcome.NOT_GRADED: ("v-warn", "?", "not graded", "⚠️"),
    Outcome.SKIPPED: ("v-none", "–", "skipped", "⏭️"),
    Outcome.CANCELLED: ("v-none", "–", "cancelled", "⏹️"),
    Outcome.PENDING: ("v-none", "…", "pending", "⏳"),
    Outcome.ABSENT: ("v-none", "·", "absent", ""),
    Outcome.NONE: ("v-none", "–", "not assessed", ""),
}

GRADED: frozenset[Outcome] = frozenset({Outcome.PASSED, Outcome.FAILED, Outcome.ERROR})
BAD: frozenset[Outcome] = frozenset({Outcome.FAILED, Outcome.ERROR})
# The same as stored values (rows and wire models hold strings).
GRADED_VALUES: frozenset[str] = frozenset(outcome.value for outcome in GRADED)

# The order every count line lists outcomes in (pages, exports, charts): the four a pass rate is
# read from, then the rarer ones, shown only when some case or turn has them.
MAIN_OUTCOMES: tuple[Outcome, ...] = (
    Outcome.PASSED,
    Outcome.FAILED,
    Outcome.ERROR,
    Outcome.NOT_GRADED,
)
RARE_OUTCOMES: tuple[Outcome, ...] = (Outcome.SKIPPED, Outcome.CANCELLED, Outcome.PENDING)
COUNTED_OUTCOMES: tuple[Outcome, ...] = (*MAIN_OUTCOMES, *RARE_OUTCOMES)

MetricOutcome = Literal["passed", "failed", "error", "not_graded", "skipped"]
TurnOutcome = Literal["passed", "failed", "error", "not_graded", "skipped"]
CaseOutcome = Literal["passed", "failed", "error", "not_graded", "cancelled"]


# --- states --------------------------------------------------------------------------------------


class _State(StrEnum):
    """A stored state: its words are its value, its chip ``chip-<value>``."""

    @property
    def label(self) -> str:
        return self.value

    @property
    def css(self) -> str:
        """The class of its chip (``chip-running``, ...)."""
        return f"chip-{self.value}"

    @classmethod
    def choices(cls) -> list[tuple[str, str]]:
        """``(value, label)`` pairs for a Django field's ``choices``, labelled as Django's own
        ``TextChoices`` label a member (its name in title case), so the stored choices never
        change."""
        return [(state.value, state.name.replace("_", " ").title()) for state in cls]


class RunState(_State):
    """A run's status (``runs.models.Run.status``): queued, then running, then how it ended."""

    QUEUED = "queued"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    CANCELLED = "cancelled"

    @property
    def is_active(self) -> bool:
        """Queued or running: it may still change."""
        return self in RUN_ACTIVE

    @property
    def is_queued(self) -> bool:
        return self is RunState.QUEUED

    @property
    def is_cancelled(self) -> bool:
        return self is RunState.CANCELLED


class CaseState(_State):
    """A case's place in its run's execution (``runs.models.CaseResult.status``); its verdict
    is its ``Outcome``."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    CANCELLED = "cancelled"
    ERROR = "error"

    @property
    def is_running(self) -> bool:
        return self is CaseState.RUNNING

    @property
    def is_cancelled(self) -> bool:
        return self is CaseState.CANCELLED


RUN_ACTIVE: frozenset[RunState] = frozenset({RunState.QUEUED, RunState.RUNNING})
# As tuples of values, in their order (queryset filters).
RUN_ACTIVE_STATES: tuple[str, ...] = (RunState.QUEUED.value, RunState.RUNNING.value)
RUN_FINISHED_STATES: tuple[str, ...] = tuple(
    state.value for state in RunState if state not in RUN_ACTIVE
)
# The API's spelling of a run state (a query filter), the same words as ``RunState``.
RunStatus = Literal["queued", "running", "passed", "failed", "error", "cancelled"]


# --- the rules ------------------------------------------------------------------------------


def metric_outcome(metric: GradedMetric) -> Outcome:
    """``error``: a deterministic or code grader could not grade (a parse failure, an
    exception); ``not_graded``: an LLM judge gave no verdict (no judge, timeout, bad JSON)."""
    if metric.passed:
        return Outcome.PASSED
    if metric.error is not None:
        return Outcome.NOT_GRADED if metric.kind in JUDGE_KINDS else Outcome.ERROR
    return Outcome.FAILED


def turn_outcome(turn: GradedTurn) -> Outcome:
    if turn.skipped:
        return Outcome.SKIPPED
    if turn.passed:
        return Outcome.PASSED
    if turn.errors:
        return Outcome.ERROR
    if turn.tools_matched is False:
        return Outcome.FAILED
    return Outcome.NOT_GRADED if only_ungraded_failures(turn.metric_results) else Outcome.FAILED


def case_outcome(result: GradedCase) -> Outcome:
    """A multi-turn case over its turns' verdicts (``case_outcome_of_turns``); a single-turn
    case as its one turn. (A case cancelled before it ran, or one whose worker gave up on it,
    has no result: the recorder stores ``cancelled`` or ``error`` for it.)"""
    if result.passed:
        return Outcome.PASSED
    if result.turns:
        return case_outcome_of_turns(turn.outcome or turn_outcome(turn) for turn in result.turns)
    if result.errors or result.tools_matched is False:
        return Outcome.FAILED
    if only_ungraded_failures(result.metric_results):
        return Outcome.NOT_GRADED
    return Outcome.FAILED


def case_outcome_of_turns(outcomes: Iterable[str]) -> Outcome:
    """Passed when every turn passed; failed when a turn failed or errored; otherwise — some
    turns could not be graded or were skipped, none failed — not graded. A case is never failed
    unless one of its turns is: the turns skipped after session errors follow an errored turn,
    those skipped after a ``fail_on_error`` metric could not grade follow the turn it failed
    (such a metric is stored failed: ``runs.core.engine.grading``), and a case stopped by a cancel
    is ``cancelled`` (the recorder settles it so, and a re-grade of it stays so)."""
    seen = set(outcomes)
    if seen <= {Outcome.PASSED}:
        return Outcome.PASSED
    if seen & {Outcome.FAILED, Outcome.ERROR}:
        return Outcome.FAILED
    return Outcome.NOT_GRADED


def rolled_up_metric_outcome(outcomes: Iterable[str]) -> Outcome:
    """One metric over the turns that ran it: failed if it failed on any turn, else not graded
    or errored if it could not grade on one, else passed."""
    seen = set(outcomes)
    for outcome in (Outcome.FAILED, Outcome.NOT_GRADED, Outcome.ERROR):
        if outcome in seen:
            return outcome
    return Outcome.PASSED


def only_ungraded_failures(metrics: Iterable[GradedMetric]) -> bool:
    """True when at least one metric failed and every failed one could not grade (by its
    stored verdict: a ``fail_on_error`` metric that could not grade is failed)."""
    failed = [metric for metric in metrics if not metric.passed]
    return bool(failed) and all(_metric_verdict(metric) != Outcome.FAILED for metric in failed)


def _metric_verdict(metric: GradedMetric) -> Outcome:
    """The metric's stored verdict, else the one its fields decide."""
    return Outcome(metric.outcome) if metric.outcome else metric_outcome(metric)


# --- verdicts by kind ----------------------------------------------------------------------------
# Compare and the gate filter on kind; tool assertions count as a kind of their own. Each turn
# stores one verdict per kind it was graded on, so a filtered compare reads no metric rows.

KindOutcomes = dict[str, str]


def turn_kind_outcomes(turn: GradedTurn) -> KindOutcomes:
    """``{kind: passed | failed | not_graded}`` for every metric kind the turn ran, and
    ``tools`` when it asserted tool calls."""
    by_kind: dict[str, list[str]] = {}
    for metric in turn.metric_results:
        by_kind.setdefault(metric.kind, []).append(_metric_verdict(metric))
    verdicts = {kind: combined(outcomes) for kind, outcomes in by_kind.items()}
    if turn.tools_matched is not None:
        verdicts[TOOLS_KIND] = Outcome.PASSED if turn.tools_matched else Outcome.FAILED
    return {kind: str(value) for kind, value in sorted(verdicts.items())}


def case_kind_outcomes(turns: Iterable[KindOutcomes]) -> KindOutcomes:
    """A case's verdict per kind over its turns: failed if any turn failed it, and so on."""
    by_kind: dict[str, list[str]] = {}
    for verdicts in turns:
        for kind, outcome in verdicts.items():
            by_kind.setdefault(kind, []).append(outcome)
    return {kind: str(combined(outcomes)) for kind, outcomes in sorted(by_kind.items())}


def combined(outcomes: Iterable[str]) -> Outcome:
    """Several verdicts of one kind as one: failed if any failed, else not graded if any could
    not grade, else passed."""
    seen = set(outcomes)
    if Outcome.FAILED in seen:
        return Outcome.FAILED
    if seen & {Outcome.ERROR, Outcome.NOT_GRADED}:
        return Outcome.NOT_GRADED
    return Outcome.PASSED
