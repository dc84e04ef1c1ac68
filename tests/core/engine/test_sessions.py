"""Sessions opened ahead of their cases, for backends whose sessions are slow to start."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runs.core.backends.scripted import ScriptedBackend
from runs.core.engine.events import CaseEvent
from runs.core.engine.executor import Engine
from runs.core.engine.sessions import SessionStarts, sessions_ahead
from tests.core.engine.agents import make_agent

NUMERIC = {"type": "standard", "metric": "numeric"}


def cases(n: int, turns: int = 2) -> list[dict[str, Any]]:
    return [
        {
            "name": f"case{i}",
            "turns": [{"input": f"case{i} q{t}", "ground_truth": str(t)} for t in range(turns)],
        }
        for i in range(n)
    ]


class CostlyBackend(ScriptedBackend):
    """The scripted backend declaring a costly start; it logs what happens, in order."""

    costly_start = True

    def __init__(self, agent: Any, **kw: Any) -> None:
        super().__init__(agent, **kw)
        self.log: list[tuple[str, int]] = []  # ("open" | "send" | "close", case index)
        self.sessions: dict[int, Any] = {}
        self.refuse: dict[int, BaseException] = {}  # case index -> raised by create_session
        self.hang: set[int] = set()  # case indices whose session never opens

    async def create_session(self, *, case_name: str | None, case_index: int) -> Any:
        self.log.append(("open", case_index))
        await asyncio.sleep(0)
        if case_index in self.hang:
            await asyncio.sleep(60)
        if case_index in self.refuse:
            raise self.refuse[case_index]
        session = await super().create_session(case_name=case_name, case_index=case_index)
        assert case_index not in self.sessions, "a case got a second session"
        self.sessions[case_index] = session
        send, close = session.send, session.close

        async def logged_send(message: str) -> Any:
            self.log.append(("send", case_index))
            return await send(message)

        async def logged_close() -> None:
            self.log.append(("close", case_index))
            await close()

        session.send = logged_send  # type: ignore[method-assign]
        session.close = logged_close  # type: ignore[method-assign]
        return session

    def events(self, kind: str) -> list[int]:
        return [index for event, index in self.log if event == kind]


def run(agent: Any, backend: Any, *, parallel: int = 1, **kwargs: Any) -> Any:
    return asyncio.run(Engine(agent, backend=backend, **kwargs).run(parallel=parallel))


def test_sessions_are_opened_ahead_of_their_cases_in_run_order(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, cases(6), metrics=[NUMERIC])
    backend = CostlyBackend(agent)

    report = run(agent, backend, parallel=1)

    assert backend.events("open") == [0, 1, 2, 3, 4, 5]
    # Before the first case sent anything, the next cases' sessions were being opened...
    first_send = backend.log.index(("send", 0))
    opened_before = [i for event, i in backend.log[:first_send] if event == "open"]
    assert opened_before == [0, *range(1, 1 + sessions_ahead(1))]
    # ...and never more than `ahead` beyond the case that is running.
    for position, (event, index) in enumerate(backend.log):
        if event == "send":
            opened = [i for e, i in backend.log[:position] if e == "open"]
            assert max(opened) <= index + sessions_ahead(1)
    assert all(result.passed for result in report.results)


def test_each_session_serves_its_own_case_only_and_is_never_reused(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, cases(5, turns=3), metrics=[NUMERIC])
    backend = CostlyBackend(agent)

    run(agent, backend, parallel=2)

    assert sorted(backend.sessions) == [0, 1, 2, 3, 4]
    for index, session in backend.sessions.items():
        assert session.key == f"case{index}"
        assert session.history == [f"case{index} q{t}" for t in range(3)]
    sends = [(event, i) for event, i in backend.log if event in ("send", "close")]
    for index in range(5):  # nothing is sent on a session after it was closed
        closed_at = sends.index(("close", index))
        assert ("send", index) not in sends[closed_at:]


def test_every_session_is_closed_when_the_run_ends(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, cases(4), metrics=[NUMERIC])
    backend = CostlyBackend(agent)

    run(agent, backend, parallel=4)

    assert sorted(backend.events("close")) == sorted(backend.events("open")) == [0, 1, 2, 3]


def test_a_session_opened_for_a_case_that_crashes_is_closed_unused(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, cases(3), metrics=[NUMERIC])
    backend = CostlyBackend(agent)

    def explode(event: CaseEvent) -> None:
        if event.kind == "case_started" and event.case_name == "case1":
            raise RuntimeError("recorder down")

    report = run(agent, backend, on_event=explode)

    crashed = report.results[1]
    assert crashed.errors == ["execution error: RuntimeError: recorder down"]
    assert 1 in backend.events("open") and 1 in backend.events("close")
    assert 1 not in backend.events("send")
    assert sorted(backend.events("close")) == [0, 1, 2]
    assert report.results[2].passed


def test_a_case_whose_turns_fail_still_closes_its_session(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, cases(2, turns=3))
    backend = CostlyBackend(agent)
    backend.refuse = {}

    async def broken(message: str) -> Any:
        raise ConnectionError("socket closed")

    original = backend.create_session

    async def open_broken(*, case_name: str | None, case_index: int) -> Any:
        session = await original(case_name=case_name, case_index=case_index)
        if case_index == 0:
            session.send = broken
        return session

    backend.create_session = open_broken  # type: ignore[method-assign]
    report = run(agent, backend)

    assert [t.skipped for t in report.results[0].turns] == [False, False, True]
    assert sorted(backend.events("close")) == [0, 1]


def test_a_cancelled_run_closes_the_sessions_opened_ahead_and_opens_no_more(
    tmp_path: Path,
) -> None:
    agent = make_agent(tmp_path, cases(8), metrics=[NUMERIC])
    backend = CostlyBackend(agent)
    sent: list[int] = []

    def on_event(event: CaseEvent) -> None:
        if event.kind == "turn_finished":
            sent.append(event.case_index)

    report = run(agent, backend, on_event=on_event, is_cancelled=lambda: len(sent) >= 1)

    opened = backend.events("open")
    assert opened == list(range(1 + sessions_ahead(1)))  # the first case and those ahead
    assert sorted(backend.events("close")) == opened
    assert backend.events("send") == [0]
    later = [turn for result in report.results[1:] for turn in result.turns]
    assert all(turn.skipped and turn.errors == ["skipped: run cancelled"] for turn in later)


def test_a_session_that_fails_to_open_ahead_is_its_cases_first_turn_error(
    tmp_path: Path,
) -> None:
    agent = make_agent(tmp_path, cases(3, turns=3), metrics=[NUMERIC])
    backend = CostlyBackend(agent)
    backend.refuse[1] = ConnectionError("no model server")

    report = run(agent, backend)

    first, *rest = report.results[1].turns
    assert first.errors == ["session could not be opened: ConnectionError: no model server"]
    assert not first.skipped
    assert all(t.skipped and t.errors == ["skipped: no agent session"] for t in rest)
    assert report.results[0].passed and report.results[2].passed
    assert sorted(backend.events("close")) == [0, 2]


def test_opening_ahead_is_bounded_by_llm_timeout(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, cases(2), execution={"llm_timeout": 0.2})
    backend = CostlyBackend(agent)
    backend.hang.add(1)

    report = run(agent, backend)

    assert report.results[1].turns[0].errors == ["session could not be opened: timed out"]
    assert report.results[0].turns[0].errors == []


def test_a_backend_without_a_costly_start_opens_each_session_when_its_case_starts(
    tmp_path: Path,
) -> None:
    agent = make_agent(tmp_path, cases(3))
    backend = CostlyBackend(agent)
    backend.costly_start = False  # type: ignore[misc]

    run(agent, backend)

    opens_and_sends = [(e, i) for e, i in backend.log if e in ("open", "send")]
    assert opens_and_sends == [
        ("open", 0), ("send", 0), ("send", 0),
        ("open", 1), ("send", 1), ("send", 1),
        ("open", 2), ("send", 2), ("send", 2),
    ]  # fmt: skip


class Clock:
    """A ``time.perf_counter`` that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_session_start_is_recorded_and_counted_in_the_case_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(time, "perf_counter", clock)
    agent = make_agent(tmp_path, cases(1, turns=2), metrics=[NUMERIC])
    backend = ScriptedBackend(agent)
    original = backend.create_session

    async def slow_open(**kwargs: Any) -> Any:
        clock.now += 0.52  # the session takes 520 ms to start
        return await original(**kwargs)

    backend.create_session = slow_open  # type: ignore[method-assign]

    result = asyncio.run(Engine(agent, backend=backend).run_case(0))

    assert result.session_start_ms == 520
    assert result.turns is not None
    assert result.execution_time_ms == 520 + sum(t.execution_time_ms for t in result.turns)


def test_a_case_counts_only_the_part_of_its_session_start_it_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr(time, "perf_counter", clock)
    gates = {1: asyncio.Event(), 2: asyncio.Event()}

    class Session:
        async def close(self) -> None:
            pass

    async def opener(index: int) -> Any:
        if index in gates:
            await gates[index].wait()
        return Session()

    async def scenario() -> list[Any]:
        starts = SessionStarts(opener, [0, 1, 2], ahead=2, timeout=10)
        first = await starts.take(0)  # opens cases 1 and 2 ahead
        clock.now += 0.4  # case 1's session starts in 400 ms, while case 0 runs...
        gates[1].set()
        await asyncio.sleep(0.01)
        clock.now += 1.0  # ...which takes a second more
        second = await starts.take(1)  # ready: no wait

        async def finish_starting() -> None:
            await asyncio.sleep(0.01)
            clock.now += 0.25  # case 2 waits the last 250 ms of its session's start
            gates[2].set()

        helper = asyncio.create_task(finish_starting())
        third = await starts.take(2)
        await helper
        await starts.close()
        return [first, second, third]

    first, second, third = asyncio.run(scenario())

    assert (first.start_ms, first.waited_ms) == (0, 0)
    assert (second.start_ms, second.waited_ms) == (400, 0)
    assert (third.start_ms, third.waited_ms) == (1650, 250)


def test_a_session_start_is_kept_out_of_holodeck_dumps_but_stored_in_ours(
    tmp_path: Path,
) -> None:
    from runs.core.wire.models import holodeck_dump

    agent = make_agent(tmp_path, cases(1), metrics=[NUMERIC])
    report = run(agent, CostlyBackend(agent))

    case = report.results[0]
    assert case.session_start_ms is not None
    assert "session_start_ms" in report.model_dump(mode="json")["results"][0]
    assert "session_start_ms" not in holodeck_dump(report)["results"][0]


@pytest.mark.parametrize(
    "parallel, cpus, ahead", [(1, 2, 2), (4, 2, 2), (4, 16, 5), (1, 1, 1), (16, 8, 8)]
)
def test_sessions_are_opened_one_more_than_the_parallelism_ahead_at_most_one_per_cpu(
    parallel: int, cpus: int, ahead: int
) -> None:
    assert sessions_ahead(parallel, cpus=cpus) == ahead


def test_a_backend_that_reuses_processes_gets_one_session_ahead_inside_its_run_scope(
    tmp_path: Path,
) -> None:
    agent = make_agent(tmp_path, cases(5), metrics=[NUMERIC])
    scopes: list[str] = []

    class ReusingBackend(CostlyBackend):
        cases_per_process = 4

        @contextlib.asynccontextmanager
        async def session_scope(self) -> AsyncIterator[None]:
            scopes.append("enter")
            yield
            scopes.append(f"exit after {len(self.events('close'))} closes")

    backend = ReusingBackend(agent)

    report = run(agent, backend, parallel=1)

    assert all(result.passed for result in report.results)
    first_send = backend.log.index(("send", 0))
    assert [i for event, i in backend.log[:first_send] if event == "open"] == [0, 1]
    for position, (event, index) in enumerate(backend.log):
        if event == "send":
            assert max(i for e, i in backend.log[:position] if e == "open") <= index + 1
    # The scope holds the whole run: every case's session closed inside it.
    assert scopes == ["enter", "exit after 5 closes"]
