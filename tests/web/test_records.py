"""Whole reports in and out of the database: HoloDeck history import and result-file export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runs import selectors
from runs.models import MetricRow, Run, TurnRow
from runs.services import history, launch
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db(transaction=True)


def test_holodeck_history_imports_as_runs(shared_dir: Path) -> None:
    runs = history.runs_import([shared_dir / "fixtures" / "holodeck" / "seed_runs.json"]).imported
    assert len(runs) == 24
    first = Run.objects.get(pk=runs[0].pk)
    assert first.source == Run.Source.IMPORT
    assert first.total_cases == first.cases.count()
    assert first.passed_cases + first.failed_cases == first.total_cases
    assert MetricRow.objects.filter(run=first, kind="geval").exists()
    assert TurnRow.objects.filter(run=first).count() == first.total_cases


def test_the_import_command_loads_a_results_directory(
    tmp_path: Path, shared_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from django.core.management import call_command

    runs = json.loads((shared_dir / "fixtures" / "holodeck" / "seed_runs.json").read_text())
    folder = tmp_path / "results" / "customer-support"
    folder.mkdir(parents=True)
    for index, eval_run in enumerate(runs[:3]):
        (folder / f"run-{index}.json").write_text(json.dumps(eval_run))
    call_command("import_results", str(tmp_path / "results"))
    assert "imported 3 run(s)" in capsys.readouterr().out
    assert Run.objects.filter(source=Run.Source.IMPORT).count() == 3


def test_a_run_exports_as_the_holodeck_result_file_it_was_made_from(
    tmp_path: Path, shared_dir: Path
) -> None:
    import json

    from runs.core.wire.holodeck_io import load_eval_runs

    path = shared_dir / "fixtures" / "holodeck" / "seed_runs.json"
    (original,) = load_eval_runs(json.loads(path.read_text())[:1])
    (run,) = history.runs_import([path]).imported[:1]
    exported = selectors.run_eval_run(run=run)
    assert exported.report.results == original.report.results
    assert exported.metadata == original.metadata


def test_a_dashboard_run_exports_its_turns(tmp_path: Path, eager_celery: None) -> None:
    from runs.core.wire.holodeck_io import dump_eval_run, load_eval_runs

    run = launch.run_create(project=example_project(tmp_path))
    exported = selectors.run_eval_run(run=Run.objects.get(pk=run.pk))
    (again,) = load_eval_runs(json.loads(dump_eval_run(exported)))
    assert again.report.summary.total_tests == 3 and again.report.summary.failed == 1
    turns = [turn for result in again.report.results for turn in result.turns or []]
    assert len(turns) == 10
    assert any(turn.arg_match_details for turn in turns)
    assert any(turn.grader_details for turn in turns)


def test_importing_the_same_results_twice_adds_nothing(
    shared_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from django.core.management import call_command

    path = shared_dir / "fixtures" / "holodeck" / "seed_runs.json"
    call_command("import_results", str(path))
    call_command("import_results", str(path))
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("imported 24 run(s)")
    assert out[1] == "imported 0 run(s) with 0 test case(s); 24 already imported, skipped"
    assert Run.objects.count() == 24


def test_an_exported_imported_run_imports_again_as_the_same_run(
    tmp_path: Path, shared_dir: Path
) -> None:
    from runs.core.wire.holodeck_io import dump_eval_run

    path = shared_dir / "fixtures" / "holodeck" / "seed_runs.json"
    imported = history.runs_import([path]).imported
    for run in imported:
        file = tmp_path / f"run-{run.pk}.json"
        file.write_text(dump_eval_run(selectors.run_eval_run(run=run)))
        outcome = history.runs_import([file])
        assert outcome.imported == [] and [r.pk for r in outcome.already_imported] == [run.pk]
    assert Run.objects.count() == 24


def test_importing_the_result_file_of_a_cli_run_finds_that_run(tmp_path: Path) -> None:
    from django.core.management import call_command

    project = example_project(tmp_path)
    with pytest.raises(SystemExit):
        call_command(
            "run_agent", str(project.agent_path), "--quiet", "--results-dir", str(tmp_path / "r")
        )
    (result_file,) = (tmp_path / "r").glob("*/*.json")
    outcome = history.runs_import([result_file])
    assert outcome.imported == []
    assert [r.source for r in outcome.already_imported] == [Run.Source.CLI]
    assert Run.objects.count() == 1


def test_three_concurrent_imports_of_the_same_history_add_each_run_once(
    tmp_path: Path, shared_dir: Path, request: pytest.FixtureRequest
) -> None:
    import os
    import sqlite3
    import subprocess
    import sys

    from django.db import connection

    from tests.web.services_helpers import with_migrated_database

    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["HOLODECK_DATA_DIR"] = str(tmp_path / "data")
    if connection.vendor == "postgresql":
        db = connection.settings_dict
        env["DATABASE_URL"] = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    else:  # the test database is in memory: use a file the three processes share
        with_migrated_database(tmp_path / "data", request.getfixturevalue("migrated_sqlite"))
    path = shared_dir / "fixtures" / "holodeck" / "seed_runs.json"
    command = [sys.executable, "manage.py", "import_results", str(path)]
    procs = [
        subprocess.Popen(command, cwd=repo, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outputs = [proc.communicate(timeout=300)[0] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), outputs
    if connection.vendor == "postgresql":
        count = Run.objects.filter(source=Run.Source.IMPORT).count()
    else:
        with sqlite3.connect(tmp_path / "data" / "db.sqlite3") as db_file:
            (count,) = db_file.execute("select count(*) from runs_run").fetchone()
    assert count == 24
    imported = sum(int(out.split()[1]) for out in outputs)
    assert imported == 24, outputs
