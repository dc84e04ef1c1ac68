"""What a compare reads of a finished run instead of its turns (``runs.selectors.compare_store``):
stored when the run ends, equal to a recount of its rows after a run, a re-grade, a re-run and
crash recovery, and read through the index ``case_compare_key`` (query plans on both
databases)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from runs.compare.reads.tally import _TALLY
from runs.core.comparison.matrix import keys_of
from runs.models import CaseRow, Run, TurnRow
from runs.selectors.compare_store import DIGEST, compare_values, stored_values
from runs.services import launch
from runs.services.execution import run_execute_inline
from runs.services.regrade import run_regrade_create
from tests.compare.test_compare_tally import assert_tallied_as_aligned, stored
from tests.web.factories import RunSpec, build_run, make_project
from tests.web.services_helpers import (
    example_project,
    example_run_and_rerun,
    run_recovered_after_a_silent_worker,
)

pytestmark = pytest.mark.django_db(transaction=True)  # the launches run on commit


def recounted_columns(run: Run) -> dict[int, tuple[str, list[tuple[int, str, Any]], str]]:
    """Case id -> (its key, its turns' (index, outcome, verdicts by kind), its digest),
    counted from the case and turn rows."""
    cases = list(CaseRow.objects.filter(run=run).order_by("index", "repetition"))
    firsts = {case.index: case.name or f"#{case.index}" for case in cases}
    key_of = dict(zip(firsts, keys_of(firsts.values()), strict=True))
    digests = dict(CaseRow.objects.filter(run=run).annotate(d=DIGEST).values_list("pk", "d"))
    turns: dict[int, list[tuple[int, str, Any]]] = {case.pk: [] for case in cases}
    for case_id, index, outcome, kinds in (
        TurnRow.objects.filter(run=run)
        .order_by("case_id", "index")
        .values_list("case_id", "index", "outcome", "kind_outcomes")
    ):
        turns[case_id].append((index, outcome, kinds))
    return {case.pk: (key_of[case.index], turns[case.pk], digests[case.pk]) for case in cases}


def stored_columns(run: Run) -> dict[int, tuple[str, list[tuple[int, str, Any]], str]]:
    found = {}
    for pk, key, verdicts, digest in CaseRow.objects.filter(run=run).values_list(
        "pk", "compare_key", "verdicts", "verdicts_digest"
    ):
        lines = [line.split("|", 2) for line in verdicts.split("\n")] if verdicts else []
        turns = sorted((int(i), outcome, _json(kinds)) for i, outcome, kinds in lines)
        found[pk] = (key, turns, digest)
    return found


def _json(text: str) -> Any:
    import json

    return json.loads(text)


def assert_stored_equal_a_recount(run: Run) -> None:
    run = Run.objects.get(pk=run.pk)
    assert not run.is_live
    assert stored_values(run) == compare_values(run_id=run.pk)
    assert stored_columns(run) == recounted_columns(run)


def test_a_finished_runs_compare_columns_equal_a_recount_with_repeated_and_unnamed_names(
    project: Any,
) -> None:
    run = build_run(project, RunSpec(cases=9, turns=2, failing=(1, 4)))
    CaseRow.objects.filter(run=run, index__in=(2, 3, 5)).update(name="same")
    CaseRow.objects.filter(run=run, index=6).update(name="same (2)")
    CaseRow.objects.filter(run=run, index__in=(7, 8)).update(name="")
    CaseRow.objects.filter(run=run, index=0).update(name="#7")
    stored(run)
    assert_stored_equal_a_recount(run)
    keys = dict(CaseRow.objects.filter(run=run).values_list("index", "compare_key"))
    assert keys[2] == "same" and keys[3] == "same (2)" and keys[5] == "same (3)"
    assert keys[6] == "same (2) (2)" and keys[0] == "#7" and keys[7] == "#7 (2)"
    assert keys[8] == "#8"


def test_the_stored_compare_values_equal_a_recount_after_a_run_and_its_regrade(
    tmp_path: Path, eager_celery: None
) -> None:
    project = example_project(tmp_path)
    run = launch.run_create(project=project, user=None)  # eager: it ran to its end
    run.refresh_from_db()
    assert_stored_equal_a_recount(run)
    regrade = run_execute_inline(
        run_id=run_regrade_create(original=run, agent_path=project.agent_path, enqueue=False).pk
    )
    assert regrade.source == Run.Source.REGRADE
    assert_stored_equal_a_recount(regrade)
    assert_tallied_as_aligned([run.pk, regrade.pk])


def test_the_stored_compare_values_equal_a_recount_after_a_rerun(
    tmp_path: Path, eager_celery: None
) -> None:
    run, rerun = example_run_and_rerun(tmp_path)
    assert_stored_equal_a_recount(rerun)
    assert_tallied_as_aligned([run.pk, rerun.pk])


def test_the_stored_compare_values_equal_a_recount_after_crash_recovery(
    tmp_path: Path, settings: Any, eager_celery: None
) -> None:
    project = example_project(tmp_path)
    run = launch.run_create(project=project, user=None)
    run = run_recovered_after_a_silent_worker(
        run, settings.HOLODECK_CASE_STALE_SECONDS, verdicts=None, verdicts_digest=None
    )
    assert_stored_equal_a_recount(run)


def plan(sql: str, params: list[Any]) -> str:
    """The database's plan of ``sql``. On PostgreSQL the table is vacuumed and analysed first
    (as autovacuum and the recorder's ``statistics_refresh`` do: without, the planner knows
    neither how many rows there are nor that the index alone holds them) and sequential scans
    are priced out (a table this small is read whole otherwise; at 100,000 cases the planner
    takes the index: benchmarks/compare_bench.py)."""
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
            return "\n".join(str(row) for row in cursor.fetchall())
        cursor.execute("VACUUM ANALYZE runs_caseresult")
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute(f"EXPLAIN {sql}", params)
            return "\n".join(str(row) for row in cursor.fetchall())
        finally:
            cursor.execute("RESET enable_seqscan")


def test_a_pair_of_runs_is_tallied_from_the_index_alone() -> None:
    project = make_project("tally", "/tmp/tally")
    runs = [build_run(project, RunSpec(cases=20, turns=2, failing=(n,))) for n in (1, 2)]
    stored(*runs)
    found = plan(_TALLY, [runs[1].pk, runs[0].pk, runs[1].pk, runs[0].pk])
    assert "case_compare_key" in found, found
    if connection.vendor == "postgresql":
        assert "Index Only Scan using case_compare_key" in found, found
        assert "Seq Scan" not in found, found
    else:
        assert "COVERING INDEX case_compare_key" in found, found
