"""Conversions between the wire models (runs.report) and the database rows, and whole-report
writes: CLI runs and HoloDeck history import (`run_record_report`, `runs_import`) and export
(`run_eval_run`). Bulk inserts and a fixed number of queries whatever a run's size.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from runs import gitutil
from runs.models import AgentProject, CaseResult, MetricResult, Run, TurnResult
from runs.report import models as wire


def turn_fields(turn: wire.TurnResult) -> dict[str, Any]:
    return {
        "index": turn.turn_index,
        "input": turn.input,
        "response": turn.response,
        "ground_truth": turn.ground_truth,
        "expected_tools": turn.expected_tools,
        "tool_calls": turn.tool_calls,
        "tool_invocations": [call.model_dump(mode="json") for call in turn.tool_invocations],
        "tools_matched": turn.tools_matched,
        "arg_match_details": turn.arg_match_details,
        "passed": turn.passed,
        "skipped": turn.skipped,
        "execution_time_ms": turn.execution_time_ms,
        "token_usage": turn.token_usage.model_dump() if turn.token_usage else None,
        "errors": turn.errors,
        "grader_details": turn.grader_details,
    }


def metric_rows(
    run_id: int, turn: TurnResult, metrics: Iterable[wire.MetricResult]
) -> list[MetricResult]:
    return [
        MetricResult(
            run_id=run_id,
            turn=turn,
            position=position,
            metric_name=metric.metric_name,
            kind=metric.kind,
            score=metric.score,
            threshold=metric.threshold,
            passed=metric.passed,
            scale="" if metric.scale is None else str(metric.scale),
            error=metric.error,
            retry_count=metric.retry_count,
            evaluation_time_ms=metric.evaluation_time_ms,
            model_used=metric.model_used,
            reasoning=metric.reasoning,
            judge_usage=metric.judge_usage.model_dump() if metric.judge_usage else None,
            judge_cost_usd=metric.judge_cost_usd,
        )
        for position, metric in enumerate(metrics)
    ]


def case_fields(result: wire.TestResult) -> dict[str, Any]:
    return {
        "test_input": result.test_input,
        "agent_response": result.agent_response,
        "ground_truth": result.ground_truth,
        "expected_tools": result.expected_tools,
        "tool_calls": result.tool_calls,
        "tools_matched": result.tools_matched,
        "metric_results": [m.model_dump(mode="json") for m in result.metric_results],
        "processed_files": [f.model_dump(mode="json") for f in result.processed_files],
        "errors": result.errors,
        "execution_time_ms": result.execution_time_ms,
        "token_usage": result.token_usage.model_dump() if result.token_usage else None,
        "timestamp": result.timestamp,
        "passed": result.passed,
    }


def case_wire(case: CaseResult) -> wire.TestResult:
    return wire.TestResult(
        test_name=case.name or None,
        test_input=case.test_input,
        agent_response=case.agent_response,
        tool_calls=case.tool_calls,
        expected_tools=case.expected_tools,
        tools_matched=case.tools_matched,
        metric_results=[wire.MetricResult.model_validate(m) for m in case.metric_results],
        ground_truth=case.ground_truth,
        passed=bool(case.passed),
        execution_time_ms=case.execution_time_ms,
        errors=case.errors,
        timestamp=case.timestamp or timezone.now().isoformat(),
        token_usage=wire.TokenUsage.model_validate(case.token_usage) if case.token_usage else None,
    )


def metric_summary(results: Iterable[wire.TestResult]) -> list[dict[str, Any]]:
    """Per metric (over case roll-ups): kind, average score, count, passed count, errors."""
    table: dict[str, dict[str, Any]] = {}
    for result in results:
        for metric in result.metric_results:
            row = table.setdefault(
                metric.metric_name,
                {
                    "name": metric.metric_name,
                    "kind": metric.kind,
                    "scores": [],
                    "count": 0,
                    "passed": 0,
                    "errors": 0,
                },
            )
            row["count"] += 1
            row["passed"] += int(metric.passed)
            row["errors"] += int(metric.error is not None)
            if metric.score is not None:
                row["scores"].append(metric.score)
    out = []
    for row in table.values():
        scores = row.pop("scores")
        row["average"] = round(sum(scores) / len(scores), 4) if scores else None
        out.append(row)
    return sorted(out, key=lambda row: (row["kind"], row["name"]))


# --- recording whole reports (CLI runs and HoloDeck history import) -----------------------------


def run_record_report(
    eval_run: wire.EvalRun,
    *,
    source: str,
    project: AgentProject | None = None,
    raw_yaml: str = "",
    git: gitutil.GitInfo | None = None,
    options: dict[str, Any] | None = None,
) -> Run:
    """Store a finished report as a Run with its case, turn and metric rows (bulk inserts)."""
    report, meta = eval_run.report, eval_run.metadata
    summary = report.summary
    results = report.results
    status = Run.Status.PASSED if summary.failed == 0 else Run.Status.FAILED
    turn_total = sum(len(r.turns) if r.turns else 1 for r in results)
    usage = [r.token_usage for r in results if r.token_usage]
    with transaction.atomic():
        run = Run.objects.create(
            project=project,
            source=source,
            status=status,
            agent_name=report.agent_name,
            agent_config_path=report.agent_config_path,
            git_commit=(git.commit if git else meta.git_commit) or "",
            git_branch=git.branch if git else "",
            git_dirty=git.dirty if git else False,
            prompt_version=meta.prompt_version,
            config_snapshot=meta.agent_config,
            raw_yaml=raw_yaml,
            options=options or {},
            holodeck_version=report.holodeck_version,
            environment=report.environment,
            cli_args=meta.cli_args,
            report_timestamp=report.timestamp,
            started_at=_parse_time(report.timestamp),
            finished_at=_parse_time(report.timestamp),
            created_at=_parse_time(report.timestamp) or timezone.now(),
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
        _record_cases(run, results)
    return run


def _record_cases(run: Run, results: list[wire.TestResult]) -> None:
    cases = CaseResult.objects.bulk_create(
        [
            CaseResult(
                run=run,
                index=index,
                name=result.test_name or "",
                status=CaseResult.Status.DONE,
                enqueued=True,
                is_multi_turn=result.turns is not None,
                turn_count=len(result.turns) if result.turns else 1,
                turns_passed=sum(t.passed for t in result.turns)
                if result.turns
                else int(result.passed),
                **case_fields(result),
            )
            for index, result in enumerate(results)
        ]
    )
    turn_rows: list[TurnResult] = []
    metric_sources: list[list[wire.MetricResult]] = []
    for case, result in zip(cases, results, strict=True):
        for turn in result.turns or [legacy_turn(result)]:
            turn_rows.append(TurnResult(run=run, case=case, **turn_fields(turn)))
            metric_sources.append(turn.metric_results)
    TurnResult.objects.bulk_create(turn_rows, batch_size=500)
    if not all(row.pk for row in turn_rows):  # backends without RETURNING on bulk insert
        by_key = {(t.case_id, t.index): t for t in TurnResult.objects.filter(run=run)}
        turn_rows = [by_key[(t.case_id, t.index)] for t in turn_rows]
    metrics = [
        metric
        for row, source in zip(turn_rows, metric_sources, strict=True)
        for metric in metric_rows(run.pk, row, source)
    ]
    MetricResult.objects.bulk_create(metrics, batch_size=1000)


def legacy_turn(result: wire.TestResult) -> wire.TurnResult:
    """A single-turn (legacy) case seen as its one turn, so every case has turn rows."""
    return wire.TurnResult(
        turn_index=0,
        input=result.test_input,
        response=result.agent_response,
        ground_truth=result.ground_truth,
        expected_tools=result.expected_tools,
        tool_calls=result.tool_calls,
        tool_invocations=result.tool_invocations,
        tools_matched=result.tools_matched,
        metric_results=result.metric_results,
        passed=result.passed,
        execution_time_ms=result.execution_time_ms,
        token_usage=result.token_usage,
        errors=result.errors,
    )


def _parse_time(value: str) -> Any:
    from django.utils.dateparse import parse_datetime

    try:
        parsed = parse_datetime(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed is not None and timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, UTC)
    return parsed


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
            existing = Run.objects.filter(source_hash=digest).first()
            if existing is not None:
                outcome.already_imported.append(existing)
                continue
            run = run_record_report(eval_run, source=Run.Source.IMPORT, project=project)
            Run.objects.filter(pk=run.pk).update(source_hash=digest)
            outcome.imported.append(run)
    return outcome


def eval_run_hash(eval_run: wire.EvalRun) -> str:
    canonical = json.dumps(eval_run.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


# --- export -------------------------------------------------------------------------------------


def run_eval_run(run: Run) -> wire.EvalRun:
    """The run as a HoloDeck-compatible EvalRun (`{report, metadata}`), rebuilt from its rows.

    Three queries whatever the run's size: cases, turns, metrics.
    """
    from runs.report.build import summarize

    cases = list(CaseResult.objects.filter(run=run).order_by("index"))
    turns_by_case: dict[int, list[wire.TurnResult]] = {}
    metrics_by_turn: dict[int, list[wire.MetricResult]] = {}
    for metric in MetricResult.objects.filter(run=run).order_by("turn_id", "position"):
        metrics_by_turn.setdefault(metric.turn_id, []).append(metric_wire(metric))
    for turn in TurnResult.objects.filter(run=run).order_by("case_id", "index"):
        turns_by_case.setdefault(turn.case_id, []).append(
            turn_wire(turn, metrics_by_turn.get(turn.pk, []))
        )
    results = []
    for case in cases:
        if case.status not in (CaseResult.Status.DONE, CaseResult.Status.ERROR):
            continue
        result = case_wire(case)
        if case.is_multi_turn:
            result = result.model_copy(update={"turns": turns_by_case.get(case.pk, [])})
        results.append(result)
    summary = summarize(results, run.duration_ms or 0)
    report = wire.TestReport(
        agent_name=run.agent_name,
        agent_config_path=run.agent_config_path,
        results=results,
        summary=summary,
        timestamp=run.report_timestamp or run.created_at.isoformat(),
        holodeck_version=run.holodeck_version or "holodeck-web 0.1.0",
        environment=run.environment,
    )
    metadata = wire.EvalRunMetadata(
        agent_config=run.config_snapshot,
        prompt_version=run.prompt_version,
        holodeck_version=report.holodeck_version,
        cli_args=run.cli_args,
        git_commit=run.git_commit or None,
    )
    return wire.EvalRun(report=report, metadata=metadata)


def metric_wire(metric: MetricResult) -> wire.MetricResult:
    scale: int | str | None = metric.scale or None
    if isinstance(scale, str) and scale.isdigit():
        scale = int(scale)
    return wire.MetricResult(
        metric_name=metric.metric_name,
        kind=metric.kind,  # type: ignore[arg-type]  # stored from a MetricKind
        score=metric.score,
        threshold=metric.threshold,
        passed=metric.passed,
        scale=scale,
        error=metric.error,
        retry_count=metric.retry_count,
        evaluation_time_ms=metric.evaluation_time_ms,
        model_used=metric.model_used,
        reasoning=metric.reasoning,
        judge_usage=wire.TokenUsage.model_validate(metric.judge_usage)
        if metric.judge_usage
        else None,
        judge_cost_usd=metric.judge_cost_usd,
    )


def turn_wire(turn: TurnResult, metrics: list[wire.MetricResult]) -> wire.TurnResult:
    return wire.TurnResult(
        turn_index=turn.index,
        input=turn.input,
        response=turn.response,
        ground_truth=turn.ground_truth,
        expected_tools=turn.expected_tools,
        tool_calls=turn.tool_calls,
        tool_invocations=[wire.ToolInvocation.model_validate(i) for i in turn.tool_invocations],
        tools_matched=turn.tools_matched,
        arg_match_details=turn.arg_match_details,
        metric_results=metrics,
        passed=turn.passed,
        execution_time_ms=turn.execution_time_ms,
        token_usage=wire.TokenUsage.model_validate(turn.token_usage) if turn.token_usage else None,
        errors=turn.errors,
        skipped=turn.skipped,
        grader_details=turn.grader_details,
    )
