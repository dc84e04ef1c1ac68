"""A turn's transcript row: what its agent was sent and did (``runs.core.wire.transcripts``), and
the text a search of the run's cases reads of it.

Loaded by ``runs.models`` (the app's models module); it names the run's rows by string, so this
module imports none of them.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from runs.core.wire.transcripts import transcript_search_text, transcript_size


class TurnTranscript(models.Model):
    """What one turn's agent was sent and did, as its backend reported it
    (``runs.core.wire.transcripts``): the system prompt (the case's first turn only), the user
    message, each model call, each tool call and its result, each retry. Its own table, read
    only when a transcript is opened: run and case pages never load it."""

    turn = models.OneToOneField(
        "runs.TurnRow", primary_key=True, on_delete=models.CASCADE, related_name="transcript"
    )
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="transcript_rows")
    events = models.JSONField(default=list)
    # Bytes of ``events`` as stored (JSON), for the storage figures.
    size_bytes = models.IntegerField(default=0)
    # What the run page's text search reads of the events (``transcript_search_text``: texts,
    # tool names, args, results, errors; no JSON keys), indexed as the responses are
    # (``runs.selectors.text_search``). Null only on a row migration 0024 has yet to fill.
    search_text = models.TextField(null=True, blank=True)

    @classmethod
    def of_events(cls, events: list[dict[str, Any]], **fields: Any) -> TurnTranscript:
        """An unsaved row of ``events``, with their size and their search text derived."""
        return cls(
            events=events,
            size_bytes=transcript_size(events),
            search_text=transcript_search_text(events),
            **fields,
        )

    def __str__(self) -> str:
        return f"transcript of turn {self.turn_id}"
