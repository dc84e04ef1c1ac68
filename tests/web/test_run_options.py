"""A run's launch options are one typed model (runs.core.runoptions.RunOptions): a bad value is
refused when a run is written, an older row's JSON still reads (its unreadable values as defaults),
``repeats`` is normalised in one place, and the options the lists read are columns of the run,
filled for older runs by migration 0017 from their JSON."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from importlib import import_module
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from pydantic import ValidationError

from runs.core.runoptions import RerunPick, RunOptions, run_launch_options, run_partial_text
from runs.models import Run
from runs.selectors.partial import PARTIAL_COLUMNS, partial_text_of
from tests.web.factories import RunSpec, build_run, make_project

BEFORE = ("runs", "0016_transcripts_reruns_subjects")
AFTER = ("runs", "0017_run_option_columns")
MIGRATION_0017 = import_module("runs.migrations.0017_run_option_columns")

# What a dashboard launch stored before RunOptions existed, key for key.
OLD_LAUNCH = {
    "parallel": 2,
    "repeats": 3,
    "limit": 2,
    "case_filter": "cash",
    "case_indices": [0, 4],
    "config_cases": 8,
    "cases": [[0, "cash refund", False, 1], [4, "cash back", True, 3]],
    "checkout_commit": "abc123",
    "agent_file": "agent.yaml",
    "warnings": ["observability: no effect here"],
}


def test_a_bad_option_is_refused_naming_the_field_and_the_bound() -> None:
    with pytest.raises(ValidationError) as refused:
        RunOptions(repeats=0)
    assert "repeats" in str(refused.value)
    assert "greater than or equal to 1" in str(refused.value)
    with pytest.raises(ValidationError, match="limit"):
        RunOptions(limit=-1)
    with pytest.raises(ValidationError, match="paralel"):  # a misspelt key is no option
        RunOptions.model_validate({"paralel": 2})


def test_a_run_that_was_launched_before_run_options_reads_every_option() -> None:
    options = RunOptions.stored({**OLD_LAUNCH, "owner": "host:1:2", "regrade_of": 7})

    assert (options.parallel, options.repeats, options.limit) == (2, 3, 2)
    assert (options.case_filter, options.config_cases) == ("cash", 8)
    assert options.cases == [(0, "cash refund", False, 1), (4, "cash back", True, 3)]
    assert (options.agent_file, options.checkout_commit) == ("agent.yaml", "abc123")
    assert (options.owner, options.regrade_of) == ("host:1:2", 7)
    assert options.to_json() == {**OLD_LAUNCH, "owner": "host:1:2", "regrade_of": 7}


def test_an_unreadable_stored_value_reads_as_the_default_and_the_rest_as_stored() -> None:
    options = RunOptions.stored(
        {"repeats": "many", "limit": 0, "parallel": 4, "someday": True, "rerun": {"of": "x"}}
    )
    assert (options.repeats, options.limit, options.parallel, options.rerun) == (1, None, 4, None)
    assert RunOptions.stored(None) == RunOptions.stored({}) == RunOptions()
    assert RunOptions.stored([1, 2]) == RunOptions()  # type: ignore[arg-type]  # not a mapping


@pytest.mark.parametrize(
    ("stored", "repeats"),
    [(None, 1), (0, 1), (-2, 1), ("x", 1), (1, 1), (3, 3), ("3", 3)],
)
def test_repeats_is_normalised_by_the_model_alone(stored: Any, repeats: int) -> None:
    assert RunOptions.stored({"repeats": stored}).repeats == repeats
    assert RunOptions.stored({"repeats": stored}).columns()["repeats"] == repeats


def test_a_rerun_pick_is_stored_as_it_always_was() -> None:
    failed = RunOptions(rerun=RerunPick(of=3, cases="failed")).to_json()
    one = RunOptions(rerun=RerunPick(of=3, case=0, name="refund")).to_json()
    assert failed == {"rerun": {"of": 3, "cases": "failed"}}
    assert one == {"rerun": {"of": 3, "case": 0, "name": "refund"}}


def test_an_import_stores_no_launch_options_and_has_no_launch_option_rows() -> None:
    assert RunOptions().to_json() == {}
    assert RunOptions().fields() == {
        "options": {},
        "repeats": 1,
        "case_limit": None,
        "case_filter": "",
        "config_cases": None,
    }


@pytest.mark.django_db
def test_a_runs_columns_and_its_json_say_the_same_partial_badge() -> None:
    run = build_run(make_project(), RunSpec(cases=6, turns=1), options=OLD_LAUNCH)

    assert (run.repeats, run.case_limit, run.case_filter, run.config_cases) == (3, 2, "cash", 8)
    assert run.partial_text == "partial: 2 of 8 cases, filter 'cash', limit 2"
    assert run.partial_text == run_partial_text(run.options, total_cases=run.total_cases)
    row = Run.objects.filter(pk=run.pk).values_list(*PARTIAL_COLUMNS, "total_cases").get()
    assert partial_text_of(*row[:3], row[4], row[3]) == run.partial_text
    assert ("repeats", "3") in run.launch_options


def test_the_options_model_imports_no_django() -> None:
    code = (
        "import sys, runs.core.runoptions; print(any(m.startswith('django') for m in sys.modules))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "False"


# --- migration 0017: the option columns filled from the JSON --------------------------------


@pytest.fixture
def before_0017() -> Iterator[Any]:
    """The database as migration 0016 left it (its Run model); migrated to the latest after."""
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    yield executor.loader.project_state([BEFORE]).apps.get_model("runs", "Run")
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_migration_0017_fills_the_option_columns_from_each_runs_json(before_0017: Any) -> None:
    old = before_0017
    launched = old.objects.create(agent_name="a", options=OLD_LAUNCH)
    imported = old.objects.create(agent_name="b", options={"warnings": ["odd file"]})
    odd = old.objects.create(agent_name="c", options={"repeats": 0, "limit": "two"})
    older = old.objects.create(agent_name="d", options={"limit": 5, "case_filter": "x"})
    many = MIGRATION_0017.BATCH + 20  # more than one batch
    old.objects.bulk_create(old(agent_name="e", options={"repeats": 2}) for _ in range(many))

    executor = MigrationExecutor(connection)
    executor.migrate([AFTER])
    new = executor.loader.project_state([AFTER]).apps.get_model("runs", "Run")

    columns = ("repeats", "case_limit", "case_filter", "config_cases")
    read = {row[0]: row[1:] for row in new.objects.values_list("pk", *columns)}
    assert read[launched.pk] == (3, 2, "cash", 8)
    assert read[imported.pk] == (1, None, "", None)
    assert read[odd.pk] == (1, None, "", None)
    assert read[older.pk] == (1, 5, "x", None)
    assert new.objects.get(pk=launched.pk).options == OLD_LAUNCH  # the JSON is left as it was
    assert new.objects.filter(agent_name="e", repeats=2).count() == many


def test_migration_0017_reads_json_paths_as_postgresql_gives_them_as_text() -> None:
    assert MIGRATION_0017.option_columns("2", "cash", "8", "3") == {
        "repeats": 3,
        "case_limit": 2,
        "case_filter": "cash",
        "config_cases": 8,
    }
    assert MIGRATION_0017.option_columns(None, None, None, None) == RunOptions().columns()


@pytest.mark.django_db
def test_a_reruns_launch_options_say_what_it_reran_not_filter_none(viewer_client: Client) -> None:
    project = make_project()
    original = build_run(project, RunSpec(cases=4, turns=1))
    one = {"case_indices": [2], "cases": [[2, "", False, 1]], "config_cases": 4}
    rerun = build_run(
        project,
        RunSpec(cases=1, turns=1),
        rerun_of=original,
        options={**one, "rerun": {"of": original.pk, "case": 2}},
    )
    said = f"case 3 of run #{original.pk}"
    assert rerun.launch_options[0] == ("re-run of", said)
    assert not {"filter", "limit"} & {label for label, _ in rerun.launch_options}
    page = viewer_client.get(rerun.get_absolute_url()).text
    assert f'<span data-option="re-run-of">re-run of <span>{said}</span></span>' in page
    assert "filter <span>none</span>" not in page
    named = RunOptions(case_indices=[1], rerun=RerunPick(of=7, case=1, name="refund"))
    failed = RunOptions(case_indices=[0, 3], rerun=RerunPick(of=7, cases="failed"))
    assert run_launch_options(named, git_ref="", commit="")[0] == (
        "re-run of",
        "case 'refund' of run #7",
    )
    assert run_launch_options(failed, git_ref="", commit="")[0] == (
        "re-run of",
        "the failed cases of run #7",
    )
