"""Execute a run in the workers: start it, then run each case as a real agent session.

One Celery task per case, at most ``parallel`` cases of a run in flight (``case_pump``); a task
that finished its case takes the next one itself, fairly across runs (``case_next_fair``: the
run with the fewest cases running), so a small run never queues behind a big one. Each
case is run by the process that claims it (``runs.recorder.case_claim``) and written through the
recorder as its turns finish. The agent is loaded from the run's snapshot (the files sealed at
launch, unpacked once per machine into ``HOLODECK_SNAPSHOT_CACHE``), never from the project's
directory: a worker needs no shared file system, and an edit on disk after the launch changes
nothing in a launched run. Loaded agents are kept per process, keyed by snapshot, with the
backend built for them.

What a case costs besides its own work is kept small (benchmarks/case_task_profile.py): the run
row is read once per task, without the columns a task never uses (the config snapshot holds
every test case); a task that finished its case takes the next one itself (two reads, one
claim); the recorder's connection lives as long as the task; a case's turns are written within
TURN_WRITE_SECONDS of finishing, those that finish closer together in one transaction (a case
of fast turns: one, with its result).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import Count, QuerySet
from django.utils import timezone

from graders.result import error_text
from runs import recorder
from runs.core.engine.events import emit
from runs.core.engine.executor import Engine
from runs.core.engine.regrade import NOT_REGRADABLE, regrade_case
from runs.core.logcontext import log_context, log_context_set
from runs.core.owner import owner_dead
from runs.core.wire import models as wire
from runs.mapping import turn_to_wire
from runs.models import CaseRow, Run, TurnRow, TurnTranscript
from runs.services import warm_sessions
from runs.services.heartbeats import case_heartbeat
from runs.services.queue import EXECUTE_CASE, task_enqueue
from runs.services.run_agents import (
    agent_backend,
    run_agent,
    run_agent_forget,
)
from runs.services.run_agents import (
    # Kept importable from here: the worker's shutdown (runs.tasks) and tests call it.
    run_agents_forget as run_agents_forget,
)

if TYPE_CHECKING:
    from runs.core.agentconfig.loader import LoadedAgent
    from runs.core.backends.base import AgentBackend
    from runs.core.engine.events import CaseEvent, EventCallback

log = logging.getLogger(__name__)


def run_start(*, run_id: int) -> None:
    """Claim the queued run and queue its first cases, in one transaction.

    Redelivery-safe: a run already running is resumed (missing case rows created, free slots
    filled); any failure rolls the claim back, so the task can be delivered again.
    """
    with log_context(run_id=run_id), transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.status == Run.Status.QUEUED:
            run.mark_running()
        elif run.status != Run.Status.RUNNING:
            return
        recorder.case_rows_ensure(run)  # runs queued before case rows were made at launch
        case_pump(run=run)
        recorder.run_settle(run)  # a run with no case left to run finishes here


def run_execute_inline(*, run_id: int) -> Run:
    """Run a queued run's cases in this process, one after another, without a worker (the
    ``regrade`` command's default). Each case is claimed like a worker would; a case a worker
    took meanwhile is left to it."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.status == Run.Status.QUEUED:
            run.mark_running()
    agent: LoadedAgent | None = None
    with _recorder_connection():
        for case in (
            _cases_with_run()
            .filter(run_id=run_id, status=CaseRow.Status.PENDING)
            .order_by("index", "repetition")
        ):
            if case.run.status != Run.Status.RUNNING:
                break
            attempt = recorder.case_claim(case)
            if attempt is not None:
                agent = _case_run(case, attempt, agent)
    run = Run.objects.get(pk=run_id)
    if recorder.run_settle(run):
        run_agent_forget(run_id)
    return Run.objects.get(pk=run_id)


def case_pump(*, run: Run) -> int:
    """Queue not-yet-queued cases until ``parallel`` cases of the run are in flight.

    Each case is queued once (an atomic flag), so concurrent pumps never double-queue.
    """
    in_flight = CaseRow.objects.filter(
        run=run, enqueued=True, status__in=[CaseRow.Status.PENDING, CaseRow.Status.RUNNING]
    ).count()
    slots = (run.run_options.parallel or 1) - in_flight
    queued = 0
    while queued < slots:
        case_id = _case_mark_next_queued(run)
        if case_id is None:
            break
        if case_id:
            task_enqueue(EXECUTE_CASE, case_id)
            queued += 1
    return queued


def case_execute(*, case_id: int) -> None:
    """Run one test case as a real agent session, writing each turn as soon as it finishes.

    Redelivery-safe: a settled case only pumps and settles its run; a running case is taken
    over only when its attempt is dead (its process is gone, or its heartbeat is stale), and
    then runs again from its first turn.
    """
    case = _cases_with_run().get(pk=case_id)
    run = case.run
    touched = [run]
    if run.status == Run.Status.RUNNING and case.status in (
        CaseRow.Status.PENDING,
        CaseRow.Status.RUNNING,
    ):
        attempt = recorder.case_claim(case, take_over=case_attempt_dead(case))
        if attempt is not None:
            with _recorder_connection():
                agent = _case_run(case, attempt)
                if agent is not None:
                    touched = _cases_chain(run, agent)
    elif run.status == Run.Status.CANCELLED:
        recorder.case_cancel(case)
    for each in touched:  # the runs whose cases it ran: refilled, and finished when done
        case_pump(run=each)
        if recorder.run_settle(each):
            _run_ended(each.pk)


# A task that finished its case takes the next case itself, for this long, instead of ending
# and leaving its worker slot to the broker's next message: the slot it frees is the one it
# fills, and a run of many short cases (a re-grade) does not pay a broker round trip per case.
# Which case is fair across runs (``case_next_fair``): a run launched meanwhile does not wait
# behind the budget. Past the budget it hands the next case to the broker as usual.
CHAIN_SECONDS = 20.0


def _cases_chain(run: Run, agent: LoadedAgent) -> list[Run]:
    """Run the slot's next cases (``case_next_fair``) until none is left or the budget is
    spent; the runs whose cases it ran and that it did not finish, ``run`` first.

    The task holds one slot of one run's ``parallel`` (``holder``): the one its first case
    freed, which it fills with that run's next case not queued yet. A case it takes that was
    queued to the broker is counted in its run's ``parallel`` already (its message finds it
    taken and refills the run), so it frees no slot here: its run is refilled at once by
    ``case_pump``, which counts what is in flight. When the task turns to another run's case,
    it gives the held slot back first (``case_pump``), so no run waits on a slot held for it
    elsewhere, and none gets more than its ``parallel``."""
    deadline = time.monotonic() + CHAIN_SECONDS
    runs = {run.pk: run}
    agents = {run.pk: agent}
    holder: Run | None = run
    last = run
    while time.monotonic() < deadline:
        loads = runs_load()
        _runs_settle_ended(runs, loads)
        freed = {holder.pk: 1} if holder is not None else {}
        case = case_next_fair(after=last, freed=freed, loads=loads)
        if case is None:
            break
        if holder is not None and case.run_id != holder.pk:
            case_pump(run=holder)  # its slot, back to the broker's next message
            holder = None
        queued = case.enqueued
        attempt = recorder.case_claim(case, unqueued=not queued)
        if attempt is None:  # another task or a pump took it first: the next one
            continue
        runs.setdefault(case.run_id, case.run)
        loaded = _case_run(case, attempt, agents.get(case.run_id))
        if loaded is not None:
            agents[case.run_id] = loaded
        if queued:  # its slot is its run's again: refilled by the one count of what is in flight
            case_pump(run=case.run)
        last = case.run
    return list(runs.values())


def _runs_settle_ended(runs: dict[int, Run], loads: Mapping[int, RunLoad]) -> None:
    """Finish the runs whose last case ended in this task (no open case left: not in
    ``loads``) now, not when the task ends; they are dropped from ``runs``."""
    for run_id, each in list(runs.items()):
        if run_id not in loads and recorder.run_settle(each):
            _run_ended(run_id)
            del runs[run_id]


def _run_ended(run_id: int) -> None:
    """What this process kept for a run it saw end: its agent (a run without a snapshot) and
    its agent sessions."""
    run_agent_forget(run_id)
    warm_sessions.run_sessions_close(run_id)


@dataclass
class RunLoad:
    """What a worker slot weighs of an active run: its cases running, those queued to the
    broker and not started (``waiting``), and those not queued yet (over its ``parallel``)."""

    run_id: int
    status: str
    created_at: datetime
    running: int = 0
    waiting: int = 0
    unqueued: int = 0


def runs_load() -> dict[int, RunLoad]:
    """The load of every active run the workers run (one query; a CLI run's command runs its
    own cases), by run id; a run with no open case is left out."""
    rows = (
        CaseRow.objects.filter(
            status__in=[CaseRow.Status.PENDING, CaseRow.Status.RUNNING],
            run__status__in=Run.ACTIVE,
        )
        .exclude(run__source=Run.Source.CLI)
        .order_by()
        .values_list("run_id", "run__status", "run__created_at", "status", "enqueued")
        .annotate(count=Count("pk"))
    )
    loads: dict[int, RunLoad] = {}
    for run_id, status, created_at, case_status, enqueued, count in rows:
        load = loads.setdefault(run_id, RunLoad(run_id, status, created_at))
        if case_status == CaseRow.Status.RUNNING:
            load.running += count
        elif enqueued:
            load.waiting += count
        else:
            load.unqueued += count
    return loads


def run_fairest(
    loads: Mapping[int, RunLoad], *, after: int, freed: Mapping[int, int]
) -> RunLoad | None:
    """The run a worker slot serves next, when it just finished a case of run ``after``: of the
    runs with a case the slot may start, the one with the fewest cases running; on a tie a run
    other than ``after`` first (round robin), then the oldest.

    The slot may start a running run's case queued to the broker and not started yet (counted
    in the run's ``parallel`` already: its message finds it taken and only refills the run), a
    queued run (started first, which queues its cases up to its ``parallel``), or the next case
    not queued yet of a run whose slot it holds (``freed``: run id -> slots; a case that ended
    in it freed one). A run is never given more than its ``parallel`` cases at once."""
    startable = [
        load
        for load in loads.values()
        if load.status == Run.Status.QUEUED
        or (load.status == Run.Status.RUNNING and load.waiting)
        or (load.status == Run.Status.RUNNING and load.unqueued and freed.get(load.run_id, 0) > 0)
    ]
    if not startable:
        return None
    return min(
        startable,
        key=lambda load: (load.running, load.run_id == after, load.created_at, load.run_id),
    )


def case_next_fair(
    *, after: Run, freed: Mapping[int, int], loads: Mapping[int, RunLoad] | None = None
) -> CaseRow | None:
    """The case a worker slot takes when it finished a case of ``after`` (``run_fairest`` of
    ``loads``, read when not given), its run row attached; None when no run has one to start.
    A run of a few cases (a re-grade) launched while a big run keeps every slot busy starts at
    the next case that ends, instead of queueing behind the big run's cases."""
    fairest = run_fairest(runs_load() if loads is None else loads, after=after.pk, freed=freed)
    if fairest is None:
        return None
    run = after if fairest.run_id == after.pk else None
    if fairest.status == Run.Status.QUEUED:
        run_start(run_id=fairest.run_id)  # its START_RUN message then finds it running
    elif freed.get(fairest.run_id, 0) > 0 and fairest.unqueued:
        found = _case_next_unqueued(fairest.run_id, run=run)
        if found is not None:
            return found
    return _case_next_waiting(fairest.run_id, run=run)


def _case_next_unqueued(run_id: int, run: Run | None = None) -> CaseRow | None:
    """The next pending case nobody queued yet of the run, while it runs (one read: a cancelled
    run's pending cases are cancelled, and it is not running any more)."""
    return _case_next(run_id, run, enqueued=False)


def _case_next_waiting(run_id: int, run: Run | None = None) -> CaseRow | None:
    """The run's next case queued to the broker and not started yet, while the run runs."""
    return _case_next(run_id, run, enqueued=True)


def _case_next(run_id: int, run: Run | None, *, enqueued: bool) -> CaseRow | None:
    """With ``run`` given (the task's row: what a case needs of it does not change), the case
    is read alone and given it; else with its run row."""
    cases = _cases_with_run() if run is None else CaseRow.objects.all()
    case = (
        cases.filter(
            run_id=run_id,
            run__status=Run.Status.RUNNING,
            enqueued=enqueued,
            status=CaseRow.Status.PENDING,
        )
        .order_by("index", "repetition")
        .first()
    )
    if case is not None and run is not None:
        case.run = run
    return case


# The run columns a case task never reads. The config snapshot alone holds every test case:
# reading it with each case cost more than running the case. (``raw_yaml`` and
# ``agent_sources`` are read, one query each, when an agent without a snapshot is loaded.)
RUN_COLUMNS_UNREAD = (
    "config_snapshot",
    "summary",
    "raw_yaml",
    "agent_sources",
    "regrade_sources",
    "environment",
    "cli_args",
    "prompt_version",
)


def _cases_with_run() -> QuerySet[CaseRow]:
    return CaseRow.objects.select_related("run", "run__project").defer(
        *(f"run__{column}" for column in RUN_COLUMNS_UNREAD)
    )


def _case_mark_next_queued(run: Run) -> int | None:
    """Mark the run's next pending, not-yet-queued case as queued (an atomic flag, so two
    pumps never take the same case); its id, 0 when a concurrent pump took it first, or None
    when no case is left."""
    case_id = (
        CaseRow.objects.filter(run=run, enqueued=False, status=CaseRow.Status.PENDING)
        .order_by("index", "repetition")
        .values_list("pk", flat=True)
        .first()
    )
    if case_id is None:
        return None
    taken = CaseRow.objects.filter(pk=case_id, enqueued=False).update(
        enqueued=True, enqueued_at=timezone.now()
    )
    return case_id if taken else 0


def case_attempt_dead(case: CaseRow) -> bool:
    if case.status != CaseRow.Status.RUNNING:
        return False
    age = (timezone.now() - case.heartbeat_at).total_seconds() if case.heartbeat_at else None
    return owner_dead(case.claimed_by, age, settings.HOLODECK_CASE_STALE_SECONDS)


def _case_run(case: CaseRow, attempt: int, agent: LoadedAgent | None = None) -> LoadedAgent | None:
    """Run the claimed case with ``agent`` (the run's, loaded here when not given); the agent,
    for the task's next case of the run, or None when it could not be loaded. Every line logged
    meanwhile carries the run's and the case's ids (runs/core/logcontext.py).

    The task's first case of the run (``agent`` not given) writes its first turn at once when
    the run had none when the task read it: the run page that launched it waits for one."""
    first_at_once = agent is None and case.run.turns_done == 0
    ids = log_context(run_id=case.run_id, case_id=case.pk, case_index=case.index, turn=None)
    with ids:
        log.info("case %s of run %s started (attempt %s)", case.index, case.run_id, attempt)
        try:
            with case_heartbeat(case, attempt):
                if agent is None:
                    agent = run_agent(case.run)
                original = case.run.run_options.regrade_of
                if original:
                    _regrade(agent, case, attempt, original)
                else:
                    backend = agent_backend(agent, case.run)
                    run_case = partial(_execute, agent, backend, case, attempt, first_at_once)
                    warm_sessions.WARM.case_run(backend, case.run_id, run_case)
        except recorder.CaseSuperseded:
            log.info("case %s of run %s was taken over by another attempt", case.index, case.run_id)
        except Exception as exc:
            log.exception("case %s of run %s crashed", case.index, case.run_id)
            recorder.case_fail(case, attempt, f"execution error: {error_text(exc)}")
        else:
            log.info("case %s of run %s ended", case.index, case.run_id)
    return agent


@contextlib.contextmanager
def _recorder_connection() -> Iterator[None]:
    """The recorder writes from the one thread ``sync_to_async`` runs it in, on that thread's
    own database connection: kept for the task's cases (one per case cost a connect each) and
    closed when the task ends, so a long-lived worker does not keep it."""
    try:
        yield
    finally:
        asyncio.run(_in_recorder_thread(recorder.close_thread_connection))


async def _in_recorder_thread(fn: Callable[[], object]) -> None:
    await sync_to_async(fn, thread_sensitive=True)()


# A finished turn is written within this many seconds (with the turns of its case that finish
# meanwhile, or with the case's result): the run page polls every second, and a case of fast
# turns is then one transaction instead of one per turn (runs.recorder.CaseRecorder).
TURN_WRITE_SECONDS = 0.2


async def _execute(
    agent: LoadedAgent,
    backend: AgentBackend,
    case: CaseRow,
    attempt: int,
    first_at_once: bool = False,
) -> None:

    # A connection that failed or outlived CONN_MAX_AGE is replaced (Django's request rule).
    await _in_recorder_thread(close_old_connections)
    writer = recorder.CaseRecorder(
        per_turn=True,
        watch_cancel=True,
        write_within=TURN_WRITE_SECONDS,
        first_at_once=first_at_once,
    )
    writer.track(case, attempt)
    engine = Engine(
        agent, backend=backend, on_event=_turn_bound(writer), is_cancelled=writer.is_cancelled
    )
    try:
        await engine.run_case(case.index, repetition=case.repetition)
    finally:
        await writer.flush()  # the turns before a crash are kept, as they would have been


def _turn_bound(listener: EventCallback) -> EventCallback:
    """``listener``, with the turn the case is on bound from the engine's progress (its index,
    from the case's start until its last turn ends) for the lines logged meanwhile. The engine
    awaits this in the case's task, whose context the binding changes; it stays Django-free and
    unaware of logging."""

    async def on_event(event: CaseEvent) -> None:
        if event.kind == "case_started":
            log_context_set("turn", 0 if event.total_turns else None)
        await emit(listener, event)
        if event.kind == "turn_finished" and event.turn is not None:
            following = event.turn.turn_index + 1
            log_context_set("turn", following if following < event.total_turns else None)

    return on_event


def _regrade(agent: LoadedAgent, case: CaseRow, attempt: int, original_id: int) -> None:
    """Grade the original run's transcript of this case with the run's agent.yaml: the agent
    is never called. The graded turns are written with the case's result (one transaction)."""

    stored = _stored_turns(original_id, case)
    if not stored:  # a case that never ran (re-grades made before they left those out)
        recorder.case_not_graded(case, attempt, f"{NOT_REGRADABLE}: run {original_id} never ran it")
        return
    result, turns = asyncio.run(
        regrade_case(
            agent,
            case_name=case.name or None,
            case_index=case.index,
            stored=stored,
            multi_turn=case.is_multi_turn,
        )
    )
    # A case the original's cancel stopped stays stopped: its skipped turns were never run,
    # so they neither fail it nor leave it "not graded".
    stopped = _original_stopped(original_id, case)
    recorder.case_finish(case, attempt, result, turns, cancelled=stopped, unwritten=turns)


def _stored_turns(original_id: int, case: CaseRow) -> list[wire.TurnResult]:
    """The original run's turns of the case with this index and repetition (the re-grade keeps
    both)."""

    rows = list(
        TurnRow.objects.filter(
            run_id=original_id, case__index=case.index, case__repetition=case.repetition
        ).order_by("index")
    )
    # The transcripts go with the turns: the re-grade's record of what the agent saw.
    transcripts = dict(
        TurnTranscript.objects.filter(turn_id__in=[row.pk for row in rows]).values_list(
            "turn_id", "events"
        )
    )
    return [turn_to_wire(row, (), transcripts.get(row.pk)) for row in rows]


def _original_stopped(original_id: int, case: CaseRow) -> bool:
    """Whether the original run's case of this index and repetition was stopped by a cancel."""
    return CaseRow.objects.filter(
        run_id=original_id,
        index=case.index,
        repetition=case.repetition,
        status=CaseRow.Status.CANCELLED,
    ).exists()
