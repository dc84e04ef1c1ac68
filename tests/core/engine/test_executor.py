from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runs.core.backends.base import TurnOutput
from runs.core.backends.scripted import ScriptedBackend
from runs.core.engine.events import CaseEvent
from runs.core.engine.executor import Engine
from tests.core.engine.agents import make_agent

NUMERIC = {"type": "standard", "metric": "numeric"}


def run(agent: Any, **kwargs: Any) -> Any:
    return asyncio.run(Engine(agent, **kwargs).run())


def turns(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"input": f"question {i}", "ground_truth": str(i), **extra} for i in range(n)]


class RecordingBackend(ScriptedBackend):
    """The scripted backend, counting sessions and closes."""

    def __init__(self, agent: Any, **kw: Any) -> None:
        super().__init__(agent, **kw)
        self.opened: list[str] = []
        self.closed = 0
        self.sessions: list[Any] = []

    async def create_session(self, *, case_name: str | None, case_index: int) -> Any:
        session = await super().create_session(case_name=case_name, case_index=case_index)
        self.opened.append(session.key)
        self.sessions.append(session)
        original = session.close

        async def close() -> None:
            self.closed += 1
            await original()

        session.close = close  # type: ignore[method-assign]
        return session


def test_it_sends_every_turn_in_order_on_one_session(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, [{"name": "c", "turns": turns(3)}], metrics=[NUMERIC])
    backend = RecordingBackend(agent)
    report = run(agent, backend=backend)
    assert backend.opened == ["c"]
    assert backend.sessions[0].history == ["question 0", "question 1", "question 2"]
    assert backend.closed == 1
    result = report.results[0]
    assert [t.turn_index for t in result.turns] == [0, 1, 2]
    assert result.passed


def test_it_records_a_timed_out_turn_and_runs_the_next(tmp_path: Path) -> None:
    transcript = {"c": [{"response": "0", "delay_ms": 2000}, {"response": "1"}]}
    agent = make_agent(
        tmp_path,
        [{"name": "c", "turns": turns(2)}],
        transcript,
        metrics=[NUMERIC],
        execution={"llm_timeout": 0.2},
    )
    result = run(agent).results[0]
    first, second = result.turns
    assert first.errors == ["Agent invocation timeout after 0.2s"]
    assert not first.passed and not first.skipped
    assert second.passed and second.response == "1"
    assert result.errors == ["[turn 1] Agent invocation timeout after 0.2s"]


def test_llm_timeout_applies_to_single_turn_cases_too(tmp_path: Path) -> None:
    transcript = {"s": [{"response": "0", "delay_ms": 2000}]}
    agent = make_agent(
        tmp_path,
        [{"name": "s", "input": "q", "ground_truth": "0"}],
        transcript,
        execution={"llm_timeout": 0.1},
    )
    result = run(agent).results[0]
    assert result.turns is None
    assert result.errors == ["Agent invocation timeout after 0.1s"]
    assert not result.passed


def test_it_skips_remaining_turns_after_two_session_errors(tmp_path: Path) -> None:
    transcript = {
        "c": [
            {"response": "0"},
            {"error": "overloaded"},
            {"error": "overloaded"},
            {"response": "3"},
            {"response": "4"},
        ]
    }
    agent = make_agent(tmp_path, [{"name": "c", "turns": turns(5)}], transcript, metrics=[NUMERIC])
    result = run(agent).results[0]
    assert [t.skipped for t in result.turns] == [False, False, False, True, True]
    assert result.turns[3].errors == ["skipped: session unrecoverable after 2 consecutive errors"]
    assert result.turns[0].passed and not result.passed


def test_one_session_error_does_not_skip_the_rest(tmp_path: Path) -> None:
    transcript = {
        "c": [{"error": "overloaded"}, {"response": "1"}, {"error": "x"}, {"response": "3"}]
    }
    agent = make_agent(tmp_path, [{"name": "c", "turns": turns(4)}], transcript, metrics=[NUMERIC])
    result = run(agent).results[0]
    assert [t.skipped for t in result.turns] == [False] * 4
    assert [t.passed for t in result.turns] == [False, True, False, True]


def test_a_fail_on_error_grader_stops_its_case(tmp_path: Path) -> None:
    crash = {"type": "code", "grader": "checks.grade:crash", "fail_on_error": True}
    agent = make_agent(
        tmp_path,
        [{"name": "c", "turns": turns(3)}, {"name": "d", "turns": turns(1)}],
        metrics=[crash],
    )
    report = run(agent)
    case = report.results[0]
    assert case.turns[0].metric_results[0].error == "ValueError: grader bug"
    assert [t.skipped for t in case.turns] == [False, True, True]
    assert "fail_on_error" in case.turns[1].errors[0]
    # The turn it could not grade is failed (fail_on_error), so the case fails through a turn.
    assert [t.outcome for t in case.turns] == ["failed", "skipped", "skipped"]
    assert case.outcome == "failed" and not case.passed
    # Decided where verdicts are: the metric itself is failed, so its kind is, and a turn's
    # verdicts decided again from its fields (``changed``) stay failed.
    first = case.turns[0]
    assert first.metric_results[0].outcome == "failed" and first.kind_outcomes == {"code": "failed"}
    assert first.changed(grader_details=None).outcome == "failed"
    # The other case still ran (its own first turn crashed too, but it had nothing to skip).
    assert len(report.results[1].turns) == 1 and not report.results[1].turns[0].skipped


def test_a_grader_exception_without_fail_on_error_fails_only_that_metric(tmp_path: Path) -> None:
    metrics = [{"type": "code", "grader": "checks.grade:crash"}, NUMERIC]
    agent = make_agent(tmp_path, [{"name": "c", "turns": turns(2)}], metrics=metrics)
    case = run(agent).results[0]
    assert [t.skipped for t in case.turns] == [False, False]
    for turn in case.turns:
        crash, numeric = turn.metric_results
        assert crash.error == "ValueError: grader bug" and not crash.passed
        assert numeric.passed


def test_metrics_come_from_the_turn_then_the_case_then_the_agent(tmp_path: Path) -> None:
    equality = {"type": "standard", "metric": "equality", "name": "eq_turn"}
    case_metric = {"type": "standard", "metric": "numeric", "name": "num_case"}
    cases = [
        {
            "name": "with_case_metrics",
            "evaluations": [case_metric],
            "turns": [
                {"input": "a", "ground_truth": "0", "evaluations": [equality]},
                {"input": "b", "ground_truth": "1"},
            ],
        },
        {"name": "agent_only", "turns": [{"input": "c", "ground_truth": "0"}]},
    ]
    agent = make_agent(tmp_path, cases, metrics=[{**NUMERIC, "name": "num_agent"}])
    report = run(agent)
    names = [[m.metric_name for m in t.metric_results] for t in report.results[0].turns]
    assert names == [["eq_turn"], ["num_case"]]
    assert [m.metric_name for m in report.results[1].turns[0].metric_results] == ["num_agent"]


def test_metrics_needing_ground_truth_are_skipped_without_one(tmp_path: Path) -> None:
    code = {"type": "code", "grader": "checks.grade:always_half"}
    cases = [
        {"name": "c", "turns": [{"input": "no truth here"}, {"input": "b", "ground_truth": "1"}]}
    ]
    agent = make_agent(
        tmp_path, cases, {"c": [{"response": "x"}, {"response": "1"}]}, metrics=[NUMERIC, code]
    )
    first, second = run(agent).results[0].turns
    assert [m.metric_name for m in first.metric_results] == ["always_half"]
    assert [m.metric_name for m in second.metric_results] == ["numeric", "always_half"]
    assert first.grader_details == {"always_half": {"turn": 0}}


def test_an_empty_response_is_graded_not_skipped(tmp_path: Path) -> None:
    agent = make_agent(
        tmp_path,
        [{"name": "c", "input": "q", "ground_truth": "5"}],
        {"c": [{"response": ""}]},
        metrics=[NUMERIC],
    )
    result = run(agent).results[0]
    assert len(result.metric_results) == 1
    assert not result.metric_results[0].passed
    assert not result.passed


def test_the_roll_up_of_a_multi_turn_case(tmp_path: Path) -> None:
    cases = [
        {
            "name": "c",
            "turns": [
                {
                    "input": "a",
                    "ground_truth": "25587",
                    "expected_tools": [
                        {"name": "subtract", "args": {"a": 206588, "b": {"fuzzy": "181,001"}}}
                    ],
                },
                {"input": "b", "ground_truth": "2"},
            ],
        }
    ]
    transcript = {
        "c": [
            {
                "tool_calls": [{"name": "subtract", "args": {"a": 206588, "b": 181001}}],
                "response": "25587",
            },
            {"tool_calls": [{"name": "divide", "args": {"a": 4, "b": 2}}], "response": "3"},
        ]
    }
    agent = make_agent(tmp_path, cases, transcript, metrics=[NUMERIC])
    result = run(agent).results[0]
    assert result.test_input == "a\n---\nb"
    assert result.agent_response == "3"
    assert result.tool_calls == ["subtract", "divide"]
    assert [i.result for i in result.tool_invocations] == [25587, 2.0]
    assert result.tools_matched is True
    assert result.turns[0].arg_match_details[0]["matched_call_index"] == 0
    assert result.metric_results[0].score == 0.5 and not result.metric_results[0].passed
    assert result.token_usage is not None
    assert result.token_usage.total_tokens == sum(t.token_usage.total_tokens for t in result.turns)
    assert result.ground_truth is None and not result.passed


def test_tool_assertions_only_see_the_calls_of_their_turn(tmp_path: Path) -> None:
    cases = [
        {"name": "c", "turns": [{"input": "a"}, {"input": "b", "expected_tools": ["subtract"]}]}
    ]
    transcript = {
        "c": [
            {"tool_calls": [{"name": "subtract", "args": {"a": 1, "b": 1}}], "response": "0"},
            {"response": "done"},
        ]
    }
    agent = make_agent(tmp_path, cases, transcript)
    second = run(agent).results[0].turns[1]
    assert second.tools_matched is False
    assert "subtract" in second.arg_match_details[0]["unmatched_reason"]


def test_a_crashing_tool_is_recorded_and_the_turn_goes_on(tmp_path: Path) -> None:
    cases = [{"name": "c", "input": "q"}]
    transcript = {"c": [{"tool_calls": [{"name": "explode", "args": {"x": 1}}], "response": "ok"}]}
    result = run(make_agent(tmp_path, cases, transcript)).results[0]
    assert result.tool_invocations[0].error == "RuntimeError: tool blew up"
    assert result.agent_response == "ok" and result.passed


def test_results_keep_the_input_order_under_parallelism(tmp_path: Path) -> None:
    names = [f"case{i}" for i in range(6)]
    transcript = {
        name: [{"response": "0", "delay_ms": (6 - i) * 30}] for i, name in enumerate(names)
    }
    cases = [{"name": name, "input": "q", "ground_truth": "0"} for name in names]
    agent = make_agent(tmp_path, cases, transcript, metrics=[NUMERIC])
    finished: list[str] = []

    def on_event(event: CaseEvent) -> None:
        if event.kind == "case_finished":
            finished.append(event.case_name or "")

    report = asyncio.run(Engine(agent, on_event=on_event).run(parallel=6))
    assert [r.test_name for r in report.results] == names
    assert finished == list(reversed(names))  # they really ran concurrently
    assert report.summary.total_tests == 6 and report.summary.passed == 6


def test_the_session_is_closed_when_a_send_raises(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, [{"name": "c", "turns": turns(3)}])
    backend = RecordingBackend(agent)

    async def broken_send(message: str) -> TurnOutput:
        raise ConnectionError("socket closed")

    async def open_broken(*, case_name: str | None, case_index: int) -> Any:
        session = await RecordingBackend.create_session(
            backend, case_name=case_name, case_index=case_index
        )
        session.send = broken_send
        return session

    backend.create_session = open_broken  # type: ignore[method-assign]
    result = asyncio.run(Engine(agent, backend=backend).run()).results[0]
    assert backend.closed == 1
    assert result.turns[0].errors == ["Agent error: ConnectionError: socket closed"]
    assert [t.skipped for t in result.turns] == [False, False, True]


def test_cancellation_skips_the_turns_not_yet_sent(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, [{"name": "c", "turns": turns(3)}])
    sent: list[int] = []

    def on_event(event: CaseEvent) -> None:
        if event.kind == "turn_finished":
            sent.append(event.turn.turn_index)  # type: ignore[union-attr]

    engine = Engine(agent, on_event=on_event, is_cancelled=lambda: len(sent) >= 1)
    result = asyncio.run(engine.run()).results[0]
    assert [t.skipped for t in result.turns] == [False, True, True]
    assert result.turns[1].errors == ["skipped: run cancelled"]


def test_progress_events_arrive_per_case_and_per_turn(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, [{"name": "c", "turns": turns(2)}, {"name": "s", "input": "x"}])
    events: list[tuple[str, str | None]] = []

    async def on_event(event: CaseEvent) -> None:
        events.append((event.kind, event.case_name))

    asyncio.run(Engine(agent, on_event=on_event).run())
    assert events == [
        ("case_started", "c"),
        ("turn_finished", "c"),
        ("turn_finished", "c"),
        ("case_finished", "c"),
        ("case_started", "s"),
        ("turn_finished", "s"),
        ("case_finished", "s"),
    ]


@pytest.mark.parametrize("env, expected", [("3", 3), (None, 1)])
def test_parallel_test_cases_falls_back_to_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str | None, expected: int
) -> None:
    if env is None:
        monkeypatch.delenv("HOLODECK_PARALLEL_TEST_CASES", raising=False)
    else:
        monkeypatch.setenv("HOLODECK_PARALLEL_TEST_CASES", env)
    agent = make_agent(tmp_path, [{"name": "c", "input": "q"}])
    assert agent.parallel_test_cases == expected


def test_a_tool_result_that_is_not_plain_json_is_recorded_as_json(tmp_path: Path) -> None:
    transcript = {"c": [{"tool_calls": [{"name": "quarterly", "args": {}}], "response": "ok"}]}
    result = run(make_agent(tmp_path, [{"name": "c", "input": "q"}], transcript)).results[0]
    assert result.tool_invocations[0].result == {"(2023, 'Q1')": 1.5, "nan": "nan"}
    assert result.passed


def test_a_hung_tool_neither_blocks_the_run_nor_the_process_exit(tmp_path: Path) -> None:
    import time

    transcript = {
        "c": [
            {"tool_calls": [{"name": "hang", "args": {"seconds": 30}}], "response": "late"},
            {"response": "1"},
        ]
    }
    cases = [{"name": "c", "turns": turns(2)}]
    agent = make_agent(tmp_path, cases, transcript, execution={"llm_timeout": 0.3})
    started = time.perf_counter()
    result = run(agent).results[0]  # asyncio.run returns: no executor thread to join
    assert time.perf_counter() - started < 5
    assert result.turns[0].errors == ["Agent invocation timeout after 0.3s"]
    assert result.turns[1].response == "1"


def test_a_session_that_cannot_open_is_an_error_on_the_first_turn(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, [{"name": "c", "turns": turns(3)}])
    backend = ScriptedBackend(agent)

    async def refuse(**_: Any) -> Any:
        raise ConnectionError("no model server")

    backend.create_session = refuse  # type: ignore[method-assign]
    result = asyncio.run(Engine(agent, backend=backend).run()).results[0]
    first, *rest = result.turns
    assert first.errors == ["session could not be opened: ConnectionError: no model server"]
    assert not first.skipped
    assert all(t.skipped and t.errors == ["skipped: no agent session"] for t in rest)


def test_opening_a_session_is_bounded_by_llm_timeout(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, [{"name": "c", "input": "q"}], execution={"llm_timeout": 0.2})
    backend = ScriptedBackend(agent)

    async def never(**_: Any) -> Any:
        await asyncio.sleep(60)

    backend.create_session = never  # type: ignore[method-assign]
    result = asyncio.run(Engine(agent, backend=backend).run()).results[0]
    assert result.errors == ["session could not be opened: timed out"]


def test_a_case_whose_bookkeeping_crashes_is_recorded_and_the_others_still_run(
    tmp_path: Path,
) -> None:
    agent = make_agent(tmp_path, [{"name": "a", "input": "q"}, {"name": "b", "input": "q"}])

    def explode(event: CaseEvent) -> None:
        if event.kind == "case_started" and event.case_name == "a":
            raise RuntimeError("recorder down")

    report = asyncio.run(Engine(agent, on_event=explode).run())
    first, second = report.results
    assert first.errors == ["execution error: RuntimeError: recorder down"] and not first.passed
    assert second.passed


@pytest.mark.parametrize(
    "call, tool, belongs",
    [
        ("archive", "archive", True),
        ("mcp__archive__lookup", "archive", True),
        ("archive-lookup", "archive", True),
        ("tools-archive", "archive", True),
        ("mcp__tools__archive", "archive", True),
        ("research_archive_notes", "archive", False),
        ("mcp__archives__lookup", "archive", False),
    ],
)
def test_retrieval_tools_are_recognised_by_name_not_by_any_substring(
    call: str, tool: str, belongs: bool
) -> None:
    from runs.core.engine.executor import is_tool_of

    assert is_tool_of(call, tool) is belongs
