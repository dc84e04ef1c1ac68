"""A case's time is its session start + its turns + their grading, and each part is shown."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import graders.judges
from runs.core.engine.executor import Engine
from runs.core.wire.times import wire_case_times, wire_turn_times
from tests.core.engine.agents import make_agent

SLOW_GRADER = """
import time


def slow(ctx):
    time.sleep(0.15)
    return True
"""


def test_a_slow_code_grader_counts_in_its_turn_and_the_case_time_adds_up(tmp_path: Path) -> None:
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "slow.py").write_text(SLOW_GRADER)
    cases = [{"name": "c", "turns": [{"input": "a"}, {"input": "b"}]}]
    agent = make_agent(
        tmp_path,
        cases,
        {"c": [{"response": "one"}, {"response": "two"}]},
        metrics=[{"type": "code", "grader": "checks.slow:slow"}],
        latency_ms=30,
    )
    (result,) = asyncio.run(Engine(agent).run()).results
    assert result.turns is not None
    turns = [wire_turn_times(turn) for turn in result.turns]
    assert all(turn.grading_ms >= 150 and turn.agent_ms >= 30 for turn in turns)
    assert all(turn.judge_ms is None for turn in turns)  # no judge ran: no judge time
    times = wire_case_times(result)
    assert times.adds_up
    assert times.total_ms == result.execution_time_ms
    assert times.session_ms + times.agent_ms + times.grading_ms == times.total_ms
    assert times.grading_ms >= 300


def test_a_judges_time_outside_its_own_clock_is_its_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first judge pays deepeval's import before its own clock starts; the turn waited for
    it, so the turn's grading (and the case's time) carries it."""
    start_clock = graders.judges._start_clock

    def slow_first_import() -> float:
        time.sleep(0.3)
        return start_clock() - 0.005  # the judge's own clock then reads a few ms, not 0

    monkeypatch.setattr(graders.judges, "_start_clock", slow_first_import)
    judge = {"provider": "openai", "name": "gpt-4o"}  # no api_key: could not grade
    geval = {"type": "geval", "name": "tone", "criteria": "polite", "model": judge}
    agent = make_agent(
        tmp_path, [{"name": "c", "input": "q"}], {"c": [{"response": "hi"}]}, metrics=[geval]
    )
    (result,) = asyncio.run(Engine(agent).run()).results
    (metric,) = result.metric_results
    assert metric.error is not None and metric.error.startswith("could not grade")
    assert metric.evaluation_time_ms is not None and metric.evaluation_time_ms >= 300
    times = wire_case_times(result)
    assert times.judge_ms is not None and times.judge_ms >= 300
    assert result.execution_time_ms >= 300
    assert times.session_ms + times.agent_ms + times.grading_ms == result.execution_time_ms
