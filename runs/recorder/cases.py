"""One attempt at a case, and the cases a run settles without a result.

``case_claim`` takes a case for one attempt of one process (``runs.core.owner``); every write of the
attempt (``turns_append``, ``case_finish``, ``case_fail``) is conditional on it still owning its
case, so a redelivered message and a dead worker's late write never interleave rows.
``case_cancel`` / ``cases_cancel_pending`` / ``cases_fail_open`` settle cases that produced no
result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import F, FloatField, QuerySet
from django.db.models.functions import NullIf, Round
from django.utils import timezone

from runs.core.owner import process_identity
from runs.core.verdicts.outcomes import GRADED, Outcome
from runs.core.wire import models as wire
from runs.mapping import TurnRows, case_values, turn_rows
from runs.models import CASE_COUNTERS, CaseRow, MetricRow, Run, TurnRow, TurnTranscript

MAX_CASE_ATTEMPTS = 3


class CaseSuperseded(Exception):
    """Another attempt owns the case now (a redelivery); this one stops writing."""


def case_claim(case: CaseRow, *, take_over: bool = False, unqueued: bool = False) -> int | None:
    """Take the case for a new attempt by this process; None when it is not to run (another
    attempt has it, or it was given up after MAX_CASE_ATTEMPTS).

    A running case is taken only with ``take_over`` (its owner is dead: the caller checked);
    its partial turn rows are removed, and it runs again from its first turn. ``unqueued``: a
    pending case nobody queued yet, taken by a task that finished another case of its run
    (``runs.services.execution``): it is marked queued by the same UPDATE, which fails when a
    pump queued it meanwhile.
    """
    if case.status == CaseRow.Status.RUNNING and not take_over:
        return None
    attempt = case.attempts + 1
    now = timezone.now()
    owned = CaseRow.objects.filter(pk=case.pk, status=case.status, attempts=case.attempts)
    queued: dict[str, Any] = {}
    if unqueued:
        owned = owned.filter(enqueued=False)
        queued = {"enqueued": True, "enqueued_at": now}
    claimed = owned.update(
        status=CaseRow.Status.RUNNING,
        attempts=attempt,
        started_at=now,
        heartbeat_at=now,
        claimed_by=process_identity(),
        **queued,
    )
    if not claimed:
        return None
    if case.status == CaseRow.Status.RUNNING:  # its worker died mid-case
        _case_reset(case)
    if attempt > MAX_CASE_ATTEMPTS:
        case_fail(
            case,
            attempt,
            f"gave up after {MAX_CASE_ATTEMPTS} attempts (the worker running it stopped each time)",
        )
        return None
    return attempt


def case_owned(case: CaseRow, attempt: int) -> QuerySet[CaseRow]:
    return CaseRow.objects.filter(pk=case.pk, attempts=attempt, status=CaseRow.Status.RUNNING)


def case_heartbeat(case: CaseRow, attempt: int) -> bool:
    """Stamp the attempt's heartbeat; False when it does not own the case any more."""
    return bool(case_owned(case, attempt).update(heartbeat_at=timezone.now()))


def turns_append(case: CaseRow, attempt: int, turns: Sequence[wire.TurnResult]) -> bool:
    """Write finished turns of the attempt with their metric rows, and count them, in one
    transaction; True when the run was cancelled meanwhile (its running cases skip the rest of
    their turns). CaseSuperseded, with nothing written, when the attempt lost the case.

    The dashboard's write while a case runs, so it is kept to what it needs: stamping the
    heartbeat checks (and locks) the attempt's ownership; no row of these turns can exist yet
    (a turn is written once per attempt, and the claim that started the attempt removed an
    earlier one's rows), so nothing is deleted first; the run's counter is moved only while
    the run is running, so an unchanged row tells of a cancel without a query of its own.
    """
    with transaction.atomic():
        if not case_heartbeat(case, attempt):
            raise CaseSuperseded
        turn_rows_insert(turn_rows(run_id=case.run_id, case=case, turns=turns))
        running = Run.objects.filter(pk=case.run_id, status=Run.Status.RUNNING)
        if running.update(turns_done=F("turns_done") + len(turns)):
            return False
        Run.objects.filter(pk=case.run_id).update(turns_done=F("turns_done") + len(turns))
    return _run_cancelled(case.run_id)


def case_finish(
    case: CaseRow,
    attempt: int,
    result: wire.TestResult,
    turns: Sequence[wire.TurnResult],
    *,
    cancelled: bool = False,
    unwritten: Sequence[wire.TurnResult] = (),
) -> bool:
    """Settle the case with its result: done, or cancelled when the run was cancelled under it
    and some of its turns were skipped for that; ``unwritten``: those of its ``turns`` not
    written yet (``turns_append``), written with it, in the same transaction. False, with
    nothing written, when the attempt lost the case."""
    cancelled = cancelled and any(turn.skipped for turn in turns)
    usage = result.token_usage
    values = case_values(result, turns)
    if cancelled:
        values["outcome"] = Outcome.CANCELLED.value
    with transaction.atomic():
        updated = case_owned(case, attempt).update(
            status=CaseRow.Status.CANCELLED if cancelled else CaseRow.Status.DONE,
            finished_at=timezone.now(),
            **values,
        )
        if not updated:
            return False
        turn_rows_insert(turn_rows(run_id=case.run_id, case=case, turns=unwritten))
        Run.objects.filter(pk=case.run_id).update(
            **_counted(values["outcome"]),
            turns_done=F("turns_done") + len(unwritten),
            prompt_tokens=F("prompt_tokens") + (usage.prompt_tokens if usage else 0),
            completion_tokens=F("completion_tokens") + (usage.completion_tokens if usage else 0),
            total_tokens=F("total_tokens") + (usage.total_tokens if usage else 0),
        )
    return True


def _counted(outcome: str) -> dict[str, Any]:
    """The run's live counters once a case with ``outcome`` is settled (for one UPDATE): done,
    and the column of its verdict (``Run.counts``)."""
    verdict = Outcome.of(outcome)
    graded = int(verdict in GRADED)
    values: dict[str, Any] = {"cases_done": F("cases_done") + 1}
    if (column := CASE_COUNTERS.get(verdict)) is not None:
        values[column] = F(column) + 1
    if graded:
        values["pass_rate"] = pass_rate_after(int(verdict is Outcome.PASSED), graded)
    return values


def case_fail(case: CaseRow, attempt: int, error: str) -> None:
    """The attempt produced no result (it crashed, or was given up): an errored case."""
    _case_settle_without_result(case, attempt, Outcome.ERROR, error)


def case_not_graded(case: CaseRow, attempt: int, reason: str) -> None:
    """The attempt has nothing to grade (a re-grade of a case that never ran): not graded,
    with the reason, not an error."""
    _case_settle_without_result(case, attempt, Outcome.NOT_GRADED, reason)


def _case_settle_without_result(case: CaseRow, attempt: int, outcome: Outcome, error: str) -> None:
    """Settle the attempt's case with ``outcome`` and ``error`` alone, counted in its run."""
    errored = outcome == Outcome.ERROR
    with transaction.atomic():
        if case_owned(case, attempt).update(
            status=CaseRow.Status.ERROR if errored else CaseRow.Status.DONE,
            passed=False if errored else None,
            outcome=outcome.value,
            errors=[error],
            finished_at=timezone.now(),
        ):
            Run.objects.filter(pk=case.run_id).update(**_counted(outcome))


def pass_rate_after(passed: int, graded: int) -> Round:
    """The live pass rate once ``graded`` more cases, ``passed`` of them passed, are counted:
    passed over graded cases (passed, failed, errored; not graded and cancelled left out), in %
    with two decimals, NULL while none is graded (``runs.core.verdicts.numbers.pass_rate_of`` in
    SQL). For the same UPDATE that counts them: the columns on the right of an UPDATE are the
    values before it."""
    settled = F("passed_cases") + F("failed_cases") + F("errored_cases") + graded
    return Round(
        (F("passed_cases") + passed) * 100.0 / NullIf(settled, 0),
        2,
        output_field=FloatField(),
    )


def case_cancel(case: CaseRow, *, running: bool = False) -> bool:
    """A case of a cancelled run that never started; ``running``: one that was running when its
    attempt died (it will never stop by itself), cancelled with the turns it wrote kept. False
    when the case was no longer in that state."""
    state = CaseRow.Status.RUNNING if running else CaseRow.Status.PENDING
    with transaction.atomic():
        cancelled = CaseRow.objects.filter(pk=case.pk, status=state).update(
            status=CaseRow.Status.CANCELLED,
            outcome=Outcome.CANCELLED.value,
            finished_at=timezone.now(),
        )
        if cancelled:
            Run.objects.filter(pk=case.run_id).update(**_counted(Outcome.CANCELLED))
    return bool(cancelled)


def cases_cancel_pending(run: Run) -> int:
    pending = CaseRow.objects.filter(run=run, status=CaseRow.Status.PENDING)
    with transaction.atomic():  # the cases and the counters that count them move together
        count = pending.update(
            status=CaseRow.Status.CANCELLED,
            outcome=Outcome.CANCELLED.value,
            finished_at=timezone.now(),
        )
        Run.objects.filter(pk=run.pk).update(
            cases_done=F("cases_done") + count, cancelled_cases=F("cancelled_cases") + count
        )
    return count


def cases_fail_open(run: Run, error: str) -> int:
    """Settle every case of the run not yet settled (pending or running) as an errored case:
    the process that was to run them is gone. The run's counters are recomputed when it ends
    (``run_abort``, ``run_finish``)."""
    return CaseRow.objects.filter(
        run=run, status__in=[CaseRow.Status.PENDING, CaseRow.Status.RUNNING]
    ).update(
        status=CaseRow.Status.ERROR,
        passed=False,
        outcome=Outcome.ERROR.value,
        errors=[error],
        finished_at=timezone.now(),
    )


def _case_reset(case: CaseRow) -> None:
    """Remove a dead attempt's partial turn rows (and their metrics) before running again."""
    with transaction.atomic():
        _, removed = TurnRow.objects.filter(case=case).delete()
        Run.objects.filter(pk=case.run_id).update(
            turns_done=F("turns_done") - _count(removed, TurnRow)
        )


def turn_rows_insert(rows_of_turns: Sequence[TurnRows]) -> None:
    """Insert turn rows, their metric rows and their transcripts (bulk: a fixed number of
    queries)."""
    if not rows_of_turns:
        return
    rows = TurnRow.objects.bulk_create([rows.turn for rows in rows_of_turns], batch_size=500)
    if not all(row.pk for row in rows):  # a backend without RETURNING on bulk insert
        saved = TurnRow.objects.filter(case_id__in={row.case_id for row in rows})
        by_key = {(t.case_id, t.index): t for t in saved}
        rows = [by_key[(row.case_id, row.index)] for row in rows]
    metrics, transcripts = [], []
    for row, unsaved in zip(rows, rows_of_turns, strict=True):
        for metric in unsaved.metrics:
            metric.turn = row
            metric.case_index = unsaved.turn.case.index
            metrics.append(metric)
        if unsaved.transcript is not None:
            unsaved.transcript.turn = row
            transcripts.append(unsaved.transcript)
    MetricRow.objects.bulk_create(metrics, batch_size=1000)
    TurnTranscript.objects.bulk_create(transcripts, batch_size=200)


def _count(removed: dict[str, int] | int, model: type[TurnRow]) -> int:
    if isinstance(removed, int):
        return removed
    return removed.get(model._meta.label, 0)


def _run_cancelled(run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, status=Run.Status.CANCELLED).exists()
