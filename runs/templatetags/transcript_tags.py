"""Filters of the transcript pages (templates/runs/_transcript.html) and of the arg-match
diffs they link to."""

from __future__ import annotations

from typing import Any

from django import template

from runs.shared.transcript_events import call_anchors, ms_text

register = template.Library()

tx_ms = register.filter("tx_ms", ms_text)


@register.filter
def with_call_anchors(details: Any) -> list[tuple[Any, int | None]]:
    """Each arg-match assertion with the tool call its anchor names (``turn-<number>-call-<n>``,
    which the transcript's tool calls link to), None where an earlier one has that call."""
    assertions = details if isinstance(details, list) else []
    return list(zip(assertions, call_anchors(assertions), strict=True))


@register.filter
def transcript_pairs(section: Any) -> list[tuple[Any, Any]]:
    """The compare page's turn: (column compared with, column) for each run compared with
    another, both with the turn: their transcripts can be set side by side."""
    columns = {column.run.pk: column for column in section.columns}
    pairs = []
    for column in section.columns:
        other = columns.get(column.against.pk) if column.against else None
        if other is not None and other.turn is not None and column.turn is not None:
            pairs.append((other, column))
    return pairs
