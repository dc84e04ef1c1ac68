"""What a case task writes, and what it costs: a case's turns are written within a fraction of a
second of finishing (together when they finish close together, with the case's result), and a
task runs its run's next cases with a few queries per case, whatever their turns."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.db.backends.signals import connection_created

from runs import recorder
from runs.core.engine.events import CaseEvent
from runs.core.wire import models as wire
from runs.core.wire.build import rollup_turns
from runs.models import CaseRow, Run, TurnRow
from runs.services import execution, launch
from tests.web.factories import RunSpec, build_run
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db(transaction=True)


def claimed_case(turns: int = 2) -> tuple[CaseRow, int]:
    """The one pending case of a running run, claimed by this process: (row, attempt)."""
    run = build_run(spec=RunSpec(cases=1, turns=turns, done=0, status=Run.Status.RUNNING))
    case = run.cases.get()
    attempt = recorder.case_claim(case)
    assert attempt is not None
    return case, attempt


def turn(index: int) -> wire.TurnResult:
    return wire.TurnResult(
        turn_index=index, input=f"question {index}", response="42", passed=True, execution_time_ms=1
    )


def finished(case: CaseRow, index: int) -> CaseEvent:
    return CaseEvent("turn_finished", case.index, case.name, 2, turn=turn(index))


def case_finished(case: CaseRow) -> CaseEvent:
    turns = [turn(0), turn(1)]
    result = rollup_turns(turns, test_name=case.name, timestamp="2026-12-01T00:00:00Z")
    return CaseEvent("case_finished", case.index, case.name, 2, result=result, turns=tuple(turns))


def run_in_a_task(flow: Callable[[], Awaitable[None]]) -> None:
    """Run ``flow`` in an event loop as a case task does; the recorder thread's connection is
    closed afterwards, as the task closes it."""

    async def with_cleanup() -> None:
        try:
            await flow()
        finally:
            await sync_to_async(recorder.close_thread_connection, thread_sensitive=True)()

    asyncio.run(with_cleanup())


async def idle(case_recorder: recorder.CaseRecorder) -> None:
    """Until no write is due or under way (what was due is written)."""
    while case_recorder.timers or case_recorder.writes:
        await asyncio.sleep(0.01)


@sync_to_async(thread_sensitive=True)
def turn_rows(case: CaseRow) -> int:
    return TurnRow.objects.filter(case=case).count()


def test_turns_that_finish_close_together_are_written_with_their_cases_result() -> None:
    case, attempt = claimed_case()
    seen: list[int] = []

    async def flow() -> None:
        writer = recorder.CaseRecorder(per_turn=True, write_within=60)
        writer.track(case, attempt)
        await writer(finished(case, 0))
        await writer(finished(case, 1))
        seen.append(await turn_rows(case))
        await writer(case_finished(case))

    run_in_a_task(flow)
    assert seen == [0]
    case.refresh_from_db()
    assert case.status == CaseRow.Status.DONE and case.turn_count == 2
    assert TurnRow.objects.filter(case=case).count() == 2
    assert Run.objects.get(pk=case.run_id).turns_done == 2


def test_the_runs_first_turn_is_written_at_once_and_the_next_ones_within_the_delay() -> None:
    case, attempt = claimed_case()
    seen: list[int] = []

    async def flow() -> None:
        writer = recorder.CaseRecorder(per_turn=True, write_within=60, first_at_once=True)
        writer.track(case, attempt)
        await writer(finished(case, 0))
        seen.append(await turn_rows(case))  # on the page that waits for it, at once
        await writer(finished(case, 1))
        seen.append(await turn_rows(case))  # the next one waits for the delay or the result
        await writer(case_finished(case))

    run_in_a_task(flow)
    assert seen == [1, 1]
    assert TurnRow.objects.filter(case=case).count() == 2
    assert Run.objects.get(pk=case.run_id).turns_done == 2


def test_a_finished_turn_is_written_while_its_case_runs_once_the_write_delay_passed() -> None:
    case, attempt = claimed_case()
    seen: list[tuple[int, int]] = []

    async def flow() -> None:
        writer = recorder.CaseRecorder(per_turn=True, write_within=0.01)
        writer.track(case, attempt)
        await writer(finished(case, 0))
        await idle(writer)
        counted = await sync_to_async(lambda: Run.objects.get(pk=case.run_id).turns_done)()
        seen.append((await turn_rows(case), counted))
        await writer(finished(case, 1))
        await writer(case_finished(case))

    run_in_a_task(flow)
    assert seen == [(1, 1)]  # written, and counted, before the case finished
    assert TurnRow.objects.filter(case=case).count() == 2
    assert Run.objects.get(pk=case.run_id).turns_done == 2


def test_a_case_whose_write_finds_it_taken_over_stops_at_its_next_event() -> None:
    case, attempt = claimed_case()
    CaseRow.objects.filter(pk=case.pk).update(attempts=attempt + 1)  # a redelivery took it

    async def flow() -> None:
        writer = recorder.CaseRecorder(per_turn=True, write_within=0.01)
        writer.track(case, attempt)
        await writer(finished(case, 0))
        await idle(writer)  # the write in the background found the case taken
        with pytest.raises(recorder.CaseSuperseded):
            await writer(finished(case, 1))

    run_in_a_task(flow)
    assert not TurnRow.objects.filter(case=case).exists()
    assert Run.objects.get(pk=case.run_id).turns_done == 0


def test_a_run_cancelled_while_its_case_runs_is_noticed_by_the_next_write_of_its_turns() -> None:
    case, attempt = claimed_case()
    seen: list[bool] = []

    async def flow() -> None:
        writer = recorder.CaseRecorder(per_turn=True, watch_cancel=True, write_within=0.01)
        writer.track(case, attempt)
        await writer(finished(case, 0))
        await idle(writer)
        seen.append(writer.is_cancelled())
        await sync_to_async(Run.objects.filter(pk=case.run_id).update)(status=Run.Status.CANCELLED)
        await writer(finished(case, 1))
        await idle(writer)
        seen.append(writer.is_cancelled())  # the engine skips the case's next turns

    run_in_a_task(flow)
    assert seen == [False, True]
    assert Run.objects.get(pk=case.run_id).turns_done == 2


def test_a_turn_write_tells_of_a_cancelled_run_and_still_counts_the_turn() -> None:
    case, attempt = claimed_case()
    assert recorder.turns_append(case, attempt, [turn(0)]) is False
    Run.objects.filter(pk=case.run_id).update(status=Run.Status.CANCELLED)
    assert recorder.turns_append(case, attempt, [turn(1)]) is True
    assert Run.objects.get(pk=case.run_id).turns_done == 2


class Statements:
    """The SQL statements of every connection opened or used meanwhile (the recorder writes
    from a thread of its own): their first word and, for writes, their table."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        words = sql.split()
        kind = words[0].upper()
        table = {"INSERT": 2, "UPDATE": 1}.get(kind)
        self.kinds[f"{kind} {words[table].strip(chr(34))}" if table else kind] += 1
        return execute(sql, params, many, context)

    def attach(self, sender: Any, connection: Any, **_: Any) -> None:
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)


@pytest.fixture
def statements() -> Iterator[Statements]:
    counter = Statements()
    for connection in connections.all():
        counter.attach(None, connection)
    connection_created.connect(counter.attach)
    try:
        yield counter
    finally:
        connection_created.disconnect(counter.attach)
        for connection in connections.all():
            if counter in connection.execute_wrappers:
                connection.execute_wrappers.remove(counter)


def test_a_task_runs_its_runs_next_cases_with_a_few_queries_each_whatever_their_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, statements: Statements
) -> None:
    # Each case's fast turns are written with its result (the write delay is never reached).
    monkeypatch.setattr(execution, "TURN_WRITE_SECONDS", 60)
    run = launch.run_create(project=example_project(tmp_path), parallel=1)  # queued only
    execution.run_start(run_id=run.pk)
    first = run.cases.order_by("index").first()
    assert first is not None
    statements.kinds.clear()

    execution.case_execute(case_id=first.pk)  # its case, then the run's other two itself

    run.refresh_from_db()
    assert (run.cases_done, run.turns_done, run.total_turns) == (3, 10, 10)
    assert not run.is_active
    kinds = statements.kinds
    # One write of each case's turns and of their metrics, one claim and one result per case,
    # one counter update per case: none per turn; and the run's first turn, written at once
    # (the page that launched the run waits for it).
    assert kinds["INSERT runs_turnresult"] == 3 + 1
    assert kinds["INSERT runs_metricresult"] == 3 + 1
    # claims, results (+ a heartbeat), and at the run's end its compare columns (two UPDATEs
    # of its case rows: runs.selectors.compare_store)
    assert kinds["UPDATE runs_caseresult"] <= 3 + 3 + 1 + 2
    assert kinds["UPDATE runs_run"] <= 3 + 2 + 1  # the cases' counters, the run's end
    # 31 to 34, and 5 for the first turn's own write: the rest is per task (load, pump, end);
    # and, once, what the run stores when it ends besides its summary (its case list's counts,
    # its compare columns and values, its cost's token sums: 15 to 17 statements, whatever its
    # size)
    assert sum(kinds.values()) <= 50 + 17, kinds
