"""A run read back as the wire models (``runs.core.wire.models``): its summary, a case's turns and
the whole run as a HoloDeck EvalRun. The API serves these shapes and the exports write them;
the verdicts are the stored ones (``runs.mapping`` copies them), never decided again here."""

from __future__ import annotations

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404

from runs.core.reviewing.vocabulary import HumanVerdict
from runs.core.verdicts.numbers import repetition_name
from runs.core.wire import models as wire
from runs.core.wire.build import summarize
from runs.core.wire.repetitions import repetition_summaries
from runs.core.wire.reviews import IMPORTED_BY, ReviewWire
from runs.core.wire.round_trip import with_identity
from runs.mapping import case_to_wire, turn_to_wire
from runs.models import CaseRow, MetricRow, Run, TurnRow, TurnTranscript
from runs.review_models import Review, ReviewChange
from runs.selectors.runs import run_summary


def case_turn_results(*, run_id: int, case_id: int) -> list[wire.TurnResult]:
    """A case's turns as wire TurnResults with their metric results and transcripts, in order
    (four queries); 404 when the run has no such case."""
    case = get_object_or_404(CaseRow.objects.only("id"), pk=case_id, run_id=run_id)
    turns = (
        TurnRow.objects.filter(case=case)
        .order_by("index")
        .prefetch_related(
            Prefetch("metrics", queryset=MetricRow.objects.order_by("position", "id"))
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

    Six queries whatever the run's size (cases, turns, metrics, transcripts, reviews and their
    imported authors), plus the summary's while the run is active. Each result carries its
    stored verdicts, ``report.run_summary`` is the run's summary (``run_summary``) and
    ``report.reviews`` what people concluded about its turns (``run_review_wires``).
    HoloDeck's own ``report.summary`` is computed as HoloDeck does, per case from the results
    (an imported file's own summary too: the results are the truth), and the environment names
    the run (``runs.core.wire.round_trip``), so importing the export where the run already is is
    recognised.
    """

    cases, results, repetitions = _run_results(run)
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
        reviews=run_review_wires(run=run, cases=cases) or None,
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
    cases = CaseRow.objects.filter(run=run, status=CaseRow.Status.CANCELLED).order_by(
        "index", "repetition"
    )
    return [
        repetition_name(case.name, index=case.index, repetition=case.repetition,
                        repeats=run.repeats) if run.repeats > 1 else case.label
        for case in cases.only("index", "repetition", "name")
    ]  # fmt: skip


def _run_results(
    run: Run,
) -> tuple[list[CaseRow], list[wire.TestResult], list[wire.RepetitionSummary] | None]:
    """Every settled case of the run (done, or errored), and each as a wire TestResult, in
    order; with repeats, each repetition, named as such (``repetition_name``), and the cases'
    summaries over their repetitions."""
    cases = list(
        CaseRow.objects.filter(
            run=run, status__in=[CaseRow.Status.DONE, CaseRow.Status.ERROR]
        ).order_by("index", "repetition")
    )
    turns_by_case: dict[int, list[TurnRow]] = {}
    metrics_by_turn: dict[int, list[MetricRow]] = {}
    for metric in MetricRow.objects.filter(run=run).order_by("turn_id", "position"):
        metrics_by_turn.setdefault(metric.turn_id, []).append(metric)
    for turn in TurnRow.objects.filter(run=run).order_by("case_id", "index"):
        turns_by_case.setdefault(turn.case_id, []).append(turn)
    transcripts = dict(TurnTranscript.objects.filter(run=run).values_list("turn_id", "events"))
    results = [
        case_to_wire(case, turns_by_case.get(case.pk, []), metrics_by_turn, transcripts)
        for case in cases
    ]
    repeats = run.repeats
    if repeats == 1:
        return cases, results, None

    summaries = repetition_summaries(
        (
            (case.index, case.name or None, result)
            for case, result in zip(cases, results, strict=True)
        ),
        repeats,
    )
    # One TestResult per repetition, its repetition in its name: HoloDeck readers load them.
    return (
        cases,
        [
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
        ],
        summaries,
    )


def run_review_wires(*, run: Run, cases: list[CaseRow]) -> list[ReviewWire]:
    """The reviews of the run's settled ``cases`` (in the export's order), each naming its
    result by position, case by case and turn by turn (two queries). ``by`` is who last changed
    it; for a review imported from a file and not changed since, the name the file gave."""
    position = {case.pk: index for index, case in enumerate(cases)}
    reviews = sorted(
        (
            review
            for review in Review.objects.filter(run=run).select_related(
                "category", "updated_by", "turn"
            )
            if review.case_id in position
        ),
        key=lambda r: (position[r.case_id], r.turn.index if r.turn else -1, r.pk),
    )
    imported = _imported_authors([review.pk for review in reviews if review.updated_by is None])
    by_case = {case.pk: case for case in cases}
    return [
        _review_wire(review, by_case[review.case_id], position[review.case_id], imported)
        for review in reviews
    ]


def _review_wire(
    review: Review, case: CaseRow, position: int, imported: dict[int, str]
) -> ReviewWire:
    by = review.updated_by.get_username() if review.updated_by else imported.get(review.pk, "")
    return ReviewWire(
        result_index=position,
        test_name=case.name or None,
        case_index=case.index,
        repetition=case.repetition,
        turn_index=review.turn.index if review.turn is not None else None,
        turn_key=review.turn_key,
        definition=review.definition,
        failure=review.failure,
        machine_outcome=review.machine_outcome,
        verdict=HumanVerdict(review.verdict) if review.verdict else None,
        category=review.category.name if review.category else None,
        note=review.note,
        link=review.link,
        reopened=review.reopened,
        by=by,
        at=review.updated_at,
    )


def _imported_authors(review_ids: list[int]) -> dict[int, str]:
    """Who made each of these reviews, as the file they were imported from said (its
    ``ReviewChange`` row, ``runs.services.review_import``)."""
    if not review_ids:
        return {}
    changes = ReviewChange.objects.filter(
        review_id__in=review_ids, after__has_key=IMPORTED_BY
    ).order_by("review_id", "-at", "-id")
    authors: dict[int, str] = {}
    for review_id, after in changes.values_list("review_id", "after"):
        authors.setdefault(review_id, str(after.get(IMPORTED_BY) or ""))
    return authors
