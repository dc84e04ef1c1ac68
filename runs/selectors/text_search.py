"""Text search in a run's responses and transcripts (the run page's and the API's ``?text=``):
the run's cases whose response — a turn's, or the case's own ``agent_response`` — or a turn's
transcript contains a text, case-insensitively as the database folds it (SQLite: ASCII letters
only). A transcript is searched in its ``search_text``, what the recorder derives of its events
(``runs.core.wire.transcripts.transcript_search_text``: texts, tool names, args, results, errors).

Both databases search through an index that migration ``0021_text_search`` builds from here
for the responses, and ``0024_transcript_search_text`` for the transcripts:

- PostgreSQL: GIN trigram indexes (``pg_trgm``) on ``UPPER(response)``,
  ``UPPER(agent_response)`` and ``UPPER(search_text)``, the very expressions of Django's
  ``icontains``: the search is the scan's query, and the planner reads the index when the
  text is rare (a common text is read along the run's rows, as before). Without the extension
  (a user who may not create it) the migration leaves the indexes out and says so in its log;
  the query stays the same.
- SQLite: an FTS5 table per column with the trigram tokenizer (``detail=none``: about the size
  of the text itself), kept in step by triggers on the rows. It names the rows that may hold
  the text (its case folding is Unicode's, wider than ``LIKE``'s, and ``%`` or ``_`` in the
  text act as wildcards there), and the scan's own ``LIKE`` keeps those that do: the results
  are the scan's. A text without 3 characters in a row between ``%`` and ``_`` cannot be found
  through trigrams, and a SQLite without FTS5 has no index: both read the rows as before.
"""

from __future__ import annotations

import logging
import re
from typing import Any, NamedTuple

from django.db import DatabaseError, connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import Exists, OuterRef, Q, Value
from django.db.models.functions import StrIndex, Upper
from django.db.models.lookups import GreaterThan

from runs.models import CaseRow, Run, TurnRow, TurnTranscript

log = logging.getLogger(__name__)


class Indexed(NamedTuple):
    """A column searched through an index: its table and column, SQLite's FTS5 table over it
    (``fts``, keyed by the row's ``key``), PostgreSQL's trigram index on it, and how a row names its
    case (``case``, reached through ``join`` from the row, aliased ``row``)."""

    table: str
    column: str
    fts: str
    trigram: str
    key: str = "id"
    case: str = '"row"."case_id"'
    join: str = ""


# The responses (migration 0021) and the transcripts' search text (migration 0024).
RESPONSES = (
    Indexed("runs_turnresult", "response", "runs_turnresult_text", "turn_response_trgm"),
    Indexed(
        "runs_caseresult", "agent_response", "runs_caseresult_text", "case_response_trgm",
        case='"row"."id"',
    ),
)  # fmt: skip
TRANSCRIPTS = (
    Indexed(
        "runs_turntranscript", "search_text", "runs_turntranscript_text", "transcript_text_trgm",
        key="turn_id", case='"turn"."case_id"',
        join=' CROSS JOIN "runs_turnresult" AS "turn" ON "turn"."id" = "row"."turn_id"',
    ),
)  # fmt: skip
COLUMNS = RESPONSES + TRANSCRIPTS
# The migration that builds each column's index (``text_index_ensure`` rebuilds what is applied).
MIGRATIONS = (("0021_text_search", RESPONSES), ("0024_transcript_search_text", TRANSCRIPTS))
# The SQLite triggers that keep each FTS5 table in step with its rows.
TRIGGER_EVENTS = ("insert", "update", "delete")
# A trigram index finds a text with at least this many characters in a row (no wildcard).
TRIGRAM = 3
# PostgreSQL's trigrams are made of letters and digits: a text needs 3 of them in a row.
TRIGRAM_WORD = re.compile(r"[^\W_]{3}")
# Databases (alias, name) whose FTS5 tables and triggers are known to be in place, or not.
_sqlite_ready: dict[tuple[str, str], bool] = {}


def cases_with_text(*, run: Run, text: str, limit: int) -> Q:
    """The run's cases whose response or transcript contains ``text`` (case-insensitively, as
    the scan ``icontains`` matches), as a filter of the run's case rows: the ids of up to
    ``limit`` cases, read in one query through the index; a text found in more cases is matched
    by the list's own queries instead (its count and its page), each case looking for it in its
    own turns and their transcripts (``EXISTS`` on the turns' case index: a page of a common
    text stops at its 100th case; ``IN`` a subquery of every matching turn made PostgreSQL
    re-read them per case)."""
    ids = _indexed_case_ids(run, text, limit) if sqlite_index_fits(text) else None
    if ids is None:
        ids = _scanned_case_ids(run, text, limit)
    if len(ids) <= limit:
        return Q(pk__in=ids)
    turns = TurnRow.objects.filter(case=OuterRef("pk")).filter(_contains("response", text))
    transcripts = TurnTranscript.objects.filter(turn__case=OuterRef("pk")).filter(
        _contains("search_text", text)
    )
    return _contains("agent_response", text) | Q(Exists(turns)) | Q(Exists(transcripts))


def _contains(field: str, text: str) -> Q:
    """``field`` contains ``text``, case-insensitively: ``icontains``, but on PostgreSQL a text
    without 3 letters or digits in a row (no trigram to look up) is matched by ``STRPOS`` on the
    same ``UPPER`` values, which the trigram index does not answer: for such a text it would
    read its every entry (7 s for "50" at 500,000 turns) where the run's rows take a scan."""
    if connection.vendor == "postgresql" and not TRIGRAM_WORD.search(text):
        return Q(GreaterThan(StrIndex(Upper(field), Upper(Value(text))), 0))
    return Q(**{f"{field}__icontains": text})


def _scanned_case_ids(run: Run, text: str, limit: int) -> list[int]:
    """Up to ``limit`` + 1 ids of the run's cases with ``text`` (one query; PostgreSQL answers
    it from its trigram indexes when the text is rare, from the run's rows when it is not)."""
    turns = TurnRow.objects.filter(run=run).filter(_contains("response", text)).order_by()
    own = CaseRow.objects.filter(run=run).filter(_contains("agent_response", text)).order_by()
    seen = TurnTranscript.objects.filter(run=run).filter(_contains("search_text", text))
    matched = turns.values_list("case_id", flat=True).union(
        own.values_list("pk", flat=True), seen.order_by().values_list("turn__case_id", flat=True)
    )
    # A UNION takes the model's default ordering back, which it cannot apply: order by nothing.
    return list(matched.order_by()[: limit + 1])


def _indexed_case_ids(run: Run, text: str, limit: int) -> list[int]:
    """Up to ``limit`` + 1 ids of the run's cases with ``text``, through SQLite's FTS5 tables
    (one query). The index leads each side (``CROSS JOIN`` keeps SQLite from starting at the
    run's rows) and each side stops at ``limit`` + 1 cases, so a common text costs a bounded
    read; the scan's ``LIKE`` on the row keeps exactly the scan's matches."""
    sides = [_indexed_side(indexed, limit) for indexed in COLUMNS]
    sql = " UNION ".join(f"SELECT * FROM ({side})" for side in sides)
    candidates = "%" + text + "%"  # the FTS5 table's LIKE: % and _ widen, the row's LIKE narrows
    exact = "%" + connection.ops.prep_for_like_query(text) + "%"
    with connection.cursor() as cursor:
        cursor.execute(sql, [candidates, run.pk, exact] * len(sides))
        return [case_id for (case_id,) in cursor.fetchall()]


def _indexed_side(indexed: Indexed, limit: int) -> str:
    """One column's part of ``_indexed_case_ids``: the distinct cases (a turn's ``case_id``, a
    case's ``id``, a transcript's turn's ``case_id``) whose rows the FTS5 table names and whose
    column has the text."""
    table, column, index, key = indexed.table, indexed.column, indexed.fts, indexed.key
    return (
        f'SELECT DISTINCT {indexed.case} FROM "{index}" CROSS JOIN "{table}" AS "row"'
        f' ON "row"."{key}" = "{index}"."rowid"{indexed.join}'
        f' WHERE "{index}"."{column}" LIKE %s AND "row"."run_id" = %s'
        f' AND "row"."{column}" LIKE %s ESCAPE \'\\\' LIMIT {int(limit) + 1}'
    )


def sqlite_index_fits(text: str) -> bool:
    """Whether this database is SQLite with its FTS5 tables and their triggers in place, and
    ``text`` holds 3 characters in a row that are not a ``LIKE`` wildcard (a trigram to look
    up). Read once per database: only a migration changes it (``text_index_create``)."""
    if connection.vendor != "sqlite" or "\x00" in text:
        return False
    if not any(len(piece) >= TRIGRAM for piece in re.split(r"[%_]", text)):
        return False
    key = (connection.alias, str(connection.settings_dict["NAME"]))
    if key not in _sqlite_ready:
        _sqlite_ready[key] = _sqlite_index_present(connection)
        if not _sqlite_ready[key]:
            log.warning(
                "text search: SQLite's FTS5 tables or their triggers are missing (migrations "
                "0021 and 0024 build them, every migrate again after a table rebuild): "
                "responses and transcripts are scanned"
            )
    return _sqlite_ready[key]


def _sqlite_index_present(
    database: BaseDatabaseWrapper, columns: tuple[Indexed, ...] = COLUMNS
) -> bool:
    """Whether every FTS5 table and trigger of ``columns`` is in the schema (a migration that
    rebuilds a table on SQLite drops its triggers: the search then scans)."""
    names = [indexed.fts for indexed in columns]
    names += [_trigger(index, event) for index in names for event in TRIGGER_EVENTS]
    with database.cursor() as cursor:
        marks = ", ".join(["%s"] * len(names))
        cursor.execute(f"SELECT count(*) FROM sqlite_master WHERE name IN ({marks})", names)
        (found,) = cursor.fetchone()
    return bool(found == len(names))


def _trigger(index: str, event: str) -> str:
    return f"{index}_{event}"


# --- the index: built and dropped by migrations 0021 (responses) and 0024 (transcripts) ------


def text_index_create(apps: Any, schema_editor: Any) -> None:
    """Build the responses' index for this database (migration 0021; idempotent: what is in
    place stays). Where it cannot (no ``pg_trgm`` for this user, no FTS5 in this SQLite), the
    log says so and the search scans: the migration does not fail."""
    _index_create(schema_editor.connection, RESPONSES)


def transcript_index_create(apps: Any, schema_editor: Any) -> None:
    """Build the transcripts' index (migration 0024, once their ``search_text`` is filled), as
    ``text_index_create`` builds the responses'."""
    _index_create(schema_editor.connection, TRANSCRIPTS)


def _index_create(database: BaseDatabaseWrapper, columns: tuple[Indexed, ...]) -> None:
    _sqlite_ready.clear()
    if database.vendor == "postgresql":
        _postgresql_create(database, columns)
    elif database.vendor == "sqlite":
        _sqlite_create(database, columns)


def text_index_ensure(database: BaseDatabaseWrapper) -> bool:
    """After every ``migrate`` (``post_migrate``): SQLite's FTS5 tables and triggers put back
    where a migration after the one that built them rebuilt a table (SQLite drops a rebuilt
    table's triggers), refilled from the rows; True when it did. Nothing for a migration not
    applied, nothing on PostgreSQL (its indexes outlive a table change)."""
    if database.vendor != "sqlite":
        return False
    applied = MigrationRecorder(database).applied_migrations()
    columns = tuple(
        indexed
        for migration, built in MIGRATIONS
        if ("runs", migration) in applied
        for indexed in built
    )
    if not columns or _sqlite_index_present(database, columns):
        return False
    log.warning("text search: SQLite's FTS5 tables or triggers were missing: built again")
    _sqlite_ready.clear()
    _sqlite_create(database, columns)
    return True


def text_index_drop(apps: Any, schema_editor: Any) -> None:
    """Drop the responses' index (migration 0021's reverse; PostgreSQL keeps the extension)."""
    _index_drop(schema_editor.connection, RESPONSES)


def transcript_index_drop(apps: Any, schema_editor: Any) -> None:
    """Drop the transcripts' index (migration 0024's reverse)."""
    _index_drop(schema_editor.connection, TRANSCRIPTS)


def _index_drop(database: BaseDatabaseWrapper, columns: tuple[Indexed, ...]) -> None:
    _sqlite_ready.clear()
    with database.cursor() as cursor:
        for indexed in columns:
            if database.vendor == "postgresql":
                cursor.execute(f'DROP INDEX IF EXISTS "{indexed.trigram}"')
            elif database.vendor == "sqlite":
                for event in TRIGGER_EVENTS:
                    cursor.execute(f'DROP TRIGGER IF EXISTS "{_trigger(indexed.fts, event)}"')
                cursor.execute(f'DROP TABLE IF EXISTS "{indexed.fts}"')


def _postgresql_create(database: BaseDatabaseWrapper, columns: tuple[Indexed, ...]) -> None:
    """``pg_trgm`` (in a savepoint: a refusal leaves the migration's transaction usable) and a
    GIN trigram index per column, then fresh statistics so the planner knows how rare a text
    is."""
    try:
        with transaction.atomic(using=database.alias), database.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except DatabaseError as error:
        log.warning("text search: pg_trgm cannot be created (%s): the text is scanned", error)
        return
    with database.cursor() as cursor:
        for indexed in columns:
            cursor.execute(
                f'CREATE INDEX IF NOT EXISTS "{indexed.trigram}" ON "{indexed.table}"'
                f' USING gin (UPPER("{indexed.column}") gin_trgm_ops)'
            )
            cursor.execute(f'ANALYZE "{indexed.table}"')


def _sqlite_create(database: BaseDatabaseWrapper, columns: tuple[Indexed, ...]) -> None:
    """An FTS5 trigram table per column over its rows (external content: the text is not
    stored twice), filled from the rows in place, and the triggers that keep it in step."""
    try:
        with transaction.atomic(using=database.alias), database.cursor() as cursor:
            for indexed in columns:
                cursor.execute(
                    f'CREATE VIRTUAL TABLE IF NOT EXISTS "{indexed.fts}" USING'
                    f" fts5(\"{indexed.column}\", content='{indexed.table}',"
                    f" content_rowid='{indexed.key}', tokenize='trigram', detail=none,"
                    " columnsize=0)"
                )
    except DatabaseError as error:
        log.warning(
            "text search: SQLite has no FTS5 trigram tables (%s): the text is scanned", error
        )
        return
    with database.cursor() as cursor:
        for indexed in columns:
            for statement in _sqlite_triggers(indexed):
                cursor.execute(statement)
            index = indexed.fts
            cursor.execute(f'INSERT INTO "{index}"("{index}") VALUES (\'rebuild\')')


def _sqlite_triggers(indexed: Indexed) -> list[str]:
    """The triggers of one column's FTS5 table: a row's text is added when the row is written,
    taken out (with the value it had: an external content table needs it) when the row is
    deleted, and both when the text changes."""
    table, column, index, key = indexed.table, indexed.column, indexed.fts, indexed.key
    add = f'INSERT INTO "{index}"(rowid, "{column}") VALUES (new."{key}", new."{column}");'
    take = (
        f'INSERT INTO "{index}"("{index}", rowid, "{column}")'
        f' VALUES (\'delete\', old."{key}", old."{column}");'
    )
    return [
        f'CREATE TRIGGER IF NOT EXISTS "{_trigger(index, "insert")}" AFTER INSERT ON "{table}"'
        f" BEGIN {add} END",
        f'CREATE TRIGGER IF NOT EXISTS "{_trigger(index, "delete")}" AFTER DELETE ON "{table}"'
        f" BEGIN {take} END",
        f'CREATE TRIGGER IF NOT EXISTS "{_trigger(index, "update")}" AFTER UPDATE OF "{column}"'
        f' ON "{table}" WHEN old."{column}" IS NOT new."{column}" BEGIN {take} {add} END',
    ]
