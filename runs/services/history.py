"""Import HoloDeck history: result files become finished runs (bulk inserts, a fixed number of
queries whatever a run's size). Wire -> rows goes through ``runs.mapping`` like every write."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from runs.mapping import case_turns, case_values, turn_rows
from runs.models import AgentProject, CaseResult, Run
from runs.recorder import metric_summary, turn_rows_insert
from runs.report import models as wire


@dataclass
class ImportOutcome:
    imported: list[Run] = field(default_factory=list)
    already_imported: list[Run] = field(default_factory=list)


def runs_import(paths: Iterable[Path], *, project: AgentProject | None = None) -> ImportOutcome:
    """Import HoloDeck result files (a file, a list of EvalRuns, or a results/ directory).

    A result already imported (same content) is not imported again.
    """
    from runs.report.holodeck_io import load_eval_runs

    outcome = ImportOutcome()
    for path in paths:
        for eval_run in load_eval_runs(path):
            digest = eval_run_hash(eval_run)
            existing = _imported(digest)
            if existing is None:
                try:
                    run = run_import(eval_run=eval_run, project=project, source_hash=digest)
                except IntegrityError:  # a concurrent import of the same file won the race
                    existing = _imported(digest)
                    if existing is None:
                        raise
                else:
                    outcome.imported.append(run)
                    continue
            outcome.already_imported.append(existing)
    return outcome


def _imported(digest: str) -> Run | None:
    """The run already holding this result (imported, or stored by run_agent as it wrote it)."""
    return Run.objects.filter(source_hash=digest).order_by("pk").first()


def eval_run_hash(eval_run: wire.EvalRun) -> str:
    canonical = json.dumps(eval_run.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def run_import(
    *, eval_run: wire.EvalRun, project: AgentProject | None = None, source_hash: str = ""
) -> Run:
    """Store a finished HoloDeck report as a Run with its case, turn and metric rows.

    The report's own summary is kept as it is (HoloDeck rounds its pass rate its own way).
    """
    report, meta = eval_run.report, eval_run.metadata
    summary = report.summary
    results = report.results
    turn_total = sum(len(r.turns) if r.turns else 1 for r in results)
    usage = [r.token_usage for r in results if r.token_usage]
    when = _parse_time(report.timestamp)
    with transaction.atomic():
        run = Run.objects.create(
            project=project,
            source=Run.Source.IMPORT,
            status=Run.Status.PASSED if summary.failed == 0 else Run.Status.FAILED,
            source_hash=source_hash,
            agent_name=report.agent_name,
            agent_config_path=report.agent_config_path,
            git_commit=meta.git_commit or "",
            prompt_version=meta.prompt_version,
            config_snapshot=meta.agent_config,
            holodeck_version=report.holodeck_version,
            environment=report.environment,
            cli_args=meta.cli_args,
            report_timestamp=report.timestamp,
            started_at=when,
            finished_at=when,
            created_at=when or timezone.now(),
            total_cases=summary.total_tests,
            cases_done=summary.total_tests,
            total_turns=turn_total,
            turns_done=turn_total,
            passed_cases=summary.passed,
            failed_cases=summary.failed,
            pass_rate=summary.pass_rate,
            duration_ms=summary.total_duration_ms,
            prompt_tokens=sum(u.prompt_tokens for u in usage),
            completion_tokens=sum(u.completion_tokens for u in usage),
            total_tokens=sum(u.total_tokens for u in usage),
            summary=summary.model_dump(include={"metrics_evaluated", "average_scores"}),
            metric_summary=metric_summary(results),
        )
        _cases_import(run, results)
    return run


def _cases_import(run: Run, results: list[wire.TestResult]) -> None:
    turns_of = [case_turns(result) for result in results]
    cases = CaseResult.objects.bulk_create(
        [
            CaseResult(
                run=run,
                index=index,
                name=result.test_name or "",
                status=CaseResult.Status.DONE,
                enqueued=True,
                is_multi_turn=result.turns is not None,
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
            pair
            for case, turns in zip(cases, turns_of, strict=True)
            for pair in turn_rows(run_id=run.pk, case=case, turns=turns)
        ]
    )


def _parse_time(value: str) -> Any:
    try:
        parsed = parse_datetime(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed is not None and timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, UTC)
    return parsed
