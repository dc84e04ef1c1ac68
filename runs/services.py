"""Writes and orchestration: register projects, create / start / execute / finish runs, import
and record reports. Celery tasks and views call these; they hold no business logic themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Iterator
from datetime import UTC, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from runs import gitutil
from runs.models import AgentProject, CaseResult, MetricResult, Run, TurnResult
from runs.report import models as wire
from runs.spec.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    from runs.spec.loader import LoadedAgent

log = logging.getLogger(__name__)


class LaunchError(Exception):
    """A run cannot be launched (bad git ref, no matching case, ...); nothing was queued."""


# --- projects -------------------------------------------------------------------------------


def project_register(*, agent_path: Path, name: str | None = None) -> AgentProject:
    """Register (or update) the project whose agent.yaml is ``agent_path``."""
    from runs.spec.loader import load_agent

    agent_path = agent_path.resolve()
    if not agent_path.is_file():
        raise LaunchError(f"{agent_path} does not exist")
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
        if not needle or needle in (case.name or f"#{index}").lower()
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
            raise LaunchError(str(exc)) from exc
    try:
        with gitutil.checkout(directory, commit or None) as agent_dir:
            agent = load_agent(agent_dir / project.agent_file, parallel_override=parallel)
    except gitutil.GitError as exc:
        raise LaunchError(f"could not check out {git_ref}: {exc}") from exc
    except FileNotFoundError as exc:
        raise ConfigError([ConfigProblem(project.agent_file, None, None, "", str(exc))]) from exc
    indices = select_cases(agent.config.test_cases, case_filter=case_filter, limit=limit)
    if not indices:
        raise LaunchError(f"no test case matches the filter {case_filter!r}")
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
    """Claim the run (a redelivered task then does nothing), create its case rows, enqueue cases."""
    run = Run.objects.get(pk=run_id)
    if not run.mark_running():
        return
    try:
        agent = _load_run_agent_names(run)
    except Exception as exc:
        run.fail(f"could not load the agent: {exc}")
        return
    indices: list[int] = run.options.get("case_indices") or []
    CaseResult.objects.bulk_create(
        [
            CaseResult(
                run=run,
                index=index,
                name=agent[index][0] or "",
                is_multi_turn=agent[index][1],
                turn_count=agent[index][2],
            )
            for index in indices
        ],
        ignore_conflicts=True,
    )
    for _ in range(max(1, int(run.options.get("parallel") or 1))):
        if not case_enqueue_next(run):
            break


def _load_run_agent_names(run: Run) -> dict[int, tuple[str | None, bool, int]]:
    with run_agent_loaded(run) as agent:
        return {
            index: (case.name, case.is_multi_turn, len(case.as_turns()))
            for index, case in enumerate(agent.config.test_cases)
        }


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


def case_enqueue_next(run: Run) -> bool:
    """Put the next not-yet-queued case of the run on the queue (atomic: each case once)."""
    from runs import tasks

    while True:
        case_id = (
            CaseResult.objects.filter(run=run, enqueued=False, status=CaseResult.Status.PENDING)
            .order_by("index")
            .values_list("pk", flat=True)
            .first()
        )
        if case_id is None:
            return False
        if CaseResult.objects.filter(pk=case_id, enqueued=False).update(enqueued=True):
            transaction.on_commit(partial(tasks.execute_case.delay, case_id))
            return True


# --- executing one case (inside a Celery task) ----------------------------------------------


def case_execute(case_id: int) -> None:
    """Run one test case as a real agent session, writing each turn as soon as it finishes.

    Redelivery-safe: a case already done is left alone; a case found running (its worker died
    mid-case and the broker redelivered it) has its partial turn rows removed and runs again.
    """
    case = CaseResult.objects.select_related("run", "run__project").get(pk=case_id)
    run = case.run
    if case.status in (
        CaseResult.Status.DONE,
        CaseResult.Status.CANCELLED,
        CaseResult.Status.ERROR,
    ):
        return
    if run.status != Run.Status.RUNNING:
        _case_cancel(case)
        _case_settled(run)
        return
    if case.status == CaseResult.Status.RUNNING:
        _case_reset(case)
    CaseResult.objects.filter(pk=case.pk).update(
        status=CaseResult.Status.RUNNING, attempts=F("attempts") + 1, started_at=timezone.now()
    )
    try:
        with run_agent_loaded(run) as agent:
            result, turns = asyncio.run(_execute(agent, case))
    except Exception as exc:
        log.exception("case %s of run %s crashed", case.index, run.pk)
        CaseResult.objects.filter(pk=case.pk).update(
            status=CaseResult.Status.ERROR,
            passed=False,
            errors=[f"execution error: {type(exc).__name__}: {exc}"],
            finished_at=timezone.now(),
        )
        Run.objects.filter(pk=run.pk).update(
            cases_done=F("cases_done") + 1, failed_cases=F("failed_cases") + 1
        )
    else:
        case_record_result(case, result, turns)
    case_enqueue_next(run)
    _case_settled(run)


async def _execute(
    agent: Any, case: CaseResult
) -> tuple[wire.TestResult, tuple[wire.TurnResult, ...]]:
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
            await record(case, event.turn)
            cancelled = await is_cancelled_now()
        elif event.kind == "case_finished":
            finished.append(event)

    engine = Engine(agent, on_event=on_event, is_cancelled=lambda: cancelled)
    try:
        result = await engine.run_case(case.index)
    finally:
        # The recorder's thread keeps a database connection of its own; do not leak it.
        await sync_to_async(_close_thread_connection, thread_sensitive=True)()
    return result, finished[0].turns


def _close_thread_connection() -> None:
    connection.close()  # the connection of the thread this runs in


def turn_record(case: CaseResult, turn: wire.TurnResult) -> TurnResult:
    """Write one finished turn and its metric rows (idempotent per (case, turn index))."""
    with transaction.atomic():
        TurnResult.objects.filter(case=case, index=turn.turn_index).delete()
        row = TurnResult.objects.create(run_id=case.run_id, case=case, **turn_fields(turn))
        MetricResult.objects.bulk_create(metric_rows(case.run_id, row, turn.metric_results))
        Run.objects.filter(pk=case.run_id).update(turns_done=F("turns_done") + 1)
    return row


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


def case_record_result(
    case: CaseResult, result: wire.TestResult, turns: tuple[wire.TurnResult, ...]
) -> None:
    usage = result.token_usage
    with transaction.atomic():
        updated = CaseResult.objects.filter(pk=case.pk, status=CaseResult.Status.RUNNING).update(
            status=CaseResult.Status.DONE,
            finished_at=timezone.now(),
            turn_count=len(turns),
            turns_passed=sum(1 for turn in turns if turn.passed),
            **case_fields(result),
        )
        if not updated:
            return
        Run.objects.filter(pk=case.run_id).update(
            cases_done=F("cases_done") + 1,
            passed_cases=F("passed_cases") + (1 if result.passed else 0),
            failed_cases=F("failed_cases") + (0 if result.passed else 1),
            prompt_tokens=F("prompt_tokens") + (usage.prompt_tokens if usage else 0),
            completion_tokens=F("completion_tokens") + (usage.completion_tokens if usage else 0),
            total_tokens=F("total_tokens") + (usage.total_tokens if usage else 0),
        )


def _case_reset(case: CaseResult) -> None:
    with transaction.atomic():
        removed = TurnResult.objects.filter(case=case).count()
        TurnResult.objects.filter(case=case).delete()
        Run.objects.filter(pk=case.run_id).update(turns_done=F("turns_done") - removed)


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
    """Compute the roll-up from the case rows and end the run (once: a conditional UPDATE)."""
    run = Run.objects.get(pk=run_id)
    cases = list(CaseResult.objects.filter(run=run).order_by("index"))
    results = [
        case_wire(case)
        for case in cases
        if case.status in (CaseResult.Status.DONE, CaseResult.Status.ERROR)
    ]
    from runs.report.build import summarize

    duration = int((timezone.now() - (run.started_at or run.created_at)).total_seconds() * 1000)
    summary = summarize(results, duration)
    fields = {
        "pass_rate": summary.pass_rate,
        "duration_ms": duration,
        "summary": summary.model_dump(include={"metrics_evaluated", "average_scores"}),
        "metric_summary": metric_summary(results),
        "report_timestamp": timezone.now().isoformat(),
    }
    errored = any(case.status == CaseResult.Status.ERROR for case in cases)
    if errored and not any(case.status == CaseResult.Status.DONE for case in cases):
        run.fail("every test case failed to execute", **fields)
        return
    if not run.finish(passed=summary.failed == 0 and not errored, **fields):
        # Cancelled (or already finished): keep the status but store the roll-up.
        Run.objects.filter(pk=run.pk).update(**fields)


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


def run_cancel(*, run: Run) -> bool:
    """Cancel a queued or running run: pending cases never start; running cases stop after
    their current turn (the rest of their turns are recorded as skipped)."""
    if not run.cancel():
        return False
    pending = CaseResult.objects.filter(run=run, status=CaseResult.Status.PENDING)
    count = pending.update(status=CaseResult.Status.CANCELLED, finished_at=timezone.now())
    Run.objects.filter(pk=run.pk).update(cases_done=F("cases_done") + count)
    return True


def run_reap_stale(run: Run) -> bool:
    """A worker that died mid-case must not leave the run running forever: cases running for
    longer than HOLODECK_CASE_STALE_SECONDS are marked errored and the run is settled."""
    if run.status != Run.Status.RUNNING:
        return False
    cutoff = timezone.now() - timedelta(seconds=settings.HOLODECK_CASE_STALE_SECONDS)
    stale = CaseResult.objects.filter(
        run=run, status=CaseResult.Status.RUNNING, started_at__lt=cutoff
    )
    count = stale.update(
        status=CaseResult.Status.ERROR,
        passed=False,
        errors=["execution error: the worker running this case stopped responding"],
        finished_at=timezone.now(),
    )
    if count:
        Run.objects.filter(pk=run.pk).update(
            cases_done=F("cases_done") + count, failed_cases=F("failed_cases") + count
        )
        _case_settled(run)
    return count > 0


def run_counts(run: Run) -> dict[str, int]:
    return CaseResult.objects.filter(run=run).aggregate(
        done=Count("pk", filter=Q(status=CaseResult.Status.DONE)),
        failed=Count("pk", filter=Q(passed=False)),
    )


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


def runs_import(paths: Iterable[Path], *, project: AgentProject | None = None) -> list[Run]:
    """Import HoloDeck result files (a file, a list of EvalRuns, or a results/ directory)."""
    from runs.report.holodeck_io import load_eval_runs

    imported = []
    for path in paths:
        for eval_run in load_eval_runs(path):
            imported.append(run_record_report(eval_run, source=Run.Source.IMPORT, project=project))
    return imported


def runs_reap_stale() -> int:
    """``run_reap_stale`` for every running run; returns how many runs had lost cases."""
    return sum(run_reap_stale(run) for run in Run.objects.filter(status=Run.Status.RUNNING))


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
