"""Writes and orchestration: register projects, create / start / execute / finish / cancel runs
and keep them moving when workers die. Celery tasks and views call these and hold no business
logic themselves; whole-report writes (CLI runs, imports, export) are in ``runs.records``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from graders.result import error_text
from runs import gitutil
from runs.models import AgentProject, CaseResult, MetricResult, Run, TurnResult
from runs.records import case_fields, case_wire, metric_rows, metric_summary, turn_fields
from runs.report import models as wire
from runs.spec.errors import ConfigError, ConfigProblem
from runs.spec.test_cases import case_label

if TYPE_CHECKING:
    from runs.spec.loader import LoadedAgent

log = logging.getLogger(__name__)


class LaunchError(Exception):
    """A run cannot be launched (bad git ref, no matching case, ...); nothing was queued.

    ``field`` names the launch-form field at fault, if one is.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


# --- projects -------------------------------------------------------------------------------


def project_register(*, agent_path: Path, name: str | None = None) -> AgentProject:
    """Register (or update) the project whose agent.yaml is ``agent_path``."""
    from runs.spec.loader import load_agent

    agent_path = agent_path.resolve()
    if not agent_path.is_file():
        raise FileNotFoundError(f"{agent_path} does not exist")
    description = ""
    if name is None:
        try:
            agent = load_agent(agent_path)
            name, description = agent.config.name, agent.config.description or ""
        except ConfigError:
            name = agent_path.parent.name
    project, _ = AgentProject.objects.update_or_create(
        name=name,
        defaults={
            "directory": str(agent_path.parent),
            "agent_file": agent_path.name,
            "description": description,
        },
    )
    return project


# --- launching -----------------------------------------------------------------------------


def select_cases(
    test_cases: list[Any], *, case_filter: str = "", limit: int | None = None
) -> list[int]:
    needle = case_filter.strip().lower()
    indices = [
        index
        for index, case in enumerate(test_cases)
        if not needle or needle in case_label(case.name, index).lower()
    ]
    return indices[:limit] if limit else indices


def run_create(
    *,
    project: AgentProject,
    user: Any = None,
    git_ref: str = "",
    parallel: int | None = None,
    limit: int | None = None,
    case_filter: str = "",
) -> Run:
    """Validate the agent (at ``git_ref`` if given), create a queued Run, enqueue on commit.

    Raises ConfigError (every problem of the agent.yaml) or LaunchError; nothing is queued then.
    """
    from runs.spec.loader import load_agent

    directory = Path(project.directory)
    commit = ""
    if git_ref.strip():
        try:
            commit = gitutil.resolve_commit(directory, git_ref.strip())
        except gitutil.GitError as exc:
            raise LaunchError(str(exc), field="git_ref") from exc
    try:
        with gitutil.checkout(directory, commit or None) as agent_dir:
            agent = load_agent(agent_dir / project.agent_file, parallel_override=parallel)
    except gitutil.GitError as exc:
        raise LaunchError(f"could not check out {git_ref}: {exc}", field="git_ref") from exc
    except FileNotFoundError as exc:
        raise ConfigError([ConfigProblem(project.agent_file, None, None, "", str(exc))]) from exc
    indices = select_cases(agent.config.test_cases, case_filter=case_filter, limit=limit)
    if not indices:
        raise LaunchError(f"no test case matches the filter {case_filter!r}", field="case_filter")
    info = gitutil.git_info(directory)
    run = Run.objects.create(
        project=project,
        source=Run.Source.DASHBOARD,
        agent_name=agent.config.name,
        agent_config_path=str(project.agent_path),
        git_ref=git_ref.strip(),
        git_commit=commit or (info.commit if info else ""),
        git_branch=(info.branch if info and not commit else ""),
        git_dirty=bool(info and info.dirty and not commit),
        config_snapshot=agent.redacted_snapshot(),
        raw_yaml=agent.raw_yaml,
        options={
            "parallel": agent.parallel_test_cases,
            "limit": limit,
            "case_filter": case_filter,
            "case_indices": indices,
            # [index, name, multi-turn?, turns] of each selected case, so starting the run needs
            # neither the agent.yaml nor its test cases file again.
            "cases": [
                [i, case.name or "", case.is_multi_turn, len(case.as_turns())]
                for i in indices
                for case in [agent.config.test_cases[i]]
            ],
            "checkout_commit": commit,
        },
        created_by=user if getattr(user, "is_authenticated", False) else None,
        total_cases=len(indices),
        total_turns=sum(len(agent.config.test_cases[i].as_turns()) for i in indices),
    )
    from runs import tasks

    transaction.on_commit(lambda: tasks.start_run.delay(run.pk))
    return run


def run_start(run_id: int) -> None:
    """Claim the run and create its case rows in one transaction, then queue its first cases.

    Redelivery-safe: a run already running is resumed (missing rows created, free slots filled);
    any failure rolls the claim back, so the task can be delivered again.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.status == Run.Status.QUEUED:
            run.mark_running()
        elif run.status != Run.Status.RUNNING:
            return
        CaseResult.objects.bulk_create(
            [
                CaseResult(run=run, index=index, name=name, is_multi_turn=multi, turn_count=turns)
                for index, name, multi, turns in run.options.get("cases") or []
            ],
            ignore_conflicts=True,
        )
        case_pump(run)
        _case_settled(run)  # a run with no case left to run finishes here


@contextlib.contextmanager
def run_agent_loaded(run: Run) -> Iterator[LoadedAgent]:
    """The run's agent, loaded from its project (at the run's commit when one was asked for)."""
    from runs.spec.loader import load_agent

    project = run.project
    if project is None:
        raise LaunchError("the run's project was deleted")
    commit = run.options.get("checkout_commit") or None
    with gitutil.checkout(Path(project.directory), commit) as agent_dir:
        yield load_agent(
            agent_dir / project.agent_file, parallel_override=run.options.get("parallel")
        )


def case_pump(run: Run) -> int:
    """Queue not-yet-queued cases until ``parallel`` cases of the run are in flight.

    Each case is queued once (an atomic flag), so concurrent pumps never double-queue.
    """
    from runs import tasks

    in_flight = CaseResult.objects.filter(
        run=run, enqueued=True, status__in=[CaseResult.Status.PENDING, CaseResult.Status.RUNNING]
    ).count()
    slots = max(1, int(run.options.get("parallel") or 1)) - in_flight
    queued = 0
    while queued < slots:
        case_id = (
            CaseResult.objects.filter(run=run, enqueued=False, status=CaseResult.Status.PENDING)
            .order_by("index")
            .values_list("pk", flat=True)
            .first()
        )
        if case_id is None:
            break
        if CaseResult.objects.filter(pk=case_id, enqueued=False).update(
            enqueued=True, enqueued_at=timezone.now()
        ):
            transaction.on_commit(partial(tasks.execute_case.delay, case_id))
            queued += 1
    return queued


# --- executing one case (inside a Celery task) ----------------------------------------------

MAX_CASE_ATTEMPTS = 3


class CaseSuperseded(Exception):
    """Another attempt owns the case now (a redelivery); this one stops writing."""


def case_execute(case_id: int) -> None:
    """Run one test case as a real agent session, writing each turn as soon as it finishes.

    Redelivery-safe: a case already settled only pumps and settles its run; a case left running
    by a dead worker is claimed again (a new attempt), its partial rows replaced. Each attempt
    writes only while it still owns the case, so two deliveries never interleave their rows.
    """
    case = CaseResult.objects.select_related("run", "run__project").get(pk=case_id)
    run = case.run
    if run.status == Run.Status.RUNNING and case.status in (
        CaseResult.Status.PENDING,
        CaseResult.Status.RUNNING,
    ):
        attempt = _case_claim(case)
        if attempt is not None:
            _case_run(case, attempt)
    elif run.status == Run.Status.CANCELLED:
        _case_cancel(case)
    case_pump(run)
    _case_settled(run)


def _case_claim(case: CaseResult) -> int | None:
    """Take the case for a new attempt (None: another attempt has it, or it is given up).

    A running case is taken over only when its attempt is dead: its process is gone (same
    host) or its heartbeat is stale. A message redelivered while the case is still running
    (a long case outliving the broker's visibility timeout) leaves it alone.
    """
    if case.status == CaseResult.Status.RUNNING and not _attempt_dead(case):
        return None
    attempt = case.attempts + 1
    now = timezone.now()
    claimed = CaseResult.objects.filter(
        pk=case.pk, status=case.status, attempts=case.attempts
    ).update(
        status=CaseResult.Status.RUNNING,
        attempts=attempt,
        started_at=now,
        heartbeat_at=now,
        claimed_by=THIS_PROCESS,
    )
    if not claimed:
        return None
    if case.status == CaseResult.Status.RUNNING:  # its worker died mid-case
        _case_reset(case)
    if attempt > MAX_CASE_ATTEMPTS:
        _case_error(
            case,
            attempt,
            f"gave up after {MAX_CASE_ATTEMPTS} attempts (the worker running it stopped each time)",
        )
        return None
    return attempt


THIS_PROCESS = f"{socket.gethostname()}:{os.getpid()}"


def _attempt_dead(case: CaseResult) -> bool:
    cutoff = timezone.now() - timedelta(seconds=settings.HOLODECK_CASE_STALE_SECONDS)
    if case.heartbeat_at is None or case.heartbeat_at < cutoff:
        return True
    host, _, pid = case.claimed_by.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another machine: only its heartbeat can tell
    if int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _case_run(case: CaseResult, attempt: int) -> None:
    try:
        with run_agent_loaded(case.run) as agent:
            _case_check_unchanged(case, agent)
            result, turns, cancelled = asyncio.run(_execute(agent, case, attempt))
    except CaseSuperseded:
        return
    except Exception as exc:
        log.exception("case %s of run %s crashed", case.index, case.run_id)
        _case_error(case, attempt, f"execution error: {error_text(exc)}")
        return
    case_record_result(case, attempt, result, turns, cancelled=cancelled)


def _case_check_unchanged(case: CaseResult, agent: LoadedAgent) -> None:
    """The case must still be the one launched (agent.yaml may have changed on disk since)."""
    cases = agent.config.test_cases
    current = cases[case.index] if case.index < len(cases) else None
    if (
        current is None
        or (current.name or "") != case.name
        or (len(current.as_turns()) != case.turn_count)
    ):
        raise LaunchError(
            "agent.yaml changed since the run was launched: this test case is not the same "
            "any more (launch a new run, or run a git ref to pin the config)"
        )


async def _execute(
    agent: LoadedAgent, case: CaseResult, attempt: int
) -> tuple[wire.TestResult, tuple[wire.TurnResult, ...], bool]:
    """Run the case; also say whether the run was cancelled while it ran."""
    from runs.engine.events import CaseEvent
    from runs.engine.executor import Engine

    cancelled = False
    finished: list[CaseEvent] = []
    record = sync_to_async(turn_record, thread_sensitive=True)
    is_cancelled_now = sync_to_async(
        lambda: Run.objects.filter(pk=case.run_id, status=Run.Status.CANCELLED).exists(),
        thread_sensitive=True,
    )

    async def on_event(event: CaseEvent) -> None:
        nonlocal cancelled
        if event.kind == "turn_finished" and event.turn is not None:
            await record(case, attempt, event.turn)
            cancelled = await is_cancelled_now()
        elif event.kind == "case_finished":
            finished.append(event)

    engine = Engine(agent, on_event=on_event, is_cancelled=lambda: cancelled)
    try:
        result = await engine.run_case(case.index)
    finally:
        # The recorder's thread keeps a database connection of its own; do not leak it.
        await sync_to_async(_close_thread_connection, thread_sensitive=True)()
    return result, finished[0].turns, cancelled


def _close_thread_connection() -> None:
    connection.close()  # the connection of the thread this runs in


def _owned(case: CaseResult, attempt: int) -> Any:
    return CaseResult.objects.filter(pk=case.pk, attempts=attempt, status=CaseResult.Status.RUNNING)


def turn_record(case: CaseResult, attempt: int, turn: wire.TurnResult) -> TurnResult:
    """Write one finished turn and its metric rows, if this attempt still owns the case."""
    with transaction.atomic():
        if not _owned(case, attempt).update(heartbeat_at=timezone.now()):
            raise CaseSuperseded
        replaced, _ = TurnResult.objects.filter(case=case, index=turn.turn_index).delete()
        row = TurnResult.objects.create(run_id=case.run_id, case=case, **turn_fields(turn))
        MetricResult.objects.bulk_create(metric_rows(case.run_id, row, turn.metric_results))
        if not replaced:
            Run.objects.filter(pk=case.run_id).update(turns_done=F("turns_done") + 1)
    return row


def case_record_result(
    case: CaseResult,
    attempt: int,
    result: wire.TestResult,
    turns: tuple[wire.TurnResult, ...],
    *,
    cancelled: bool = False,
) -> None:
    """Settle the case: done, or cancelled when the run was cancelled under it and some of its
    turns were skipped for that."""
    cancelled = cancelled and any(turn.skipped for turn in turns)
    usage = result.token_usage
    with transaction.atomic():
        updated = _owned(case, attempt).update(
            status=CaseResult.Status.CANCELLED if cancelled else CaseResult.Status.DONE,
            finished_at=timezone.now(),
            turn_count=len(turns),
            turns_passed=sum(1 for turn in turns if turn.passed),
            **case_fields(result),
        )
        if not updated:
            return
        Run.objects.filter(pk=case.run_id).update(
            cases_done=F("cases_done") + 1,
            passed_cases=F("passed_cases") + (1 if result.passed and not cancelled else 0),
            failed_cases=F("failed_cases") + (0 if result.passed or cancelled else 1),
            prompt_tokens=F("prompt_tokens") + (usage.prompt_tokens if usage else 0),
            completion_tokens=F("completion_tokens") + (usage.completion_tokens if usage else 0),
            total_tokens=F("total_tokens") + (usage.total_tokens if usage else 0),
        )


def _case_error(case: CaseResult, attempt: int, error: str) -> None:
    with transaction.atomic():
        if _owned(case, attempt).update(
            status=CaseResult.Status.ERROR, passed=False, errors=[error], finished_at=timezone.now()
        ):
            Run.objects.filter(pk=case.run_id).update(
                cases_done=F("cases_done") + 1, failed_cases=F("failed_cases") + 1
            )


def _case_reset(case: CaseResult) -> None:
    """Remove a dead attempt's partial turn rows (and their metrics) before running again."""
    with transaction.atomic():
        _, removed = TurnResult.objects.filter(case=case).delete()
        turns = removed.get(TurnResult._meta.label, 0)
        Run.objects.filter(pk=case.run_id).update(turns_done=F("turns_done") - turns)


def _case_cancel(case: CaseResult) -> None:
    if CaseResult.objects.filter(pk=case.pk, status=CaseResult.Status.PENDING).update(
        status=CaseResult.Status.CANCELLED, finished_at=timezone.now()
    ):
        Run.objects.filter(pk=case.run_id).update(cases_done=F("cases_done") + 1)


def _case_settled(run: Run) -> None:
    """Finish the run once no case is pending or running."""
    open_cases = CaseResult.objects.filter(
        run=run, status__in=[CaseResult.Status.PENDING, CaseResult.Status.RUNNING]
    ).exists()
    if not open_cases:
        run_finalize(run.pk)


# --- finishing, cancelling, reaping ----------------------------------------------------------


def run_finalize(run_id: int) -> None:
    """Compute the roll-up from the case rows and end the run (once: a conditional UPDATE).

    The live counters are recomputed from the rows here, so they end exact whatever happened
    on the way (redeliveries, reaped cases, cancellation).
    """
    from runs.report.build import summarize

    run = Run.objects.get(pk=run_id)
    cases = list(CaseResult.objects.filter(run=run).order_by("index"))
    graded = [c for c in cases if c.status in (CaseResult.Status.DONE, CaseResult.Status.ERROR)]
    results = [case_wire(case) for case in graded]
    duration = int((timezone.now() - (run.started_at or run.created_at)).total_seconds() * 1000)
    summary = summarize(results, duration)
    fields = {
        **run_counters(run),
        "pass_rate": summary.pass_rate,
        "duration_ms": duration,
        "summary": summary.model_dump(include={"metrics_evaluated", "average_scores"}),
        "metric_summary": metric_summary(results),
        "report_timestamp": timezone.now().isoformat(),
    }
    errored = any(case.status == CaseResult.Status.ERROR for case in cases)
    if errored and not any(case.status == CaseResult.Status.DONE for case in cases):
        ended = run.fail("every test case failed to execute", **fields)
    else:
        ended = run.finish(passed=summary.failed == 0 and not errored and bool(graded), **fields)
    if not ended:
        # Cancelled (or already finished): keep the status but store the roll-up.
        Run.objects.filter(pk=run.pk).update(**fields)


def run_counters(run: Run) -> dict[str, int]:
    """The summary counters, counted from the rows (two queries)."""
    settled = [CaseResult.Status.DONE, CaseResult.Status.ERROR, CaseResult.Status.CANCELLED]
    counts = CaseResult.objects.filter(run=run).aggregate(
        n_done=Count("pk", filter=Q(status__in=settled)),
        n_passed=Count("pk", filter=Q(status=CaseResult.Status.DONE, passed=True)),
        n_failed=Count(
            "pk",
            filter=Q(status=CaseResult.Status.ERROR)
            | Q(status=CaseResult.Status.DONE, passed=False),
        ),
    )
    return {
        "cases_done": counts["n_done"],
        "passed_cases": counts["n_passed"],
        "failed_cases": counts["n_failed"],
        "turns_done": TurnResult.objects.filter(run=run).count(),
    }


def run_cancel(*, run: Run) -> bool:
    """Cancel a queued or running run: pending cases never start; running cases stop after
    their current turn (the rest of their turns are recorded as skipped)."""
    if not run.cancel():
        return False
    pending = CaseResult.objects.filter(run=run, status=CaseResult.Status.PENDING)
    count = pending.update(status=CaseResult.Status.CANCELLED, finished_at=timezone.now())
    Run.objects.filter(pk=run.pk).update(cases_done=F("cases_done") + count)
    _case_settled(run)
    return True


def _stale_cases(run: Run) -> Any:
    cutoff = timezone.now() - timedelta(seconds=settings.HOLODECK_CASE_STALE_SECONDS)
    return CaseResult.objects.filter(run=run).filter(
        Q(status=CaseResult.Status.RUNNING, heartbeat_at__lt=cutoff)
        | Q(status=CaseResult.Status.PENDING, enqueued=True, enqueued_at__lt=cutoff)
    )


def run_has_stale_cases(run: Run) -> bool:
    """One read: does the run have a case whose worker died or whose message was lost?"""
    return run.status == Run.Status.RUNNING and _stale_cases(run).exists()


def run_reap_stale(run: Run) -> bool:
    """Keep a run moving when workers or messages are lost (returns whether it did anything).

    - a case whose worker stopped reporting (no turn for HOLODECK_CASE_STALE_SECONDS) is errored;
    - a case queued that long ago but never started (its message was lost) is queued again;
    - free slots are filled and, when nothing is left, the run is settled.
    """
    if run.status != Run.Status.RUNNING:
        return False
    from runs import tasks

    cutoff = timezone.now() - timedelta(seconds=settings.HOLODECK_CASE_STALE_SECONDS)
    stale = CaseResult.objects.filter(
        run=run, status=CaseResult.Status.RUNNING, heartbeat_at__lt=cutoff
    )
    reaped = stale.update(
        status=CaseResult.Status.ERROR,
        passed=False,
        errors=["execution error: the worker running this case stopped responding"],
        finished_at=timezone.now(),
    )
    lost = list(
        CaseResult.objects.filter(
            run=run, status=CaseResult.Status.PENDING, enqueued=True, enqueued_at__lt=cutoff
        ).values_list("pk", flat=True)
    )
    for case_id in lost:
        CaseResult.objects.filter(pk=case_id).update(enqueued_at=timezone.now())
        tasks.execute_case.delay(case_id)
    with transaction.atomic():
        pumped = case_pump(run)
    if reaped:
        Run.objects.filter(pk=run.pk).update(**run_counters(run))
    _case_settled(run)
    return bool(reaped or lost or pumped)


def runs_reap_stale() -> int:
    """``run_reap_stale`` for every running run, and a second chance for runs whose start
    message was lost (queued for longer than HOLODECK_CASE_STALE_SECONDS)."""
    from runs import tasks

    cutoff = timezone.now() - timedelta(seconds=settings.HOLODECK_CASE_STALE_SECONDS)
    for run_id in Run.objects.filter(status=Run.Status.QUEUED, created_at__lt=cutoff).values_list(
        "pk", flat=True
    ):
        tasks.start_run.delay(run_id)
    return sum(run_reap_stale(run) for run in Run.objects.filter(status=Run.Status.RUNNING))
