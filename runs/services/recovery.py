"""Keep runs moving when workers die or messages are lost.

Called by every worker's sweeper (at start, then every HOLODECK_SWEEP_SECONDS) and by
``manage.py recover``; never by a view (GET requests do not write). Every step is idempotent,
so several workers may sweep at once.

- a running case whose attempt is dead (its process is gone, or no heartbeat for
  HOLODECK_CASE_STALE_SECONDS) is queued again: the task takes it over, removes its partial
  turn rows and runs it again from its first turn (up to MAX_CASE_ATTEMPTS attempts, then it
  is an error naming the crash);
- a case queued that long ago but never started (its message was lost) is queued again;
- a run queued that long ago but never started is started again;
- a CLI run whose command's process is gone is ended as an error;
- a cancelled run waiting for a case whose attempt is dead (it would never stop after its
  current turn) has that case cancelled, with the turns it wrote, and is finished;
- free slots are filled and a run with nothing left to run is finished.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from runs.core import gitutil
from runs.core.owner import owner_alive
from runs.models import AgentProject, CaseRow, Run
from runs.recorder import case_cancel, cases_fail_open, run_abort, run_settle
from runs.services.execution import case_attempt_dead, case_pump
from runs.services.queue import EXECUTE_CASE, START_RUN, task_enqueue


def runs_recover() -> int:
    """Recover every run that needs it; the number of runs something was done for."""
    cutoff = _cutoff()
    for run_id in Run.objects.filter(status=Run.Status.QUEUED, created_at__lt=cutoff).values_list(
        "pk", flat=True
    ):
        task_enqueue(START_RUN, run_id)
    acted = 0
    for run in Run.objects.filter(status=Run.Status.RUNNING):
        if run.source == Run.Source.CLI:
            acted += cli_run_recover(run=run)
        else:
            acted += run_recover(run=run)
    # Cancelled, still counting a case as not done: Run.is_stopping.
    for run in Run.objects.filter(status=Run.Status.CANCELLED, cases_done__lt=F("total_cases")):
        acted += stopping_run_recover(run=run)
    return acted


def run_recover(*, run: Run) -> bool:
    """Queue again the cases of a dashboard run whose worker died or whose message was lost."""
    if run.status != Run.Status.RUNNING or run.source == Run.Source.CLI:
        return False
    cutoff = _cutoff()
    candidates = CaseRow.objects.filter(run=run).filter(
        Q(status=CaseRow.Status.RUNNING)
        | Q(status=CaseRow.Status.PENDING, enqueued=True, enqueued_at__lt=cutoff)
    )
    requeued = 0
    for case in candidates.only("id", "status", "claimed_by", "heartbeat_at", "enqueued_at"):
        if case.status == CaseRow.Status.RUNNING and (
            not case_attempt_dead(case) or _requeued_lately(case, cutoff)
        ):
            continue  # alive, or already queued again by a sweep (its task has not run yet)
        # Stamp the time first, so the next sweep does not queue the same case again at once.
        CaseRow.objects.filter(pk=case.pk).update(enqueued_at=timezone.now())
        task_enqueue(EXECUTE_CASE, case.pk)
        requeued += 1
    with transaction.atomic():
        pumped = case_pump(run=run)
    settled = run_settle(run)
    return bool(requeued or pumped or settled)


def stopping_run_recover(*, run: Run) -> bool:
    """A cancelled run's running case whose attempt is dead is cancelled (``case_cancel``); the
    run is finished once no case is running."""
    running = CaseRow.objects.filter(run=run, status=CaseRow.Status.RUNNING)
    stopped = 0
    for case in running.only("id", "run_id", "status", "claimed_by", "heartbeat_at"):
        if case_attempt_dead(case):
            stopped += case_cancel(case, running=True)
    settled = run_settle(run)
    return bool(stopped or settled)


def _requeued_lately(case: CaseRow, cutoff: datetime) -> bool:
    """A sweep stamps ``enqueued_at`` when it queues a dead attempt's case again: later than the
    attempt's last heartbeat. Within the stale limit that message is still on its way."""
    return bool(
        case.enqueued_at
        and case.heartbeat_at
        and case.enqueued_at > case.heartbeat_at
        and case.enqueued_at > cutoff
    )


def cli_run_recover(*, run: Run) -> bool:
    """A CLI run whose command died (same host) is ended as an error; its finished cases stay."""
    owner = run.run_options.owner
    if not owner or owner_alive(owner) is not False:
        return False
    cases_fail_open(run, "execution error: the run_agent command running this case stopped")
    return run_abort(run, "the run_agent command running this run stopped")


def worktrees_prune() -> int:
    """Remove git worktrees left by killed workers in every project's repository (at worker
    start); the number removed."""

    directories = {Path(d) for d in AgentProject.objects.values_list("directory", flat=True)}
    return sum(gitutil.worktrees_prune(d) for d in directories if d.is_dir())


def _cutoff() -> datetime:
    return timezone.now() - timedelta(seconds=settings.HOLODECK_CASE_STALE_SECONDS)
