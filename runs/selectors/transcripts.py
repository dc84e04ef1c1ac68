"""A case's transcripts, read only when one is opened (the case page's timeline, the side by
side of two runs, the API): two queries, the case and its turns with their transcripts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.shortcuts import get_object_or_404

from runs.core.pricing.prices import PriceTable, usage_cost
from runs.core.wire.models import TokenUsage
from runs.core.wire.requests import RequestBook
from runs.core.wire.transcripts import Event
from runs.models import CaseRow, TurnRow
from runs.selectors.costs import prices


@dataclass(frozen=True)
class TurnTranscriptView:
    turn_id: int
    turn_index: int
    outcome: str
    # None: the turn has no transcript (it never reached the agent, or was imported without).
    events: list[Event] | None
    size_bytes: int


@dataclass(frozen=True)
class CaseTranscript:
    case: CaseRow
    turns: list[TurnTranscriptView]

    @property
    def recorded(self) -> bool:
        return any(turn.events is not None for turn in self.turns)

    def turn(self, index: int) -> TurnTranscriptView | None:
        return next((turn for turn in self.turns if turn.turn_index == index), None)


def case_transcript_get(
    *, run_id: int, case_id: int, full_requests: bool = False
) -> CaseTranscript:
    """The case's turns with their transcripts, model calls priced (``cost_usd``: None when
    the price table has no price for the model); ``full_requests``: each model call's
    ``request`` as the whole body it sent (``runs.core.wire.requests``) instead of its stored
    references. 404 when the run has no such case."""
    case = get_object_or_404(
        CaseRow.objects.only("id", "run_id", "index", "repetition", "name"),
        pk=case_id,
        run_id=run_id,
    )
    rows = (
        TurnRow.objects.filter(case=case)
        .order_by("index")
        .values_list("id", "index", "outcome", "transcript__events", "transcript__size_bytes")
    )
    table = prices()
    book = RequestBook() if full_requests else None
    turns = [
        TurnTranscriptView(
            turn_id=pk,
            turn_index=index,
            outcome=outcome,
            events=None if events is None else priced(_expanded(events, book), table),
            size_bytes=size or 0,
        )
        for pk, index, outcome, events, size in rows
    ]
    return CaseTranscript(case=case, turns=turns)


def _expanded(events: list[Event], book: RequestBook | None) -> list[Event]:
    """The events, each request as its whole body when ``book`` reads the case's turns."""
    if book is None:
        return events
    book.read(events)
    return [
        {**event, "request": _whole(event["request"], book)}
        if isinstance(event.get("request"), dict)
        else event
        for event in events
    ]


def _whole(ref: dict[str, Any], book: RequestBook) -> dict[str, Any]:
    return {"format": ref.get("format"), "body": book.body(ref)}


def priced(events: list[Event], table: PriceTable | str) -> list[Event]:
    """The events with each model call's ``cost_usd`` (None: no price for its model)."""
    return [
        {**event, "cost_usd": call_cost(event, table)}
        if event.get("type") == "model_call"
        else event
        for event in events
    ]


def call_cost(event: dict[str, Any], table: PriceTable | str) -> float | None:
    if isinstance(table, str):  # the price file's error: no prices
        return None
    usage = TokenUsage.counted(
        int(event.get("input_tokens") or 0),
        int(event.get("output_tokens") or 0),
        cache_read_tokens=int(event.get("cached_tokens") or 0),
    )
    cost = usage_cost(usage, event.get("model"), table)
    return round(cost.usd, 8) if cost.known else None
