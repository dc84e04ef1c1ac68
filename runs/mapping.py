"""The one mapping between the wire models (``runs.core.wire``) and the database rows.

Each row model's columns are declared once below, as (wire field, row column) pairs; both
directions are read off those lists, so a result field is added to the wire model, the row
model and one list here, nowhere else. Verdicts (``outcome``, ``kind_outcomes``) travel like any
other field: the wire models decide them when a result is built (``runs.core.verdicts.outcomes``)
and the rows store them; nothing here or downstream decides them again.

Wire -> rows: ``case_values`` (a case row's result columns), ``turn_rows`` (a case's turn rows
with their metric rows). Rows -> wire: ``case_to_wire`` (a case row and, for a multi-turn case,
its turn rows), ``turn_to_wire`` (one turn row with its metric rows).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from django.db.models import Count, Q, QuerySet, Sum
from pydantic import BaseModel

from runs.core.reviewing.identity import definition_digest, failure_digest, turn_key
from runs.core.verdicts.kinds import TOOLS_KIND
from runs.core.verdicts.outcomes import Outcome
from runs.core.verdicts.summary import MetricTally, OutcomeCounts, RunSummary, summarize_tallies
from runs.core.wire import models as wire
from runs.core.wire.build import case_turns
from runs.models import CaseRow, MetricRow, TurnRow, TurnTranscript

__all__ = [
    "CASE_FIELDS",
    "METRIC_FIELDS",
    "TURN_FIELDS",
    "TurnRows",
    "case_to_wire",
    "case_turns",
    "case_values",
    "counts_of_rows",
    "summaries_of_rows",
    "summary_of_rows",
    "tool_counts_of_rows",
    "turn_rows",
    "turn_to_wire",
]

Fields = tuple[tuple[str, str], ...]

# (wire field, row column). JSON columns hold the wire value dumped in JSON mode.
TURN_FIELDS: Fields = (
    ("turn_index", "index"),
    ("input", "input"),
    ("response", "response"),
    ("ground_truth", "ground_truth"),
    ("expected_tools", "expected_tools"),
    ("tool_calls", "tool_calls"),
    ("tool_invocations", "tool_invocations"),
    ("tools_matched", "tools_matched"),
    ("arg_match_details", "arg_match_details"),
    ("passed", "passed"),
    ("skipped", "skipped"),
    ("outcome", "outcome"),
    ("kind_outcomes", "kind_outcomes"),
    ("execution_time_ms", "execution_time_ms"),
    ("token_usage", "token_usage"),
    ("errors", "errors"),
    ("grader_details", "grader_details"),
)
METRIC_FIELDS: Fields = (
    ("metric_name", "metric_name"),
    ("kind", "kind"),
    ("score", "score"),
    ("threshold", "threshold"),
    ("passed", "passed"),
    ("outcome", "outcome"),
    ("scale", "scale"),
    ("error", "error"),
    ("retry_count", "retry_count"),
    ("evaluation_time_ms", "evaluation_time_ms"),
    ("model_used", "model_used"),
    ("reasoning", "reasoning"),
    ("judge_usage", "judge_usage"),
    ("judge_cost_usd", "judge_cost_usd"),
)
# A case row's result columns (its roll-up); the name and index are set when the run opens.
CASE_FIELDS: Fields = (
    ("test_input", "test_input"),
    ("agent_response", "agent_response"),
    ("ground_truth", "ground_truth"),
    ("expected_tools", "expected_tools"),
    ("tool_calls", "tool_calls"),
    ("tools_matched", "tools_matched"),
    ("metric_results", "metric_results"),
    ("processed_files", "processed_files"),
    ("errors", "errors"),
    ("execution_time_ms", "execution_time_ms"),
    ("session_start_ms", "session_start_ms"),
    ("token_usage", "token_usage"),
    ("timestamp", "timestamp"),
    ("passed", "passed"),
    ("outcome", "outcome"),
    ("kind_outcomes", "kind_outcomes"),
)


def _to_row(model: BaseModel, fields: Fields) -> dict[str, Any]:
    dumped = model.model_dump(mode="json", include={name for name, _ in fields})
    return {column: dumped.get(name) for name, column in fields}


def _to_wire(row: object, fields: Fields) -> dict[str, Any]:
    return {name: getattr(row, column) for name, column in fields}


# --- wire -> rows ---------------------------------------------------------------------------


def case_values(result: wire.TestResult, turns: Sequence[wire.TurnResult]) -> dict[str, Any]:
    """The result columns of a case row (its roll-up), verdicts included."""
    return {
        **_to_row(result, CASE_FIELDS),
        "turn_count": len(turns),
        "turns_passed": sum(1 for turn in turns if turn.passed),
    }


class TurnRows(NamedTuple):
    """One turn's unsaved rows: the turn, its metrics and its transcript (their ``turn`` set
    when the turn is saved)."""

    turn: TurnRow
    metrics: list[MetricRow]
    transcript: TurnTranscript | None


def turn_rows(*, run_id: int, case: CaseRow, turns: Iterable[wire.TurnResult]) -> list[TurnRows]:
    """Unsaved turn rows, each with its unsaved metric and transcript rows."""
    return [
        TurnRows(
            _turn_row(run_id, case, turn),
            _metric_rows(run_id, turn),
            _transcript_row(run_id, turn.transcript),
        )
        for turn in turns
    ]


def _transcript_row(run_id: int, events: list[dict[str, Any]] | None) -> TurnTranscript | None:
    if events is None:
        return None
    return TurnTranscript.of_events(events, run_id=run_id)


def _turn_row(run_id: int, case: CaseRow, turn: wire.TurnResult) -> TurnRow:
    return TurnRow(
        run_id=run_id, case=case, **_to_row(turn, TURN_FIELDS), **turn_identity(case, turn)
    )


def turn_identity(case: CaseRow, turn: wire.TurnResult) -> dict[str, str]:
    """The turn's identity columns (``runs.core.reviewing.identity``): its place, what defines it,
    how it failed."""
    bad = {Outcome.FAILED.value, Outcome.ERROR.value, Outcome.NOT_GRADED.value}
    return {
        "turn_key": turn_key(case.name, case.index, turn.turn_index),
        "definition": definition_digest(
            input=turn.input,
            ground_truth=turn.ground_truth,
            expected_tools=turn.expected_tools,
            metrics=[(m.metric_name, m.kind, m.threshold) for m in turn.metric_results],
        ),
        "failure": failure_digest(
            outcome=turn.outcome or "",
            failed_metrics=[m.metric_name for m in turn.metric_results if m.outcome in bad],
            failed_tools=[
                str(detail.get("tool")) for detail in turn.arg_match_details or []
                if not detail.get("passed")
            ],
            errored=bool(turn.errors),
        ),
    }  # fmt: skip


def _metric_rows(run_id: int, turn: wire.TurnResult) -> list[MetricRow]:
    rows = []
    for position, metric in enumerate(turn.metric_results):
        values = _to_row(metric, METRIC_FIELDS)
        values["scale"] = "" if values["scale"] is None else str(values["scale"])
        rows.append(MetricRow(run_id=run_id, position=position, **values))
    return rows


# --- rows -> wire ---------------------------------------------------------------------------


def case_to_wire(
    case: CaseRow,
    turns: Sequence[TurnRow] = (),
    metrics_by_turn: dict[int, list[MetricRow]] | None = None,
    transcripts: dict[int, list[dict[str, Any]]] | None = None,
) -> wire.TestResult:
    """A case row as a wire TestResult; a multi-turn case carries ``turns`` (pass its turn rows
    and their metric rows by turn id). A single-turn case keeps its one turn's tool calls.
    ``transcripts`` (events by turn id) go on the turns (a single-turn case: on the case)."""
    values = _to_wire(case, CASE_FIELDS)
    values["passed"] = bool(case.passed)
    values["outcome"] = case.outcome or None
    values["kind_outcomes"] = case.kind_outcomes if case.outcome else None
    if not values["timestamp"] and case.finished_at:
        values["timestamp"] = case.finished_at.isoformat()
    values["test_name"] = case.name or None
    transcripts = transcripts or {}
    if case.is_multi_turn:
        metrics_by_turn = metrics_by_turn or {}
        wire_turns = [
            turn_to_wire(turn, metrics_by_turn.get(turn.pk, []), transcripts.get(turn.pk))
            for turn in turns
        ]
        values["turns"] = wire_turns
        values["tool_invocations"] = [call for t in wire_turns for call in t.tool_invocations]
    elif turns:
        values["tool_invocations"] = turns[0].tool_invocations
        values["transcript"] = transcripts.get(turns[0].pk)
    return wire.TestResult.model_validate(values)


def turn_to_wire(
    turn: TurnRow,
    metrics: Sequence[MetricRow],
    transcript: list[dict[str, Any]] | None = None,
) -> wire.TurnResult:
    values = _to_wire(turn, TURN_FIELDS)
    values["metric_results"] = [_metric_to_wire(metric) for metric in metrics]
    values["transcript"] = transcript
    return wire.TurnResult.model_validate(values)


def _metric_to_wire(metric: MetricRow) -> wire.MetricResult:
    values = _to_wire(metric, METRIC_FIELDS)
    scale: int | str | None = metric.scale or None
    if isinstance(scale, str) and scale.isdigit():
        scale = int(scale)
    values["scale"] = scale
    return wire.MetricResult.model_validate(values)


# --- rows -> the run's summary ----------------------------------------------------------------


def summary_of_rows(run_id: int, *, case_id: int | None = None) -> RunSummary:
    """The summary of a run (or of one of its cases) from its stored verdicts."""
    if case_id is None:
        return summaries_of_rows([run_id])[run_id]
    return summaries_of_rows([run_id], case_id=case_id)[run_id]


def summaries_of_rows(
    run_ids: Sequence[int], *, case_id: int | None = None
) -> dict[int, RunSummary]:
    """Each run's summary from its stored verdicts, counted by the database: five GROUP BY
    queries for all the runs together (cases, turns, the turns not run, the turns' tool
    verdicts, metrics), so a poll of a large running run reads a few rows, not one per turn and
    metric. ``case_id``: one case's summary (of the one run given)."""
    cases, turns, metrics = _rows_of(run_ids, case_id)
    case_tally, turn_tally = _outcome_tallies(run_ids, cases, turns)
    tool_tally: dict[int, list[tuple[str, int]]] = {run_id: [] for run_id in run_ids}
    metric_tally: dict[int, list[MetricTally]] = {run_id: [] for run_id in run_ids}
    for run_id, tools in _tool_tallies(turns):
        tool_tally[run_id] = tools
    for run_id, *row in (
        metrics.values_list("run_id", "metric_name", "kind", "outcome")
        .annotate(n=Count("pk"), score_sum=Sum("score"), scored=Count("score"))
        .order_by()
    ):
        metric_tally[run_id].append(MetricTally(*row))
    return {
        run_id: summarize_tallies(
            cases=case_tally[run_id],
            turns=turn_tally[run_id],
            metrics=metric_tally[run_id],
            tools=tool_tally[run_id],
        )
        for run_id in run_ids
    }


def counts_of_rows(run_id: int) -> tuple[OutcomeCounts, OutcomeCounts]:
    """A run's cases and turns by outcome from its rows (three queries; its turns count the
    ones not run too, so they add up to its planned turns): what a live run's tiles show on
    every poll, the same counts its summary holds."""
    cases, turns, _ = _rows_of([run_id], None)
    case_tally, turn_tally = _outcome_tallies([run_id], cases, turns)
    return OutcomeCounts.tallied(case_tally[run_id]), OutcomeCounts.tallied(turn_tally[run_id])


def _rows_of(
    run_ids: Sequence[int], case_id: int | None
) -> tuple[QuerySet[CaseRow], QuerySet[TurnRow], QuerySet[MetricRow]]:
    cases = CaseRow.objects.filter(run_id__in=run_ids)
    turns = TurnRow.objects.filter(run_id__in=run_ids)
    metrics = MetricRow.objects.filter(run_id__in=run_ids)
    if case_id is not None:
        cases = cases.filter(pk=case_id)
        turns = turns.filter(case_id=case_id)
        metrics = metrics.filter(turn__case_id=case_id)
    return cases, turns, metrics


Tallies = dict[int, list[tuple[str, int]]]


def _outcome_tallies(
    run_ids: Sequence[int], cases: QuerySet[CaseRow], turns: QuerySet[TurnRow]
) -> tuple[Tallies, Tallies]:
    """Per run, (outcome, how many) of its cases and of its turns, the turns its cases planned
    and did not record among them (``_unrun_turns``)."""
    case_tally: Tallies = {run_id: [] for run_id in run_ids}
    turn_tally: Tallies = {run_id: [] for run_id in run_ids}
    planned: dict[tuple[int, str], int] = {}
    for run_id, outcome, n, turn_count in (
        cases.values_list("run_id", "outcome")
        .annotate(n=Count("pk"), planned=Sum("turn_count"))
        .order_by()
    ):
        case_tally[run_id].append((outcome, n))
        planned[run_id, outcome] = turn_count or 0
    for run_id, outcome, n in _tally(turns):
        turn_tally[run_id].append((outcome, n))
    for run_id, outcome, n in _unrun_turns(turns, planned):
        turn_tally[run_id].append((outcome, n))
    return case_tally, turn_tally


# The cases that may have planned turns they never recorded, by their verdict, and what those
# turns count as: a pending (or running) case's are pending, a cancelled case's cancelled, an
# errored case's (its attempt produced no result) skipped. Every other case recorded them all.
_UNRUN_AS: dict[str, Outcome] = {
    "": Outcome.PENDING,
    Outcome.CANCELLED.value: Outcome.CANCELLED,
    Outcome.ERROR.value: Outcome.SKIPPED,
}


def _unrun_turns(
    turns: QuerySet[TurnRow], planned: dict[tuple[int, str], int]
) -> Iterator[tuple[int, str, int]]:
    """(run id, outcome, how many) of the turns its cases planned and did not record, so that
    a summary's turns add up to the run's planned turns; one query, over the turns of the
    cases that may have some (none for a run whose cases all recorded theirs)."""
    if not any(n for (_, outcome), n in planned.items() if outcome in _UNRUN_AS):
        return
    recorded = dict.fromkeys(planned, 0)
    for run_id, outcome, n in (
        turns.filter(case__outcome__in=list(_UNRUN_AS))
        .values_list("run_id", "case__outcome")
        .annotate(n=Count("pk"))
        .order_by()
    ):
        recorded[run_id, outcome] = n
    for (run_id, outcome), n in planned.items():
        if outcome in _UNRUN_AS and n > recorded[run_id, outcome]:
            yield run_id, _UNRUN_AS[outcome].value, n - recorded[run_id, outcome]


def tool_counts_of_rows(run_ids: Sequence[int]) -> dict[int, OutcomeCounts]:
    """Each run's turns that asserted tool calls, by their tool verdict (``RunSummary.tools``,
    for a summary stored before they were counted; one query)."""
    tally: dict[int, list[tuple[str, int]]] = {run_id: [] for run_id in run_ids}
    tally.update(_tool_tallies(TurnRow.objects.filter(run_id__in=run_ids)))
    return {run_id: OutcomeCounts.tallied(rows) for run_id, rows in tally.items()}


def _tally(rows: QuerySet[Any]) -> QuerySet[Any]:
    """(run id, outcome, how many) of case or turn rows."""
    return rows.values_list("run_id", "outcome").annotate(n=Count("pk")).order_by()


def _tool_tallies(turns: QuerySet[TurnRow]) -> Iterator[tuple[int, list[tuple[str, int]]]]:
    """Per run of ``turns``, (tool verdict, how many) of its turns that asserted tool calls
    (``kind_outcomes["tools"]``), grouped by run alone (the leading column of the turns'
    covering index ``turn_verdicts_cover``: no sort). A turn that failed its tool assertions did
    not pass, so only the verdicts of the turns that did not pass are read; the rest passed."""
    failed = ~Q(outcome=Outcome.PASSED) & Q(**{f"kind_outcomes__{TOOLS_KIND}": Outcome.FAILED})
    rows = (
        turns.values_list("run_id")
        .annotate(
            asserted=Count("pk", filter=Q(kind_outcomes__has_key=TOOLS_KIND)),
            failed=Count("pk", filter=failed),
        )
        .order_by()
    )
    for run_id, asserted, failures in rows:
        yield run_id, [(Outcome.PASSED, asserted - failures), (Outcome.FAILED, failures)]
