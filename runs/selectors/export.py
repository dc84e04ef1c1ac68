"""The HoloDeck export of a run, read back from its rows."""

from __future__ import annotations

from runs.mapping import case_to_wire
from runs.models import CaseResult, MetricResult, Run, TurnResult
from runs.report import models as wire


def run_eval_run(*, run: Run) -> wire.EvalRun:
    """The run as a HoloDeck-compatible EvalRun (``{report, metadata}``), rebuilt from its rows.

    Three queries whatever the run's size: cases, turns, metrics. The summary is its results'
    (an imported file's own summary too: the results are the truth), and the environment names
    the run (``runs.report.round_trip``), so importing the export where the run already is is
    recognised.
    """
    from runs.report.build import summarize
    from runs.report.round_trip import with_identity

    cases = list(
        CaseResult.objects.filter(
            run=run, status__in=[CaseResult.Status.DONE, CaseResult.Status.ERROR]
        ).order_by("index")
    )
    turns_by_case: dict[int, list[TurnResult]] = {}
    metrics_by_turn: dict[int, list[MetricResult]] = {}
    for metric in MetricResult.objects.filter(run=run).order_by("turn_id", "position"):
        metrics_by_turn.setdefault(metric.turn_id, []).append(metric)
    for turn in TurnResult.objects.filter(run=run).order_by("case_id", "index"):
        turns_by_case.setdefault(turn.case_id, []).append(turn)
    results = [
        case_to_wire(case, turns_by_case.get(case.pk, []), metrics_by_turn) for case in cases
    ]
    report = wire.TestReport(
        agent_name=run.agent_name,
        agent_config_path=run.agent_config_path,
        results=results,
        summary=summarize(results, run.duration_ms or 0),
        timestamp=run.report_timestamp or run.created_at.isoformat(),
        holodeck_version=run.holodeck_version or "holodeck-web 0.1.0",
        environment=with_identity(run.environment, run.uid),
    )
    metadata = wire.EvalRunMetadata(
        agent_config=run.config_snapshot,
        prompt_version=run.prompt_version,
        holodeck_version=report.holodeck_version,
        cli_args=run.cli_args,
        git_commit=run.git_commit or None,
    )
    return wire.EvalRun(report=report, metadata=metadata)
