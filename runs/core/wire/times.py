"""Where a case's time went: session start + the agent's turns + grading (judges among it).

Django-free. The engine records a turn's ``execution_time_ms`` as its send (the agent's
answer) and each metric's ``evaluation_time_ms`` as the time the turn waited for it (a first
judge's one-off import of its library included); a case's ``execution_time_ms`` is the part of
its session's start it waited for, plus its turns, plus their grading. So the parts add up to
the case's time, and a slow judge shows on the case and the turn it graded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from runs.core.verdicts.kinds import JUDGE_KINDS
from runs.core.wire.models import MetricResult, TestResult, TurnResult


@dataclass(frozen=True)
class MetricTime:
    kind: str
    ms: int | None


@dataclass(frozen=True)
class TurnTimes:
    agent_ms: int
    grading_ms: int
    # None where no LLM judge ran on the turn (nothing to show).
    judge_ms: int | None

    @property
    def total_ms(self) -> int:
        return self.agent_ms + self.grading_ms


@dataclass(frozen=True)
class CaseTimes:
    total_ms: int
    agent_ms: int
    grading_ms: int
    judge_ms: int | None
    # The rest of the case's time: the part of its session's start it waited for.
    session_ms: int

    @property
    def adds_up(self) -> bool:
        """False for a case recorded before grading counted in its time (older runs,
        imported files): its parts then exceed its total."""
        return self.session_ms >= 0


def turn_times(agent_ms: int, metrics: Iterable[MetricTime]) -> TurnTimes:
    grading = judge = 0
    judged = False
    for metric in metrics:
        grading += metric.ms or 0
        if metric.kind in JUDGE_KINDS:
            judged = True
            judge += metric.ms or 0
    return TurnTimes(agent_ms, grading, judge if judged else None)


def case_times(total_ms: int, turns: Iterable[TurnTimes]) -> CaseTimes:
    agent = grading = judge = 0
    judged = False
    for turn in turns:
        agent += turn.agent_ms
        grading += turn.grading_ms
        if turn.judge_ms is not None:
            judged = True
            judge += turn.judge_ms
    return CaseTimes(
        total_ms, agent, grading, judge if judged else None, total_ms - agent - grading
    )


def metric_times(metrics: Iterable[MetricResult]) -> list[MetricTime]:
    return [MetricTime(metric.kind, metric.evaluation_time_ms) for metric in metrics]


def wire_turn_times(turn: TurnResult) -> TurnTimes:
    return turn_times(turn.execution_time_ms, metric_times(turn.metric_results))


def grading_ms(turn: TurnResult) -> int:
    """How long a turn waited for its metrics."""
    return wire_turn_times(turn).grading_ms


def wire_case_times(result: TestResult) -> CaseTimes:
    """A wire case's breakdown (a single-turn case is its one turn)."""
    if result.turns is not None:
        turns = [wire_turn_times(turn) for turn in result.turns]
    else:
        # A single-turn case stores no send time apart from its own: the rest is the agent's.
        graded = turn_times(0, metric_times(result.metric_results))
        agent_ms = result.execution_time_ms - graded.grading_ms
        turns = [TurnTimes(agent_ms, graded.grading_ms, graded.judge_ms)]
    return case_times(result.execution_time_ms, turns)
