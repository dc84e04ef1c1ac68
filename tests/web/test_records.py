"""Whole reports in and out of the database: HoloDeck history import and result-file export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runs import selectors
from runs.services import history, launch
from runs.models import MetricResult, Run, TurnResult
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db(transaction=True)


def test_holodeck_history_imports_as_runs(shared_dir: Path) -> None:
    runs = history.runs_import([shared_dir / "fixtures" / "holodeck" / "seed_runs.json"]).imported
    assert len(runs) == 24
    first = Run.objects.get(pk=runs[0].pk)
    assert first.source == Run.Source.IMPORT
    assert first.total_cases == first.cases.count()
    assert first.passed_cases + first.failed_cases == first.total_cases
    assert MetricResult.objects.filter(run=first, kind="geval").exists()
    assert TurnResult.objects.filter(run=first).count() == first.total_cases


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

    from runs.report.holodeck_io import load_eval_runs

    path = shared_dir / "fixtures" / "holodeck" / "seed_runs.json"
    (original,) = load_eval_runs(json.loads(path.read_text())[:1])
    (run,) = history.runs_import([path]).imported[:1]
    exported = selectors.run_eval_run(run=run)
    assert exported.report.results == original.report.results
    assert exported.metadata == original.metadata


def test_a_dashboard_run_exports_its_turns(tmp_path: Path, eager_celery: None) -> None:
    from runs.report.holodeck_io import dump_eval_run, load_eval_runs

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
