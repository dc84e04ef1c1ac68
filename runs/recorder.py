"""The one write path of a run: engine events -> rows.

Both ways of running an agent write through here, so a run stored by ``manage.py run_agent``
and the same run executed by the dashboard's workers give the same rows:

- ``run_open`` creates the Run, with everything it is opened with, and its case rows (queued
  for the dashboard, running for the CLI);
- ``case_claim`` takes a case for one attempt of one process (``runs.owner``);
- ``CaseRecorder`` turns the engine's events into writes: each finished turn within a fraction
  of a second (a Celery task: ``turns_append``), or each case's turns together when it
  finishes (the CLI batches); ``case_finish`` writes the case's result with the turns not yet
  written, in one transaction;
- ``case_fail`` / ``case_cancel`` (``cases_fail_open`` / ``cases_cancel_pending`` for a whole
  run) settle cases that produced no result;
- ``run_finish`` computes the roll-up from the rows and ends the run.

A finished report (a HoloDeck file being imported) is written whole by ``run_record``, with the
same mapping.

Every write of an attempt is conditional on the attempt still owning its case, so a redelivered
message and a dead worker's late write never interleave rows. Wire -> rows is ``runs.mapping``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection, transaction
from django.db.models import Exists, F, FloatField, OuterRef, QuerySet, Subquery
from django.db.models.functions import NullIf, Round
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from runs import gitutil
from runs.mapping import TurnRows, case_turns, case_values, summary_of_rows, turn_rows
from runs.models import AgentSnapshot, CaseResult, MetricResult, Run, TurnResult, TurnTranscript
from runs.owner import process_identity
from runs.rows import rows_insert
from runs.selectors.costs import run_prices_warn
from runs.verdicts.outcomes import Outcome
from runs.verdicts.regrades import GradingSource, RegradeSources, TranscriptSource
from runs.verdicts.summary import RunSummary
from runs.wire import models as wire
from runs.wire.build import summary_of_results
from runs.wire.round_trip import commit_subject

log = logging.getLogger(__name__)

MAX_CASE_ATTEMPTS = 3


class CaseSuperseded(Exception):
    """Another attempt owns the case now (a redelivery); this one stops writing."""


# --- opening a run --------------------------------------------------------------------------


def run_options(
    *,
    agent: Any,
    indices: Sequence[int],
    limit: int | None = None,
    case_filter: str = "",
    checkout_commit: str = "",
    repeats: int | None = None,
) -> dict[str, Any]:
    """What a run was asked to do; ``cases`` lets it start without reading the agent again;
    ``repeats``: how many times each case runs (None: the agent.yaml's ``execution.repeats``)."""
    cases = agent.config.test_cases
    return {
        "parallel": agent.parallel_test_cases,
        "repeats": repeats or agent.config.execution.repeats,
        "limit": limit,
        "case_filter": case_filter,
        "case_indices": list(indices),
        # How many cases the agent.yaml had: a run of fewer is partial (Run.partial_text).
        "config_cases": len(cases),
        # [index, name, multi-turn?, turns] of each selected case.
        "cases": [
            [i, cases[i].name or "", cases[i].is_multi_turn, len(cases[i].as_turns())]
            for i in indices
        ],
        "checkout_commit": checkout_commit,
    }


def run_open(
    *,
    agent: Any,
    options: dict[str, Any],
    source: str,
    project: Any = None,
    user: Any = None,
    git: gitutil.GitInfo | None = None,
    git_ref: str = "",
    commit: str = "",
    cli_args: Sequence[str] = (),
    warnings: Sequence[str] = (),
    agent_config_path: str = "",
    prompt_version: dict[str, Any] | None = None,
    regrade_of: Run | None = None,
    uid: uuid.UUID | None = None,
    snapshot: AgentSnapshot | None = None,
    rerun_of: Run | None = None,
) -> Run:
    """Create the Run and one pending row per selected case, in one transaction: everything a
    run is opened with is given here, so nothing patches the run afterwards.

    A dashboard run starts queued (a worker starts it); a CLI run starts running, owned by the
    command's process. ``warnings`` (about its agent.yaml) are shown on the run page;
    ``agent_config_path`` is the path to show when the agent was read from a snapshot's
    unpacked copy; ``regrade_of`` is the run a re-grade grades again; ``snapshot``
    the stored files it runs (``runs.services.snapshots``); ``rerun_of`` the run whose cases a
    re-run runs again (at its snapshot: it is recorded at its git identity).

    ``git``, ``git_ref`` and ``commit`` say where the agent it runs was read: a re-grade's are
    those of the agent.yaml it grades with, recorded apart (``Run.regrade_sources``), while its
    own git identity is its transcripts' (``runs.verdicts.regrades``).
    """
    cases = options["cases"]
    repeats = max(1, int(options.get("repeats") or 1))
    queued = source in (Run.Source.DASHBOARD, Run.Source.REGRADE)  # workers start these
    status = Run.Status.QUEUED if queued else Run.Status.RUNNING
    options = {**options, "warnings": list(warnings)}
    identity = _git_identity(git=git, git_ref=git_ref, commit=commit)
    sources: dict[str, Any] = {}
    if regrade_of is not None:
        options["regrade_of"] = regrade_of.pk  # the case tasks read the original's turns
        sources = regrade_sources(
            original=regrade_of,
            grading=identity,
            agent_path=agent_config_path or str(agent.path),
            snapshot=snapshot,
        ).model_dump(mode="json")
        identity = {field: getattr(regrade_of, field) for field in GIT_FIELDS}
    elif rerun_of is not None:  # it runs the original's files: the original's commit ran
        identity = {field: getattr(rerun_of, field) for field in GIT_FIELDS}
    else:
        identity["git_subject"] = _commit_subject(git, identity["git_commit"])
    if not queued:
        options["owner"] = _me()
    with transaction.atomic():
        run = Run.objects.create(
            **({"uid": uid} if uid is not None else {}),
            project=project,
            source=source,
            status=status,
            started_at=None if status == Run.Status.QUEUED else timezone.now(),
            agent_name=agent.config.name,
            agent_config_path=agent_config_path or str(agent.path),
            **identity,
            prompt_version=prompt_version,
            regrade_of=regrade_of,
            regrade_sources=sources,
            rerun_of=rerun_of,
            snapshot=snapshot,
            config_snapshot=agent.redacted_snapshot(),
            raw_yaml=agent.raw_yaml,
            agent_sources=agent.sources,
            options=options,
            cli_args=list(cli_args),
            created_by=user if getattr(user, "is_authenticated", False) else None,
            # With repeats, a row per repetition of each case: they run, and count, apart.
            total_cases=len(cases) * repeats,
            total_turns=sum(turns for *_, turns in cases) * repeats,
        )
        rows_insert(  # not bulk_create: 4 s of CPU for 17,747 cases (runs/rows.py)
            CaseResult,
            [
                {
                    "index": index,
                    "repetition": repetition,
                    "name": name,
                    "is_multi_turn": multi,
                    "turn_count": turns,
                }
                for index, name, multi, turns in cases
                for repetition in range(repeats)
            ],
            common={"run": run},
        )
        if regrade_of is not None:
            _regrade_carry_unrun(run, regrade_of)
    run_prices_warn(run=run, when="opened")
    return run


def _regrade_carry_unrun(run: Run, original: Run) -> None:
    """A re-grade's cases that its original never ran (cancelled before they started) or that
    produced no result (errored: their worker crashed or gave up) have no whole transcript to
    grade: they are settled at once as the original settled them, so the re-grade reads as its
    original does (the same counts, the same rows in compare) and only the cases with a
    transcript go to the workers."""
    ran = TurnResult.objects.filter(case=OuterRef("pk"))
    same = CaseResult.objects.filter(
        run=original, index=OuterRef("index"), repetition=OuterRef("repetition")
    )
    pending = CaseResult.objects.filter(run=run, status=CaseResult.Status.PENDING)
    now = timezone.now()
    not_started = same.filter(status=CaseResult.Status.CANCELLED).filter(~Exists(ran))
    cancelled = pending.filter(Exists(not_started)).update(
        status=CaseResult.Status.CANCELLED, outcome=Outcome.CANCELLED.value, finished_at=now
    )
    # An errored case produced no result (the turns it may have written are not a whole
    # case): grading them would make a pass of a case that never finished.
    errored_in_original = same.filter(status=CaseResult.Status.ERROR)
    errored = pending.filter(Exists(errored_in_original)).update(
        status=CaseResult.Status.ERROR,
        outcome=Outcome.ERROR.value,
        passed=False,
        errors=Subquery(errored_in_original.values("errors")[:1]),
        finished_at=now,
    )
    if cancelled or errored:
        Run.objects.filter(pk=run.pk).update(
            cases_done=F("cases_done") + cancelled + errored,
            failed_cases=F("failed_cases") + errored,
            pass_rate=_pass_rate_after(0, errored) if errored else F("pass_rate"),
        )


# A re-grade's git identity is its original's (its transcripts'), these fields copied.
GIT_FIELDS = ("git_ref", "git_commit", "git_branch", "git_dirty", "git_subject")


def _git_identity(*, git: gitutil.GitInfo | None, git_ref: str, commit: str) -> dict[str, Any]:
    """The git fields of a run read at ``commit`` (a ref's: its branch is the one holding the
    commit, ``gitutil.branch_of``), else at the working tree ``git`` describes (its branch and
    dirty flag then say what ran)."""
    if git is not None and commit:
        branch = gitutil.branch_of(git.root, commit, ref=git_ref, current=git.branch)
    else:
        branch = git.branch if git else ""
    return {
        "git_ref": git_ref,
        "git_commit": commit or (git.commit if git else ""),
        "git_branch": branch,
        "git_dirty": bool(git and git.dirty and not commit),
    }


def _commit_subject(git: gitutil.GitInfo | None, commit: str) -> str:
    """The subject of the commit a run was read at, shown beside it ("" outside git)."""
    return gitutil.commit_subject(git.root, commit) if git is not None else ""


def regrade_sources(
    *,
    original: Run,
    grading: dict[str, Any],
    agent_path: str,
    snapshot: AgentSnapshot | None,
) -> RegradeSources:
    """The two sources of a re-grade of ``original``: its transcripts (the run that produced
    them: ``original``, or what ``original`` re-graded when it is a re-grade itself) and the
    agent.yaml it grades with (``grading``: the git fields it was read at)."""
    earlier = original.regrade
    if earlier is not None:
        transcripts = earlier.transcripts
    else:
        digest = (
            AgentSnapshot.objects.filter(pk=original.snapshot_id)
            .values_list("digest", flat=True)
            .first()
            if original.snapshot_id is not None
            else None
        )
        transcripts = TranscriptSource(
            run=original.pk,
            commit=original.git_commit,
            branch=original.git_branch,
            snapshot=digest or "",
        )
    return RegradeSources(
        of=original.pk,
        transcripts=transcripts,
        grading=GradingSource(
            ref=grading["git_ref"],
            commit=grading["git_commit"],
            branch=grading["git_branch"],
            dirty=grading["git_dirty"],
            agent_path=agent_path,
            snapshot=snapshot.digest if snapshot is not None else "",
        ),
    )


def run_record(
    *,
    eval_run: wire.EvalRun,
    project: Any = None,
    source_hash: str = "",
    uid: uuid.UUID | None = None,
    warnings: Sequence[str] = (),
) -> Run:
    """Store a finished report (an imported result file) as a finished run: the run, a case
    row per result with its turn and metric rows, in one transaction and a fixed number of
    queries whatever its size.

    The results are the truth: counts, status and summary are the results', whatever the
    file's own summary says (``warnings`` say where it disagreed). ``uid`` is the run the file
    names, kept so that its exports are recognised where it came from.
    """
    report, meta = eval_run.report, eval_run.metadata
    results = report.results
    turns_of = [case_turns(result) for result in results]
    summary = summary_of_results(results)
    status = summary.run_status()
    all_errored = status == Run.Status.ERROR
    usage = [result.token_usage for result in results if result.token_usage]
    when = _parse_time(report.timestamp)
    with transaction.atomic():
        run = Run.objects.create(
            **({"uid": uid} if uid is not None else {}),
            project=project,
            source=Run.Source.IMPORT,
            status=status,
            error="every test case failed to execute" if all_errored else "",
            source_hash=source_hash,
            agent_name=report.agent_name,
            agent_config_path=report.agent_config_path,
            git_commit=meta.git_commit or "",
            git_subject=commit_subject(eval_run),  # our exports carry it; HoloDeck's do not
            prompt_version=meta.prompt_version,
            config_snapshot=meta.agent_config,
            holodeck_version=report.holodeck_version,
            environment=report.environment,
            options={"warnings": list(warnings)} if warnings else {},
            cli_args=meta.cli_args,
            report_timestamp=report.timestamp,
            started_at=when,
            finished_at=when,
            created_at=when or timezone.now(),
            total_cases=len(results),
            total_turns=sum(len(turns) for turns in turns_of),
            turns_done=sum(len(turns) for turns in turns_of),
            **run_counters(summary),
            duration_ms=report.summary.total_duration_ms,
            prompt_tokens=sum(u.prompt_tokens for u in usage),
            completion_tokens=sum(u.completion_tokens for u in usage),
            total_tokens=sum(u.total_tokens for u in usage),
            summary=summary.model_dump(mode="json"),
        )
        _cases_record(run, results, turns_of)
    return run


def _cases_record(
    run: Run, results: Sequence[wire.TestResult], turns_of: Sequence[Sequence[wire.TurnResult]]
) -> None:
    """The finished case rows of a recorded report, then their turn and metric rows."""
    cases = CaseResult.objects.bulk_create(
        [
            CaseResult(
                run=run,
                index=index,
                name=result.test_name or "",
                status=CaseResult.Status.DONE,
                enqueued=True,
                is_multi_turn=result.turns is not None,
                finished_at=run.finished_at,
                **case_values(result, turns),
            )
            for index, (result, turns) in enumerate(zip(results, turns_of, strict=True))
        ]
    )
    if not all(case.pk for case in cases):  # a backend without RETURNING on bulk insert
        by_index = {c.index: c for c in CaseResult.objects.filter(run=run)}
        cases = [by_index[case.index] for case in cases]
    turn_rows_insert(
        [
            rows
            for case, turns in zip(cases, turns_of, strict=True)
            for rows in turn_rows(run_id=run.pk, case=case, turns=turns)
        ]
    )


def _parse_time(value: str) -> datetime | None:
    """A report's timestamp as an aware datetime (UTC when it names no zone); None when it is
    not one."""
    try:
        parsed = parse_datetime(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed is not None and timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, UTC)
    return parsed


# --- one attempt at a case --------------------------------------------------------------------


def case_claim(case: CaseResult, *, take_over: bool = False, unqueued: bool = False) -> int | None:
    """Take the case for a new attempt by this process; None when it is not to run (another
    attempt has it, or it was given up after MAX_CASE_ATTEMPTS).

    A running case is taken only with ``take_over`` (its owner is dead: the caller checked);
    its partial turn rows are removed, and it runs again from its first turn. ``unqueued``: a
    pending case nobody queued yet, taken by a task that finished another case of its run
    (``runs.services.execution``): it is marked queued by the same UPDATE, which fails when a
    pump queued it meanwhile.
    """
    if case.status == CaseResult.Status.RUNNING and not take_over:
        return None
    attempt = case.attempts + 1
    now = timezone.now()
    owned = CaseResult.objects.filter(pk=case.pk, status=case.status, attempts=case.attempts)
    queued: dict[str, Any] = {}
    if unqueued:
        owned = owned.filter(enqueued=False)
        queued = {"enqueued": True, "enqueued_at": now}
    claimed = owned.update(
        status=CaseResult.Status.RUNNING,
        attempts=attempt,
        started_at=now,
        heartbeat_at=now,
        claimed_by=_me(),
        **queued,
    )
    if not claimed:
        return None
    if case.status == CaseResult.Status.RUNNING:  # its worker died mid-case
        _case_reset(case)
    if attempt > MAX_CASE_ATTEMPTS:
        case_fail(
            case,
            attempt,
            f"gave up after {MAX_CASE_ATTEMPTS} attempts (the worker running it stopped each time)",
        )
        return None
    return attempt


def case_owned(case: CaseResult, attempt: int) -> QuerySet[CaseResult]:
    return CaseResult.objects.filter(pk=case.pk, attempts=attempt, status=CaseResult.Status.RUNNING)


def case_heartbeat(case: CaseResult, attempt: int) -> bool:
    """Stamp the attempt's heartbeat; False when it does not own the case any more."""
    return bool(case_owned(case, attempt).update(heartbeat_at=timezone.now()))


def turns_append(case: CaseResult, attempt: int, turns: Sequence[wire.TurnResult]) -> bool:
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
    case: CaseResult,
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
            status=CaseResult.Status.CANCELLED if cancelled else CaseResult.Status.DONE,
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
    """The run's live counters once a case with ``outcome`` is settled (for one UPDATE):
    passed, failed (failed or errored) or not graded; cancelled counts as done only."""
    passed = int(outcome == Outcome.PASSED)
    failed = int(outcome in (Outcome.FAILED, Outcome.ERROR))
    not_graded = int(outcome == Outcome.NOT_GRADED)
    return {
        "cases_done": F("cases_done") + 1,
        "passed_cases": F("passed_cases") + passed,
        "failed_cases": F("failed_cases") + failed,
        "not_graded_cases": F("not_graded_cases") + not_graded,
        "pass_rate": _pass_rate_after(passed, failed),
    }


def case_fail(case: CaseResult, attempt: int, error: str) -> None:
    """The attempt produced no result (it crashed, or was given up): an errored case."""
    _case_settle_without_result(case, attempt, Outcome.ERROR, error)


def case_not_graded(case: CaseResult, attempt: int, reason: str) -> None:
    """The attempt has nothing to grade (a re-grade of a case that never ran): not graded,
    with the reason, not an error."""
    _case_settle_without_result(case, attempt, Outcome.NOT_GRADED, reason)


def _case_settle_without_result(
    case: CaseResult, attempt: int, outcome: Outcome, error: str
) -> None:
    """Settle the attempt's case with ``outcome`` and ``error`` alone, counted in its run."""
    errored = outcome == Outcome.ERROR
    with transaction.atomic():
        if case_owned(case, attempt).update(
            status=CaseResult.Status.ERROR if errored else CaseResult.Status.DONE,
            passed=False if errored else None,
            outcome=outcome.value,
            errors=[error],
            finished_at=timezone.now(),
        ):
            Run.objects.filter(pk=case.run_id).update(**_counted(outcome))


def _pass_rate_after(passed: int, failed: int) -> Round:
    """The live pass rate once ``passed``/``failed`` more cases are counted: passed over graded
    cases (passed, failed, errored; not graded and cancelled left out), in % with two decimals,
    NULL while none is graded (``runs.verdicts.numbers.pass_rate_of`` in SQL). For the same
    UPDATE that counts them: the columns on the right of an UPDATE are the values before it."""
    settled = F("passed_cases") + F("failed_cases") + (passed + failed)
    return Round(
        (F("passed_cases") + passed) * 100.0 / NullIf(settled, 0),
        2,
        output_field=FloatField(),
    )


def case_cancel(case: CaseResult, *, running: bool = False) -> bool:
    """A case of a cancelled run that never started; ``running``: one that was running when its
    attempt died (it will never stop by itself), cancelled with the turns it wrote kept. False
    when the case was no longer in that state."""
    state = CaseResult.Status.RUNNING if running else CaseResult.Status.PENDING
    with transaction.atomic():
        cancelled = CaseResult.objects.filter(pk=case.pk, status=state).update(
            status=CaseResult.Status.CANCELLED,
            outcome=Outcome.CANCELLED.value,
            finished_at=timezone.now(),
        )
        if cancelled:
            Run.objects.filter(pk=case.run_id).update(cases_done=F("cases_done") + 1)
    return bool(cancelled)


def cases_cancel_pending(run: Run) -> int:
    pending = CaseResult.objects.filter(run=run, status=CaseResult.Status.PENDING)
    count = pending.update(
        status=CaseResult.Status.CANCELLED,
        outcome=Outcome.CANCELLED.value,
        finished_at=timezone.now(),
    )
    Run.objects.filter(pk=run.pk).update(cases_done=F("cases_done") + count)
    return count


def cases_fail_open(run: Run, error: str) -> int:
    """Settle every case of the run not yet settled (pending or running) as an errored case:
    the process that was to run them is gone. The run's counters are recomputed when it ends
    (``run_abort``, ``run_finish``)."""
    return CaseResult.objects.filter(
        run=run, status__in=[CaseResult.Status.PENDING, CaseResult.Status.RUNNING]
    ).update(
        status=CaseResult.Status.ERROR,
        passed=False,
        outcome=Outcome.ERROR.value,
        errors=[error],
        finished_at=timezone.now(),
    )


def _case_reset(case: CaseResult) -> None:
    """Remove a dead attempt's partial turn rows (and their metrics) before running again."""
    with transaction.atomic():
        _, removed = TurnResult.objects.filter(case=case).delete()
        Run.objects.filter(pk=case.run_id).update(
            turns_done=F("turns_done") - _count(removed, TurnResult)
        )


def turn_rows_insert(rows_of_turns: Sequence[TurnRows]) -> None:
    """Insert turn rows, their metric rows and their transcripts (bulk: a fixed number of
    queries)."""
    if not rows_of_turns:
        return
    rows = TurnResult.objects.bulk_create([rows.turn for rows in rows_of_turns], batch_size=500)
    if not all(row.pk for row in rows):  # a backend without RETURNING on bulk insert
        saved = TurnResult.objects.filter(case_id__in={row.case_id for row in rows})
        by_key = {(t.case_id, t.index): t for t in saved}
        rows = [by_key[(row.case_id, row.index)] for row in rows]
    metrics, transcripts = [], []
    for row, unsaved in zip(rows, rows_of_turns, strict=True):
        for metric in unsaved.metrics:
            metric.turn = row
            metrics.append(metric)
        if unsaved.transcript is not None:
            unsaved.transcript.turn = row
            transcripts.append(unsaved.transcript)
    MetricResult.objects.bulk_create(metrics, batch_size=1000)
    TurnTranscript.objects.bulk_create(transcripts, batch_size=200)


def _count(removed: dict[str, int] | int, model: type[TurnResult]) -> int:
    if isinstance(removed, int):
        return removed
    return removed.get(model._meta.label, 0)


def _me() -> str:
    return process_identity()


# --- engine events -> writes ------------------------------------------------------------------


CaseKey = tuple[int, int]  # (case index, repetition)


class CaseRecorder:
    """The engine's event callback for cases this process runs.

    ``per_turn`` (the dashboard's task): each finished turn is written while its case runs
    (``turns_append``), within ``write_within`` seconds of finishing; the turns of a case that
    finish closer together than that are written together, and those still unwritten when the
    case finishes are written with its result. So a case of fast turns is one transaction,
    while a slow turn is visible a fraction of a second after it finished (the run page polls
    every second), and a worker that dies loses no more than a case it runs again anyway. Each
    write also tells whether the run was cancelled (``watch_cancel``: then ``is_cancelled``
    says so). Otherwise (the CLI) a case's turns are written with its result.
    """

    def __init__(
        self,
        *,
        per_turn: bool,
        watch_cancel: bool = False,
        claim_in: Run | None = None,
        write_within: float = 0.0,
    ) -> None:
        self.per_turn = per_turn
        self.claim_in = claim_in  # claim each case of this run as the engine starts it (CLI)
        self.watch_cancel = watch_cancel
        self.write_within = write_within
        self.cancelled = False
        # Keyed by (case index, repetition): a case's repetitions are rows of their own.
        self.attempts: dict[CaseKey, tuple[CaseResult, int]] = {}  # -> (row, attempt)
        self.finished: dict[CaseKey, bool] = {}  # -> settled by this attempt
        # Per case: its finished turns not written yet, the timer that will write them, the
        # write under way, and what a write in the background raised (for the case).
        self.unwritten: dict[CaseKey, list[wire.TurnResult]] = {}
        self.timers: dict[CaseKey, asyncio.TimerHandle] = {}
        self.writes: dict[CaseKey, asyncio.Task[None]] = {}
        self.failures: dict[CaseKey, Exception] = {}

    def track(self, case: CaseResult, attempt: int) -> None:
        self.attempts[(case.index, case.repetition)] = (case, attempt)

    async def __call__(self, event: Any) -> None:
        index = (event.case_index, event.repetition)
        if event.kind == "case_started" and self.claim_in is not None:
            await _async(self._claim)(index)
        owned = self.attempts.get(index)
        if owned is None:
            return
        self._raise_failure(index)
        case, attempt = owned
        if event.kind == "turn_finished" and event.turn is not None and self.per_turn:
            self.unwritten.setdefault(index, []).append(event.turn)
            if self.write_within > 0:
                self._write_later(index)
            else:
                await self._write(index)
        elif event.kind == "case_finished" and event.result is not None:
            await self._writes_stop(index)
            unwritten = self.unwritten.pop(index, []) if self.per_turn else list(event.turns)
            self.finished[index] = await _async(case_finish)(
                case,
                attempt,
                event.result,
                event.turns,
                cancelled=self.cancelled,
                unwritten=unwritten,
            )

    def is_cancelled(self) -> bool:
        return self.cancelled

    async def flush(self) -> None:
        """Write the finished turns of every case not written yet (the engine stopped before
        their cases finished: it crashed on them)."""
        for index in list(self.attempts):
            await self._writes_stop(index)
            if self.unwritten.get(index):
                await self._write(index)

    def unsettled(self) -> list[tuple[CaseResult, int]]:
        """Cases claimed here that the engine never finished (it crashed on them)."""
        return [owned for index, owned in self.attempts.items() if index not in self.finished]

    def _claim(self, key: CaseKey) -> None:
        assert self.claim_in is not None
        case = CaseResult.objects.get(run=self.claim_in, index=key[0], repetition=key[1])
        attempt = case_claim(case)
        if attempt is not None:
            self.track(case, attempt)

    async def _write(self, index: CaseKey) -> None:
        """Write the case's finished turns not written yet."""
        turns = self.unwritten.pop(index, [])
        if not turns:
            return
        case, attempt = self.attempts[index]
        cancelled = await _async(turns_append)(case, attempt, turns)
        if self.watch_cancel:
            self.cancelled = self.cancelled or cancelled

    def _write_later(self, index: CaseKey) -> None:
        """Have the case's unwritten turns written ``write_within`` seconds from now, unless a
        write is due or under way (a write under way arranges the next one when it ends)."""
        if index in self.timers or index in self.writes:
            return
        loop = asyncio.get_running_loop()
        self.timers[index] = loop.call_later(self.write_within, self._write_start, index)

    def _write_start(self, index: CaseKey) -> None:
        del self.timers[index]
        self.writes[index] = asyncio.ensure_future(self._write_in_background(index))

    async def _write_in_background(self, index: CaseKey) -> None:
        try:
            await self._write(index)
        except Exception as exc:  # the case's next event raises it (CaseSuperseded, ...)
            self.failures[index] = exc
        finally:
            del self.writes[index]
        if index not in self.failures and self.unwritten.get(index):
            self._write_later(index)  # turns that finished during the write

    async def _writes_stop(self, index: CaseKey) -> None:
        """No write of the case's turns due or under way once this returns: a due one is
        called off (the caller writes its turns), one under way is waited for."""
        while True:
            timer = self.timers.pop(index, None)
            if timer is not None:
                timer.cancel()
            write = self.writes.get(index)
            if write is None:
                break
            await asyncio.wait([write])
        self._raise_failure(index)

    def _raise_failure(self, index: CaseKey) -> None:
        failure = self.failures.pop(index, None)
        if failure is not None:
            raise failure


def _run_cancelled(run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, status=Run.Status.CANCELLED).exists()


def _async(fn: Any) -> Any:
    return sync_to_async(fn, thread_sensitive=True)


def close_thread_connection() -> None:
    """Close the database connection of the thread this runs in (the recorder's thread keeps
    one of its own; a long-lived worker must not leak it)."""
    connection.close()


# --- the end of a run -------------------------------------------------------------------------


def run_settle(run: Run) -> bool:
    """Finish the run once no case is pending or running (True when it did)."""
    open_cases = CaseResult.objects.filter(
        run=run, status__in=[CaseResult.Status.PENDING, CaseResult.Status.RUNNING]
    ).exists()
    if open_cases:
        return False
    run_finish(run.pk)
    return True


def run_finish(run_id: int, *, source_hash: str = "") -> None:
    """Compute the summary from the rows and end the run (once: a conditional UPDATE).

    The live counters are recomputed from the rows here, so they end exact whatever happened
    on the way (redeliveries, recovered cases, cancellation). ``source_hash``: the hash of the
    result file the run ends with (run_agent's), so importing that file finds the run.
    """
    run = Run.objects.get(pk=run_id)
    summary = summary_of_rows(run.pk)
    duration = int((timezone.now() - (run.started_at or run.created_at)).total_seconds() * 1000)
    fields = {
        **run_counters(summary),
        "turns_done": TurnResult.objects.filter(run=run).count(),
        "duration_ms": duration,
        "summary": summary.model_dump(mode="json"),
        "report_timestamp": timezone.now().isoformat(),
        **({"source_hash": source_hash} if source_hash else {}),
    }
    status = summary.run_status()
    if status == Run.Status.ERROR:
        ended = run.fail("every test case failed to execute", **fields)
    elif status == Run.Status.CANCELLED:  # a re-grade of a cancelled run (a cancelled run is so)
        ended = run.cancel(**fields)
    else:
        ended = run.finish(passed=status == Run.Status.PASSED, **fields)
    if not ended:
        # Cancelled (or already finished): keep the status but store the summary.
        Run.objects.filter(pk=run.pk).update(**fields)
    run_prices_warn(run=run, when="finished")


def run_counters(summary: RunSummary) -> dict[str, Any]:
    """The run's counter columns from its summary."""
    cases = summary.cases
    return {
        "cases_done": cases.total - cases.pending,
        "passed_cases": cases.passed,
        "failed_cases": cases.failed + cases.error,
        "not_graded_cases": cases.not_graded,
        "pass_rate": summary.pass_rate,
    }


def run_abort(run: Run, error: str) -> bool:
    """End a run that cannot go on (its command died, it could not start) as an error, with the
    summary of what it did write."""
    summary = summary_of_rows(run.pk)
    return run.fail(error, **run_counters(summary), summary=summary.model_dump(mode="json"))
