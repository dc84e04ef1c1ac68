"""One turn's transcript as the dashboard shows it (the case page's timeline, the side by side
of two runs): the turn's events, priced, with what the timeline links to (its arg-match
assertions, the run's snapshot), in one query; read only when a transcript is opened.

``runs.selectors.transcripts`` reads a whole case's transcripts (the API); a page opens one
turn at a time, so it reads that turn alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import Http404

from runs.core.wire.transcripts import Event
from runs.models import CaseRow, TurnRow
from runs.selectors.costs import prices
from runs.selectors.transcripts import priced


@dataclass(frozen=True)
class TurnTranscriptPage:
    run_id: int
    case_id: int
    turn_index: int
    outcome: str
    skipped: bool
    execution_time_ms: int
    arg_match_details: list[dict[str, Any]]
    # None: the turn has no transcript (never sent, run before transcripts, imported without).
    events: list[Event] | None
    size_bytes: int
    snapshot_id: int | None


_FIELDS = (
    "outcome",
    "skipped",
    "execution_time_ms",
    "arg_match_details",
    "transcript__events",
    "transcript__size_bytes",
    "run__snapshot_id",
)


def turn_transcript_get(*, run_id: int, case_id: int, index: int) -> TurnTranscriptPage:
    """Turn ``index`` of the case with its transcript, model calls priced (``cost_usd``); 404
    when the run has no such case or the case no such turn (one query)."""
    row = (
        TurnRow.objects.filter(case_id=case_id, case__run_id=run_id, index=index)
        .values_list(*_FIELDS)
        .first()
    )
    if row is None:
        raise Http404(f"case {case_id} of run {run_id} has no turn {index}")
    outcome, skipped, time_ms, details, events, size, snapshot_id = row
    return TurnTranscriptPage(
        run_id=run_id,
        case_id=case_id,
        turn_index=index,
        outcome=outcome,
        skipped=skipped,
        execution_time_ms=time_ms or 0,
        arg_match_details=details if isinstance(details, list) else [],
        events=None if events is None else priced(events, prices()),
        size_bytes=size or 0,
        snapshot_id=snapshot_id,
    )


def transcript_cases(*, case_ids: tuple[int, int]) -> tuple[CaseRow, CaseRow]:
    """The two cases of a side by side, each with its run (the columns' headings); 404 when
    either is missing (one query)."""
    found = {
        case.pk: case
        for case in CaseRow.objects.filter(pk__in=case_ids)
        .select_related("run")
        .only(
            "id",
            "index",
            "repetition",
            "name",
            "turn_count",
            "outcome",
            "run__id",
            "run__agent_name",
            "run__git_commit",
            "run__snapshot_id",
        )
    }
    missing = [case_id for case_id in case_ids if case_id not in found]
    if missing:
        raise Http404(f"no case {missing[0]}")
    return found[case_ids[0]], found[case_ids[1]]
