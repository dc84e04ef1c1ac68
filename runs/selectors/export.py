"""A run read back as the wire models (``runs.wire.models``): its summary, a case's turns and
the whole run as a HoloDeck EvalRun. The API serves these shapes and the exports write them;
the verdicts are the stored ones (``runs.mapping`` copies them), never decided again here."""

from __future__ import annotations

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404

from runs.mapping import case_to_wire, turn_to_wire
from runs.models import CaseResult, MetricResult, Run, TurnResult, TurnTranscript
from runs.selectors.runs import run_summary
from runs.verdicts.numbers import repetition_name
from runs.wire import models as wire


def case_turn_results(*, run_id: int, case_id: int) -> list[wire.TurnResult]:
    """A case's turns as wire TurnResults with their metric results and transcripts, in order
    (four queries); 404 when the run has no such case."""
    case = get_object_or_404(CaseResult.objects.only("id"), pk=case_id, run_id=run_id)
    turns = (
        TurnResult.objects.filter(case=case)
        .order_by("index")
        .prefetch_related(
            Prefetch("metrics", queryset=MetricResult.objects.order_by("position", "id"))
        )
    )
    transcripts = dict(
        TurnTranscript.objects.filter(turn__case=case).values_list("turn_id", "events")
    )
    return [
        turn_to_wire(turn, list(turn.metrics.all()), transcripts.get(turn.pk)) for turn in turns
    ]


def run_eval_run(*, run: Run) -> wire.EvalRun:
    """The run as a HoloDeck-compatible EvalRun (``{report, metadata}``), rebuilt from its rows.

    Four queries whatever the run's size (cases, turns, metrics), plus the summary's while the
    run is active. Each result carries its stored verdicts and ``report.run_summary`` is the
    run's summary (``run_summary``). HoloDeck's own ``report.summary`` is computed as HoloDeck
    does, per case from the results (an imported file's own summary too: the results are the
    truth), and the environment names the run (``runs.wire.round_trip``), so importing the
    export where the run already is is recognised.
    """
    from runs.wire.build import summarize
    from runs.wire.round_trip import with_identity

    results, repetitions = _run_results(run)
    report = wire.TestReport(
        agent_name=run.agent_name,
        agent_config_path=run.agent_config_path,
        results=results,
        summary=summarize(results, run.duration_ms or 0),
        timestamp=run.report_timestamp or run.created_at.isoformat(),
        holodeck_version=run.holodeck_version or "holodeck-web 0.1.0",
        environment=with_identity(run.environment, run.uid, subject=run.git_subject),
        run_summary=run_summary(run=run),
        repetitions=repetitions,
        cancelled_cases=_cancelled_names(run) or None,
    )
    metadata = wire.EvalRunMetadata(
        agent_config=run.config_snapshot,
        prompt_version=run.prompt_version,
        holodeck_version=report.holodeck_version,
        cli_args=run.cli_args,
        git_commit=run.git_commit or None,
    )
    return wire.EvalRun(report=report, metadata=metadata)


def _cancelled_names(run: Run) -> list[str]:
    """The names of the run's cases a cancel stopped (with repeats, each repetition's)."""
    if not run.cancelled_cases:
        return []
    cases = CaseResult.objects.filter(run=run, status=CaseResult.Status.CANCELLED).order_by(
        "index", "repetition"
    )
    return [
        repetition_name(case.name, index=case.index, repetition=case.repetition,
                        repeats=run.repeats) if run.repeats > 1 else case.label
        for case in cases.only("index", "repetition", "name")
    ]  # fmt: skip


def _run_results(run: Run) -> tuple[list[wire.TestResult], list[wire.RepetitionSummary] | None]:
    """Every settled case of the run (done, or errored) as a wire TestResult, in order; with
    repeats, each repetition, named as such (``repetition_name``), and the cases' summaries
    over their repetitions."""
    cases = list(
        CaseResult.objects.filter(
            run=run, status__in=[CaseResult.Status.DONE, CaseResult.Status.ERROR]
        ).order_by("index", "repetition")
    )
    turns_by_case: dict[int, list[TurnResult]] = {}
    metrics_by_turn: dict[int, list[MetricResult]] = {}
    for metric in MetricResult.objects.filter(run=run).order_by("turn_id", "position"):
        metrics_by_turn.setdefault(metric.turn_id, []).append(metric)
    for turn in TurnResult.objects.filter(run=run).order_by("case_id", "index"):
        turns_by_case.setdefault(turn.case_id, []).append(turn)
    transcripts = dict(TurnTranscript.objects.filter(run=run).values_list("turn_id", "events"))
    results = [
        case_to_wire(case, turns_by_case.get(case.pk, []), metrics_by_turn, transcripts)
        for case in cases
    ]
    repeats = run.repeats
    if repeats == 1:
        return results, None
    from runs.verdicts.repeats import repetition_summaries

    summaries = repetition_summaries(
        (
            (case.index, case.name or None, result)
            for case, result in zip(cases, results, strict=True)
        ),
        repeats,
    )
    # One TestResult per repetition, its repetition in its name: HoloDeck readers load them.
    return [
        result.model_copy(
            update={
                "test_name": repetition_name(
                    result.test_name,
                    index=case.index,
                    repetition=case.repetition,
                    repeats=repeats,
                )
            }
        )
        for result, case in zip(results, cases, strict=True)
    ], summaries
