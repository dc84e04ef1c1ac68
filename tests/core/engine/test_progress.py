from __future__ import annotations

import io
import re

from runs.core.engine.events import CaseEvent
from runs.core.engine.progress import TerminalProgress
from runs.core.wire.models import TestResult, TurnResult


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def events() -> list[CaseEvent]:
    turn = TurnResult(turn_index=0, input="q", passed=True, execution_time_ms=12)
    failed = TurnResult(turn_index=1, input="q", passed=False, execution_time_ms=3)
    result = TestResult(test_input="q", passed=False, execution_time_ms=15, timestamp="t")
    return [
        CaseEvent("case_started", 0, "revenue", 2),
        CaseEvent("turn_finished", 0, "revenue", 2, turn=turn),
        CaseEvent("turn_finished", 0, "revenue", 2, turn=failed),
        CaseEvent("case_finished", 0, "revenue", 2, result=result),
    ]


def test_without_a_terminal_it_prints_one_plain_line_per_turn_and_case() -> None:
    stream = io.StringIO()
    progress = TerminalProgress(total_turns=2, total_cases=1, stream=stream)
    for event in events():
        progress(event)
    progress.close()
    assert stream.getvalue().splitlines() == [
        "[1/2] revenue turn 1 of 2 PASSED (12 ms)",
        "[2/2] revenue turn 2 of 2 FAILED (3 ms)",
        "case revenue: FAILED",
    ]


def test_on_a_terminal_it_redraws_one_progress_bar() -> None:
    stream = FakeTty()
    progress = TerminalProgress(total_turns=2, total_cases=1, stream=stream)
    for event in events():
        progress(event)
    progress.close()
    frames = stream.getvalue().split("\r")[1:]
    assert len(frames) == 3 and "\n" not in frames[0]
    assert re.search(r"\[#{15}-{15}\] 1/2 turns", frames[0])
    assert re.search(r"\[#{30}\] 2/2 turns · 1/1 cases · 1 failed", frames[2])
    assert stream.getvalue().endswith("\n")


def test_it_numbers_turns_and_unnamed_cases_from_one() -> None:
    stream = io.StringIO()
    progress = TerminalProgress(total_turns=2, total_cases=3, stream=stream)
    turn = TurnResult(turn_index=0, input="q", passed=True, execution_time_ms=5)
    result = TestResult(test_input="q", passed=True, execution_time_ms=5, timestamp="t")
    progress(CaseEvent("turn_finished", 2, None, 2, turn=turn))
    progress(CaseEvent("case_finished", 2, None, 2, result=result))
    assert stream.getvalue().splitlines() == [
        "[1/2] case 3 of 3 turn 1 of 2 PASSED (5 ms)",
        "case 3 of 3: passed",
    ]


def test_on_a_terminal_an_errored_case_is_counted_as_errored_never_as_failed() -> None:
    stream = FakeTty()
    progress = TerminalProgress(total_turns=2, total_cases=2, stream=stream)
    turn = TurnResult(turn_index=0, input="q", passed=True, execution_time_ms=5)
    errored = TestResult(
        test_input="q", passed=False, execution_time_ms=5, timestamp="t", outcome="error"
    )
    progress(CaseEvent("case_finished", 0, "a", 1, result=errored))
    progress(CaseEvent("turn_finished", 1, "b", 1, turn=turn))
    assert "1/2 cases · 0 failed · 1 errored · " in stream.getvalue().split("\r")[-1]
