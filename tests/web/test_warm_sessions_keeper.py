"""The rules of the sessions a worker process keeps (runs.services.warm_sessions), with a
stand-in backend: one loop per process, kept per run, bounded, stopped when idle, when the run
ends and on shutdown. The real CLI in a real worker: tests/web/test_warm_sessions.py."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from runs.services import warm_sessions
from runs.services.warm_sessions import WarmSessions


class StandIn:
    """A backend that keeps one session per scope key once a case of that key ran."""

    def __init__(self) -> None:
        self.kept: dict[Any, int] = {}
        self.closed: list[Any] = []
        self.loops: list[asyncio.AbstractEventLoop] = []

    @contextlib.asynccontextmanager
    async def session_scope(self, key: Any = None) -> AsyncIterator[None]:
        try:
            yield
        finally:  # a case's session is given back however the case ended
            self.kept[key] = 1

    def sessions_kept(self, key: Any) -> int:
        return self.kept.get(key, 0)

    async def sessions_close(self, key: Any = None) -> None:
        self.closed.append(key)
        self.kept.pop(key, None)

    def case(self) -> Callable[[], Any]:
        async def run() -> str:
            self.loops.append(asyncio.get_running_loop())
            return "done"

        return run


@pytest.fixture
def keeper() -> Iterator[WarmSessions]:
    warm = WarmSessions()
    warm.enabled = True
    yield warm
    warm.close_all()


def eventually(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.02)


def test_outside_a_worker_each_case_runs_on_a_loop_of_its_own_and_nothing_is_kept() -> None:
    warm, backend = WarmSessions(), StandIn()
    assert warm.case_run(backend, 1, backend.case()) == "done"
    warm.case_run(backend, 1, backend.case())
    assert backend.loops[0] is not backend.loops[1]
    assert warm.kept() == {} and backend.kept == {} and warm.loop.running() is None


def test_in_a_worker_a_runs_cases_share_one_loop_and_its_session_is_kept_until_the_run_ends(
    keeper: WarmSessions,
) -> None:
    backend = StandIn()
    keeper.case_run(backend, 7, backend.case())
    keeper.case_run(backend, 7, backend.case())
    assert backend.loops[0] is backend.loops[1] is keeper.loop.running()
    assert keeper.kept() == {7: 1}

    keeper.run_ended(7)
    assert backend.closed == [7] and keeper.kept() == {}


def test_a_worker_keeps_at_most_the_configured_sessions_the_least_recently_used_runs_first(
    keeper: WarmSessions, settings: Any
) -> None:
    settings.HOLODECK_WORKER_SESSIONS = 2
    backend = StandIn()
    for run_id in (1, 2, 1, 3):
        keeper.case_run(backend, run_id, backend.case())
    assert backend.closed == [2] and keeper.kept() == {1: 1, 3: 1}


def test_with_no_sessions_allowed_each_case_runs_on_a_loop_of_its_own(
    keeper: WarmSessions, settings: Any
) -> None:
    settings.HOLODECK_WORKER_SESSIONS = 0
    backend = StandIn()
    keeper.case_run(backend, 1, backend.case())
    keeper.case_run(backend, 1, backend.case())
    assert backend.loops[0] is not backend.loops[1] and keeper.kept() == {}


def test_a_session_unused_for_the_idle_time_is_stopped(
    keeper: WarmSessions, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.HOLODECK_WORKER_SESSION_IDLE_SECONDS = 1
    monkeypatch.setattr(warm_sessions, "CHECK_SECONDS", 0.05)
    monkeypatch.setattr(warm_sessions, "_active_runs", lambda run_ids: set(run_ids))
    backend = StandIn()
    keeper.case_run(backend, 4, backend.case())
    assert keeper.kept() == {4: 1}  # still running, used a moment ago
    eventually(lambda: backend.closed == [4])
    assert keeper.kept() == {}


def test_the_session_of_a_run_that_ended_elsewhere_is_stopped_at_the_next_check(
    keeper: WarmSessions, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.HOLODECK_WORKER_SESSION_IDLE_SECONDS = 3600
    monkeypatch.setattr(warm_sessions, "CHECK_SECONDS", 0.05)
    active = {5, 6}
    monkeypatch.setattr(warm_sessions, "_active_runs", lambda run_ids: run_ids & active)
    backend = StandIn()
    keeper.case_run(backend, 5, backend.case())
    keeper.case_run(backend, 6, backend.case())
    active.discard(5)  # cancelled from the dashboard
    eventually(lambda: backend.closed == [5])
    assert keeper.kept() == {6: 1}


def test_closing_all_stops_every_kept_session_and_the_loop(keeper: WarmSessions) -> None:
    backend, other = StandIn(), StandIn()
    keeper.case_run(backend, 1, backend.case())
    keeper.case_run(other, 2, other.case())
    keeper.close_all()
    assert backend.closed == [1] and other.closed == [2]
    eventually(lambda: keeper.loop.running() is None)
    assert keeper.kept() == {}


def test_a_case_that_raises_raises_in_the_task_and_its_run_keeps_its_session(
    keeper: WarmSessions,
) -> None:
    backend = StandIn()

    async def crash() -> None:
        raise RuntimeError("the engine broke")

    with pytest.raises(RuntimeError, match="the engine broke"):
        keeper.case_run(backend, 9, crash)
    assert keeper.kept() == {9: 1}
