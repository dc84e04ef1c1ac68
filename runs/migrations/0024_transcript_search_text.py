"""The run page's text search reaches the transcripts: each transcript row gets
``search_text``, what a search reads of its events (``runs.core.wire.transcripts``), filled here for
the rows written before (in batches: a few hundred transcripts in memory at a time), then
indexed as the responses are (``runs.selectors.text_search``: a GIN trigram index on
PostgreSQL, an FTS5 table kept by triggers on SQLite). The column is added nullable so that
SQLite adds it in place instead of copying the whole table first."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from runs.core.wire.transcripts import transcript_search_text
from runs.selectors.text_search import transcript_index_create, transcript_index_drop

# Transcripts read and written back per query (each up to a few hundred KB of events).
BATCH = 200


def search_text_fill(apps: Any, schema_editor: Any) -> None:
    """Migration 0024's fill (``search_texts_fill`` on the historical rows)."""
    search_texts_fill(apps.get_model("runs", "TurnTranscript"), schema_editor.connection.alias)


def search_texts_fill(transcripts: Any, database: str) -> int:
    """Fill ``search_text`` of every transcript row without one, ``BATCH`` rows at a time in
    key order (a fill stopped half way and run again goes on where it stopped); returns how
    many rows it filled."""
    batch = BATCH
    rows = transcripts.objects.using(database)
    filled, last = 0, None
    while True:
        pending = rows.filter(search_text__isnull=True).order_by("pk").only("pk", "events")
        if last is not None:
            pending = pending.filter(pk__gt=last)
        chunk = list(pending[:batch])
        if not chunk:
            return filled
        for row in chunk:
            events = row.events if isinstance(row.events, list) else []
            row.search_text = transcript_search_text(events)
        rows.bulk_update(chunk, ["search_text"])
        filled += len(chunk)
        last = chunk[-1].pk


class Migration(migrations.Migration):
    dependencies = [("runs", "0023_compare_verdicts")]

    operations = [
        migrations.AddField(
            model_name="turntranscript",
            name="search_text",
            field=models.TextField(blank=True, null=True),
        ),
        migrations.RunPython(search_text_fill, migrations.RunPython.noop),
        migrations.RunPython(transcript_index_create, transcript_index_drop),
    ]
