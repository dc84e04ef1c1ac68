"""The run page's text search reaches the transcripts (``runs.selectors.text_search``, migration
0024): a case is found by what its turns' transcripts hold (the message sent, the system
prompt, tool names, args and results, errors), never by the JSON's keys nor by a ``parts``
event; through an index on both databases; the recorder writes each transcript's search text,
and the migration fills it in for the rows stored before."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.core.wire.transcripts import transcript_search_text
from runs.models import AgentProject, CaseRow, Run, TurnRow, TurnTranscript
from runs.selectors import text_search
from runs.selectors.text_search import cases_with_text
from runs.services import launch
from tests.web.factories import RunSpec, build_run, make_user
from tests.web.services_helpers import example_project
from tests.web.snapshot_helpers import run_here

on_sqlite = pytest.mark.sqlite
on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's trigram index (DATABASE_URL)"
)
BEFORE = ("runs", "0023_compare_verdicts")
AFTER = ("runs", "0024_transcript_search_text")
MIGRATION_0024 = import_module("runs.migrations.0024_transcript_search_text")

# Case 2's second turn, as a transcript that holds a "parts" event (the raw request messages).
SEEN = [
    {"type": "user", "text": "Where is parcel ZX-77?"},
    {"type": "retry", "error": "503 upstream gone", "start_ms": 1.0},
    {
        "type": "tool_call",
        "name": "parcels_track",
        "args": {"tracking_code": "ZX-77"},
        "result": {"whereabouts": "Depot Nord"},
    },
    {"type": "parts", "messages": [{"role": "user", "content": "a hidden preamble"}]},
    {"type": "assistant", "text": "It is at the depot."},
]


@pytest.fixture
def seen_run(project: AgentProject) -> Run:
    """Five two-turn cases with the factory's transcripts; case 2's second turn's is ``SEEN``."""
    run = build_run(project, RunSpec(cases=5, turns=2, failing=(), transcripts=True))
    turn = TurnRow.objects.get(run=run, case__index=2, index=1)
    TurnTranscript.objects.filter(turn=turn).delete()
    TurnTranscript.of_events(SEEN, turn=turn, run=run).save()
    return run


def found(run: Run, text: str, *, limit: int = 5_000) -> list[int]:
    """The indices of the run's cases that the search finds."""
    matched = CaseRow.objects.filter(run=run).filter(
        cases_with_text(run=run, text=text, limit=limit)
    )
    return sorted(matched.values_list("index", flat=True))


def search_query(run: Run, text: str) -> str:
    """The SQL of the search that read the transcripts' index (SQLite) or rows."""
    with CaptureQueriesContext(connection) as captured:
        found(run, text)
    (sql,) = [q["sql"] for q in captured.captured_queries if "runs_turntranscript" in q["sql"]]
    return sql


@pytest.mark.django_db
def test_a_case_is_found_by_what_its_transcripts_hold(seen_run: Run) -> None:
    assert found(seen_run, "zx-77") == [2]  # the message, and the tool's argument
    assert found(seen_run, "PARCELS_TRACK") == [2]  # a tool's name
    assert found(seen_run, "depot nord") == [2]  # a tool's result
    assert found(seen_run, "503 upstream") == [2]  # a retry's error
    assert found(seen_run, "refund assistant of acme") == [0, 1, 2, 3, 4]  # the system prompt
    assert found(seen_run, "what is the refund for order 3-1") == [3]  # only in a transcript
    assert found(seen_run, "delivered") == [0, 1, 2, 3, 4]  # the factory's tool results


@pytest.mark.django_db
def test_a_case_is_not_found_by_a_json_key_nor_by_a_parts_event(seen_run: Run) -> None:
    for text in ("tracking_code", "whereabouts", "order_id", "a hidden preamble", "gpt-4o"):
        assert found(seen_run, text) == [], text


@pytest.mark.django_db
def test_a_text_in_more_transcripts_than_the_limit_is_matched_by_the_lists_own_queries(
    seen_run: Run,
) -> None:
    assert found(seen_run, "zx-77", limit=0) == [2]
    assert found(seen_run, "delivered", limit=2) == [0, 1, 2, 3, 4]


@pytest.mark.django_db
def test_the_search_finds_a_transcript_only_in_its_own_run(
    seen_run: Run, project: AgentProject
) -> None:
    other = build_run(project, RunSpec(cases=3, turns=2, failing=(), transcripts=True))
    assert found(other, "zx-77") == []
    assert found(other, "delivered") == [0, 1, 2]


@pytest.mark.django_db
def test_the_run_page_lists_a_case_found_in_a_transcript(seen_run: Run) -> None:
    client = Client()
    client.force_login(make_user("reader"))
    page = client.get(reverse("run_detail", args=[seen_run.pk]), {"text": "Depot Nord"})
    assert page.status_code == 200
    listed = CaseRow.objects.get(run=seen_run, index=2)
    others = CaseRow.objects.filter(run=seen_run).exclude(pk=listed.pk)
    html = page.content.decode()
    assert f'id="case-{listed.pk}"' in html
    assert not any(f'id="case-{case.pk}"' in html for case in others)


@on_sqlite
@pytest.mark.django_db
def test_on_sqlite_the_transcripts_are_searched_through_their_fts5_table(seen_run: Run) -> None:
    sql = search_query(seen_run, "parcels_track")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql)
        plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
    assert "SCAN runs_turntranscript_text VIRTUAL TABLE INDEX" in plan, plan
    # Each transcript the index names is read by its key, its turn by its id: no scan of the run.
    assert "SEARCH row USING INDEX sqlite_autoindex_runs_turntranscript_1 (turn_id=?)" in plan
    assert "SEARCH turn USING INTEGER PRIMARY KEY (rowid=?)" in plan, plan
    assert "SCAN row" not in plan and "SCAN turn" not in plan, plan


@on_sqlite
@pytest.mark.django_db
def test_on_sqlite_transcripts_written_changed_and_deleted_are_found_or_not(
    seen_run: Run,
) -> None:
    turn = TurnRow.objects.get(run=seen_run, case__index=4, index=0)
    TurnTranscript.objects.filter(turn=turn).update(search_text="a late Courier note")
    assert found(seen_run, "courier") == [4]
    TurnTranscript.objects.filter(turn=turn).delete()
    assert found(seen_run, "courier") == []
    CaseRow.objects.filter(run=seen_run, index=2).delete()  # its turns and transcripts too
    assert found(seen_run, "zx-77") == []
    with connection.cursor() as cursor:  # the index agrees with the rows (FTS5's own check)
        cursor.execute(
            "INSERT INTO runs_turntranscript_text(runs_turntranscript_text, rank)"
            " VALUES ('integrity-check', 1)"
        )


@on_sqlite
@pytest.mark.django_db
def test_every_migrate_puts_back_the_transcripts_triggers_a_table_rebuild_dropped(
    seen_run: Run,
) -> None:
    from django.core.management import call_command

    with connection.cursor() as cursor:
        cursor.execute('DROP TRIGGER "runs_turntranscript_text_insert"')
    assert not text_search._sqlite_index_present(connection)
    call_command("migrate", "runs", verbosity=0)  # nothing to apply: post_migrate still runs
    assert text_search._sqlite_index_present(connection)
    turn = TurnRow.objects.get(run=seen_run, case__index=3, index=1)
    TurnTranscript.objects.filter(turn=turn).delete()
    TurnTranscript.of_events(
        [{"type": "user", "text": "rebuilt parcel"}], turn=turn, run=seen_run
    ).save()
    assert found(seen_run, "rebuilt parcel") == [3]


@on_postgresql
@pytest.mark.django_db
def test_on_postgresql_the_transcripts_are_searched_through_their_trigram_index(
    project: AgentProject,
) -> None:
    run = build_run(project, RunSpec(cases=300, turns=1, failing=(), transcripts=True))
    turn = TurnRow.objects.get(run=run, case__index=7)
    TurnTranscript.objects.filter(turn=turn).update(search_text="Escalated to a HUMAN")
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list('transcript_text_trgm')")
        cursor.execute("ANALYZE runs_turntranscript")
    assert found(run, "human") == [7]
    sql = search_query(run, "human")
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    assert "Bitmap Index Scan on transcript_text_trgm" in plan, plan


@pytest.mark.django_db(transaction=True)
def test_a_scripted_run_stores_each_transcripts_search_text(tmp_path: Path) -> None:
    run = launch.run_create(project=example_project(tmp_path, "support-bot"))
    run_here(run)
    rows = list(TurnTranscript.objects.filter(run=run))
    assert rows
    for row in rows:
        assert row.search_text == transcript_search_text(row.events)
    # The message sent is in its transcript only (a response search would not find it); the
    # tool's argument is found by its value, never by its key.
    case = CaseRow.objects.get(run=run, name="order_shipped")
    assert found(run, "where is my order a1001") == [case.index]
    assert found(run, "order_id") == []


@pytest.mark.django_db(transaction=True)
def test_migration_0024_fills_the_search_text_of_the_transcripts_stored_before(
    project: AgentProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = build_run(project, RunSpec(cases=4, turns=2, failing=(), transcripts=True))
    events = dict(TurnTranscript.objects.filter(run=run).values_list("turn_id", "events"))
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    try:
        monkeypatch.setattr(MIGRATION_0024, "BATCH", 3)  # more than one batch
        executor = MigrationExecutor(connection)
        executor.migrate([AFTER])
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    stored = dict(TurnTranscript.objects.filter(run=run).values_list("turn_id", "search_text"))
    assert stored == {turn: transcript_search_text(events[turn]) for turn in events}
    assert len(stored) == 8
    assert found(run, "what is the refund for order 2-1") == [2]  # through the index built


@pytest.mark.django_db
def test_the_migration_fills_only_the_rows_without_a_search_text(
    seen_run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run twice (a migration stopped half way and run again), it leaves the rows it filled as
    they are, and fills every other."""
    rows = TurnTranscript.objects.filter(run=seen_run)
    first = rows.order_by("pk").first()
    assert first is not None
    rows.update(search_text=None)
    rows.filter(pk=first.pk).update(search_text="kept as it was")
    monkeypatch.setattr(MIGRATION_0024, "BATCH", 4)
    assert MIGRATION_0024.search_texts_fill(TurnTranscript, connection.alias) == rows.count() - 1
    assert MIGRATION_0024.search_texts_fill(TurnTranscript, connection.alias) == 0
    assert rows.get(pk=first.pk).search_text == "kept as it was"
    assert rows.get(turn__case__index=2, turn__index=1).search_text == transcript_search_text(SEEN)
    assert found(seen_run, "depot nord") == [2]  # the index followed the rows filled
