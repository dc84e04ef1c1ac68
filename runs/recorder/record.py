"""A finished report (a HoloDeck file being imported) written whole, with the mapping the
workers' writes use (``runs.mapping``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from runs.core.runoptions import RunOptions
from runs.core.wire import models as wire
from runs.core.wire.build import summary_of_results
from runs.core.wire.round_trip import commit_subject
from runs.mapping import case_turns, case_values, turn_rows
from runs.models import CaseRow, Run
from runs.recorder.cases import turn_rows_insert
from runs.recorder.finish import list_counts_store, run_counters


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
    report = eval_run.report
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
            **_report_fields(eval_run),
            **_import_options(warnings).fields(),
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
        run.list_counts = list_counts_store(run)
        run.save(update_fields=["list_counts"])
    return run


def _report_fields(eval_run: wire.EvalRun) -> dict[str, Any]:
    """The run's columns that a result file says as it is: its agent, commit and environment."""
    report, meta = eval_run.report, eval_run.metadata
    return {
        "agent_name": report.agent_name,
        "agent_config_path": report.agent_config_path,
        "git_commit": meta.git_commit or "",
        "git_subject": commit_subject(eval_run),  # our exports carry it; HoloDeck's do not
        "prompt_version": meta.prompt_version,
        "config_snapshot": meta.agent_config,
        "holodeck_version": report.holodeck_version,
        "environment": report.environment,
        "cli_args": meta.cli_args,
        "report_timestamp": report.timestamp,
    }


def _import_options(warnings: Sequence[str]) -> RunOptions:
    """An import's options: no launch options, only the warnings about its file, if any."""
    return RunOptions(warnings=list(warnings)) if warnings else RunOptions()


def _cases_record(
    run: Run, results: Sequence[wire.TestResult], turns_of: Sequence[Sequence[wire.TurnResult]]
) -> None:
    """The finished case rows of a recorded report, then their turn and metric rows."""
    cases = CaseRow.objects.bulk_create(
        [
            CaseRow(
                run=run,
                index=index,
                name=result.test_name or "",
                status=CaseRow.Status.DONE,
                enqueued=True,
                is_multi_turn=result.turns is not None,
                finished_at=run.finished_at,
                **case_values(result, turns),
            )
            for index, (result, turns) in enumerate(zip(results, turns_of, strict=True))
        ]
    )
    if not all(case.pk for case in cases):  # a backend without RETURNING on bulk insert
        by_index = {c.index: c for c in CaseRow.objects.filter(run=run)}
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
