"""A launch's case rows: written without a model instance per row (``runs.bulk_insert``), they hold
what ``bulk_create`` would have written, on SQLite and PostgreSQL."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from runs import bulk_insert
from runs.bulk_insert import rows_insert
from runs.models import CaseRow, Run
from runs.services.launch import run_create
from tests.web.factories import make_project
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db

CASES = [
    {"index": 0, "name": "first", "is_multi_turn": True, "turn_count": 3},
    {"index": 1, "name": "", "is_multi_turn": False, "turn_count": 1},
    {"index": 2, "name": "ünïcode ☕", "is_multi_turn": True, "turn_count": 2},
    {"index": 3, "name": "x" * 500, "is_multi_turn": False, "turn_count": 1},
    {"index": 4, "name": "last", "is_multi_turn": True, "turn_count": 7},
]


def stored(run: Run) -> list[dict[str, Any]]:
    """Every field of the run's case rows but the row's own id and its run."""
    fields = [f for f in CaseRow._meta.concrete_fields if f.name not in ("id", "run")]
    return [
        {f.name: getattr(case, f.attname) for f in fields}
        for case in CaseRow.objects.filter(run=run).order_by("index")
    ]


def new_run(name: str) -> Run:
    return Run.objects.create(project=make_project(name, f"/srv/{name}"), agent_name=name)


def test_inserted_rows_hold_what_bulk_create_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        bulk_insert, "MAX_PARAMS", 64
    )  # two rows a statement: batches are exercised
    inserted, created = new_run("inserted"), new_run("created")

    rows_insert(CaseRow, CASES, common={"run": inserted})
    CaseRow.objects.bulk_create([CaseRow(run=created, **case) for case in CASES])

    assert stored(inserted) == stored(created)
    assert [case["name"] for case in stored(inserted)] == [case["name"] for case in CASES]
    defaults = stored(inserted)[0]
    assert (defaults["status"], defaults["kind_outcomes"], defaults["errors"]) == (
        CaseRow.Status.PENDING,
        {},
        [],
    )


def test_no_rows_insert_nothing() -> None:
    rows_insert(CaseRow, [], common={"run": new_run("empty")})
    assert not CaseRow.objects.exists()


def test_a_launch_writes_one_pending_row_per_selected_case(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    run = run_create(project=project, case_filter="revenue")
    cases = list(CaseRow.objects.filter(run=run).values_list("index", "name", "status"))
    assert cases == [(1, "northwind_revenue_growth", CaseRow.Status.PENDING)]
    assert run.total_cases == 1 and run.total_turns == 3


def test_a_launch_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    assert gc.isenabled()
    run_create(project=project)
    assert gc.isenabled()
    gc.disable()
    try:
        run_create(project=project)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_every_field_of_a_case_row_has_a_default_or_is_given() -> None:
    """``rows_insert`` fills the fields a launch does not give from their defaults; a new
    required field without one would fail every launch."""
    given = {"run", *CASES[0]}
    for field in CaseRow._meta.concrete_fields:
        if field.primary_key or field.name in given:
            continue
        assert field.has_default() or field.null or field.empty_strings_allowed, field.name
