"""The run page's text search through an index (``runs.selectors.text_search``, migration
0021): it finds what a scan of the responses finds, texts with quotes, wildcards, backslashes
and letters beyond ASCII included; PostgreSQL reads its trigram index, SQLite its FTS5 tables,
which triggers keep in step with the rows written, changed and deleted after the migration."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext

from runs.models import AgentProject, CaseRow, Run, TurnRow
from runs.selectors import text_search
from runs.selectors.text_search import cases_with_text, text_index_create
from tests.web.factories import RunSpec, build_run

pytestmark = pytest.mark.django_db

# SQLite's FTS5 index: on PostgreSQL these are left out of the run (tests/conftest.py) and
# ``test_the_sqlite_index_tests_pass_on_sqlite_in_a_process_of_their_own`` runs them on SQLite.
on_sqlite = pytest.mark.sqlite
on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's trigram index (DATABASE_URL)"
)

# Responses a reviewer may search, set on cases 1 to 5 of a six-case run (case 0 keeps the
# factory's "The refund for order 0-T is **42.00 EUR**.").
RESPONSES = {
    1: 'She said "refund it" — 100% sure, rate_limit hit',
    2: "Saved to C:\\temp\\refund.txt; it's done",
    3: "Ünïcødé ÉCOLE 東京 🙂 Straße",
    4: "FTS words: refund AND NOT order* NEAR(a b) col:x ^start",
    5: "plain ascii ORDER 5-1",
}
TRICKY_TEXTS = (
    '"refund it"',
    'said "ref',
    "100%",
    "100% sure",
    "rate_limit",
    "r%d",  # as a LIKE wildcard it would match "refund"
    "o_der",  # and this "order"
    "\\temp\\",
    "c:\\TEMP",
    "it's",
    "ünïcødé",
    "ÜNÏCØDÉ",
    "école",
    "École",
    "東京 🙂",
    "straße",
    "AND NOT order*",
    "NEAR(a b)",
    "col:x",
    "^start",
    "order 5-1",
    "42.00 eur",
    "**42",
    "no such words",
    "4",  # shorter than a trigram: scanned
    "42",
    "é",
    "%%",
    "_",
    "\\",
)


@pytest.fixture
def tricky_run(project: AgentProject) -> Run:
    """Six two-turn cases: the second turn of cases 1 to 5 says one of ``RESPONSES``; case 5's
    own ``agent_response`` says "Escalated to a HUMAN"."""
    run = build_run(project, RunSpec(cases=6, turns=2, failing=()))
    for index, response in RESPONSES.items():
        TurnRow.objects.filter(run=run, case__index=index, index=1).update(response=response)
    CaseRow.objects.filter(run=run, index=5).update(agent_response="Escalated to a HUMAN")
    return run


def found(run: Run, text: str, *, limit: int = 5_000) -> list[int]:
    """The indices of the run's cases that the search finds."""
    matched = CaseRow.objects.filter(run=run).filter(
        cases_with_text(run=run, text=text, limit=limit)
    )
    return sorted(matched.values_list("index", flat=True))


def scanned(run: Run, text: str) -> list[int]:
    """The indices of the run's cases whose responses ``icontains`` the text, read by a scan
    (PostgreSQL: with bitmap scans off, the only way it reads a GIN index)."""
    with _no_index():
        matched = CaseRow.objects.filter(run=run).filter(
            Q(agent_response__icontains=text)
            | Q(pk__in=TurnRow.objects.filter(run=run, response__icontains=text).values("case"))
        )
        return sorted(matched.values_list("index", flat=True))


@contextmanager
def _no_index() -> Iterator[None]:
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SET enable_bitmapscan = off")
        try:
            yield
        finally:
            cursor.execute("RESET enable_bitmapscan")


def indexed(sql: str) -> bool:
    """Whether a query reads one of SQLite's FTS5 tables."""
    return any(f'"{column.fts}"' in sql for column in text_search.COLUMNS)


def searched_sql(run: Run, text: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        found(run, text)
    return [query["sql"] for query in captured.captured_queries]


def test_the_index_finds_what_the_scan_finds_for_quotes_wildcards_backslashes_and_unicode(
    tricky_run: Run,
) -> None:
    for text in TRICKY_TEXTS:
        assert found(tricky_run, text) == scanned(tricky_run, text), text
    assert found(tricky_run, "REFUND IT") == [1]
    assert found(tricky_run, "r%d") == found(tricky_run, "o_der") == []
    assert found(tricky_run, "\\temp\\") == [2]
    assert found(tricky_run, "human") == [5]  # the case's own response
    assert found(tricky_run, "42.00 eur") == [0, 1, 2, 3, 4, 5]  # each case's first turn


def test_a_text_found_in_more_cases_than_the_limit_is_matched_by_the_lists_own_queries(
    tricky_run: Run,
) -> None:
    assert found(tricky_run, "42.00 EUR", limit=2) == [0, 1, 2, 3, 4, 5]
    assert found(tricky_run, "human", limit=0) == [5]
    assert found(tricky_run, "order 5-1", limit=1) == [5]


def test_the_search_looks_only_in_its_own_run(tricky_run: Run, project: AgentProject) -> None:
    other = build_run(project, RunSpec(cases=8, turns=2, failing=()))
    assert found(other, "order 5-1") == [5]
    assert found(tricky_run, "order 7-0") == []
    assert found(other, "ünïcødé") == []


@on_sqlite
def test_a_text_in_a_later_turn_is_found_through_the_index(tricky_run: Run) -> None:
    queries = searched_sql(tricky_run, "Order 5-1")
    assert found(tricky_run, "Order 5-1") == [5]
    # (the first search of a process also looks up the tables in sqlite_master, once)
    search = [
        sql for sql in queries if "runs_turnresult_text" in sql and "sqlite_master" not in sql
    ]
    assert len(search) == 1 and "runs_caseresult_text" in search[0]
    # The FTS5 tables lead, and each row they name is read by its id: no scan of the run.
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + search[0])
        plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
    assert "SCAN runs_turnresult_text VIRTUAL TABLE INDEX" in plan, plan
    assert "SCAN runs_caseresult_text VIRTUAL TABLE INDEX" in plan, plan
    assert "USING INTEGER PRIMARY KEY (rowid=?)" in plan, plan
    assert "SCAN row" not in plan, plan


@on_sqlite
def test_a_text_shorter_than_a_trigram_or_without_three_letters_in_a_row_is_scanned(
    tricky_run: Run,
) -> None:
    for text in ("42", "é", "r%d", "or_er", "ab%cd_ef"):
        assert not any(indexed(sql) for sql in searched_sql(tricky_run, text)), text
    assert found(tricky_run, "42") == [0, 1, 2, 3, 4, 5]
    # "der" is looked up, and the row's own LIKE reads the "_" as itself.
    for text, indices in (("100% sure", [1]), ("o_der", [])):
        assert any("runs_turnresult_text" in sql for sql in searched_sql(tricky_run, text))
        assert found(tricky_run, text) == indices


@on_sqlite
def test_rows_written_changed_and_deleted_after_the_migration_are_found_or_not(
    tricky_run: Run,
) -> None:
    case = CaseRow.objects.get(run=tricky_run, index=0)
    TurnRow.objects.create(run=tricky_run, case=case, index=2, response="a late Parcel")
    assert found(tricky_run, "late parcel") == [0]

    turn = TurnRow.objects.get(run=tricky_run, case__index=3, index=1)
    turn.response = "rewritten to say parcel too"
    turn.save()
    assert found(tricky_run, "parcel") == [0, 3]
    assert found(tricky_run, "ünïcødé") == []  # its old text is out of the index

    TurnRow.objects.filter(run=tricky_run, case=case, index=2).delete()
    assert found(tricky_run, "parcel") == [3]
    CaseRow.objects.filter(run=tricky_run, index=5).update(agent_response="Sent to a courier")
    assert found(tricky_run, "courier") == [5]
    assert found(tricky_run, "human") == []
    CaseRow.objects.filter(run=tricky_run, index=3).delete()  # its turns go with it
    assert found(tricky_run, "parcel") == []
    with connection.cursor() as cursor:  # the index agrees with the rows (FTS5's own check)
        for index in ("runs_turnresult_text", "runs_caseresult_text"):
            cursor.execute(f"INSERT INTO {index}({index}, rank) VALUES ('integrity-check', 1)")


@on_sqlite
def test_a_database_whose_triggers_are_gone_is_scanned_until_the_index_is_built_again(
    tricky_run: Run, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A migration that rebuilds a table on SQLite drops its triggers: the search then scans
    (and says so once), and ``text_index_create`` puts the triggers back and refills."""
    monkeypatch.setattr(text_search, "_sqlite_ready", {})
    with connection.cursor() as cursor:
        cursor.execute('DROP TRIGGER "runs_turnresult_text_insert"')
    case = CaseRow.objects.get(run=tricky_run, index=4)
    TurnRow.objects.create(run=tricky_run, case=case, index=2, response="unindexed parcel")
    with caplog.at_level(logging.WARNING, logger="runs.selectors.text_search"):
        assert found(tricky_run, "unindexed parcel") == [4]
        assert found(tricky_run, "unindexed parcel") == [4]
    assert not any(indexed(sql) for sql in searched_sql(tricky_run, "unindexed parcel"))
    assert len([r for r in caplog.records if "FTS5 tables or their triggers" in r.message]) == 1

    text_index_create(None, SimpleNamespace(connection=connection))
    assert any(indexed(sql) for sql in searched_sql(tricky_run, "unindexed parcel"))
    assert found(tricky_run, "unindexed parcel") == [4]


@on_sqlite
def test_every_migrate_puts_back_the_triggers_a_table_rebuild_dropped(tricky_run: Run) -> None:
    from django.core.management import call_command

    with connection.cursor() as cursor:
        cursor.execute('DROP TRIGGER "runs_turnresult_text_insert"')
    assert not text_search._sqlite_index_present(connection)
    call_command("migrate", "runs", verbosity=0)  # nothing to apply: post_migrate still runs
    assert text_search._sqlite_index_present(connection)
    case = CaseRow.objects.get(run=tricky_run, index=4)
    TurnRow.objects.create(run=tricky_run, case=case, index=2, response="rebuilt parcel")
    assert any(indexed(sql) for sql in searched_sql(tricky_run, "rebuilt parcel"))
    assert found(tricky_run, "rebuilt parcel") == [4]
    assert not text_search.text_index_ensure(connection)  # in place: nothing to do


@on_sqlite
def test_a_sqlite_without_fts5_leaves_the_migration_to_its_log_and_the_search_to_the_scan(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    class NoFts5:
        """This database, as a SQLite built without FTS5 answers."""

        vendor = "sqlite"
        alias = connection.alias

        def cursor(self) -> Any:
            raise OperationalError("no such module: fts5")

    class Editor:
        connection = NoFts5()

    monkeypatch.setattr(text_search, "_sqlite_ready", {})
    with caplog.at_level(logging.WARNING, logger="runs.selectors.text_search"):
        text_index_create(None, Editor())
    assert "no FTS5 trigram tables" in caplog.text


@on_postgresql
def test_on_postgresql_the_search_reads_the_trigram_indexes(project: AgentProject) -> None:
    run = build_run(project, RunSpec(cases=2_000, turns=1, failing=()))
    CaseRow.objects.filter(run=run, index=7).update(agent_response="Escalated to a HUMAN")
    with connection.cursor() as cursor:
        for table, index in (("runs_turnresult", "turn"), ("runs_caseresult", "case")):
            # Rows written wait in the GIN index's pending list until a vacuum moves them in.
            cursor.execute(f"SELECT gin_clean_pending_list('{index}_response_trgm')")
            cursor.execute(f"ANALYZE {table}")
    queries = searched_sql(run, "order 250-0")
    assert found(run, "order 250-0") == scanned(run, "order 250-0") == [250]
    assert found(run, "human") == scanned(run, "human") == [7]
    (search,) = [sql for sql in queries if "UNION" in sql]
    # A test's few rows are read faster in a sequential scan: without it, the planner has the
    # run's b-tree and the trigram indexes to choose from, and a rare text picks the latter.
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("EXPLAIN " + search)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    assert "Bitmap Index Scan on turn_response_trgm" in plan, plan
    assert "Bitmap Index Scan on case_response_trgm" in plan, plan


@on_postgresql
def test_on_postgresql_a_text_without_a_trigram_is_not_looked_up_in_the_trigram_index(
    tricky_run: Run,
) -> None:
    """Such a text would read the index's every entry: the run's rows are read instead."""
    for text in ("42", "**", "é-é"):
        (search,) = [sql for sql in searched_sql(tricky_run, text) if "UNION" in sql]
        with connection.cursor() as cursor:
            cursor.execute("SET enable_seqscan = off")
            cursor.execute("EXPLAIN " + search)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            cursor.execute("RESET enable_seqscan")
        assert "trgm" not in plan, plan


@pytest.mark.process
@on_postgresql
def test_the_sqlite_index_tests_pass_on_sqlite_in_a_process_of_their_own() -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:deepeval", "-p", "no:cacheprovider", "-n", "0",
         "-q", "-m", "sqlite", __file__],
        cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
