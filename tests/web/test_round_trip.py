"""Round trips of result files: every export names its run, so importing it where the run
already is adds nothing; an imported file whose summary contradicts its results is imported
with the results as the truth and a warning on the run page."""

from __future__ import annotations

import json
import os
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from runs.core.agentconfig.loader import load_agent
from runs.core.wire.holodeck_io import dump_eval_run, load_eval_runs
from runs.core.wire.round_trip import ENVIRONMENT_KEY
from runs.models import AgentProject, CaseRow, Run
from runs.recorder import case_claim
from runs.selectors import run_eval_run
from runs.services import history, launch
from runs.services.cli import RunStore
from runs.services.recovery import cli_run_recover
from runs.services.tokens import token_create
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db(transaction=True)

MAX_BYTES = 10_000_000


def reimport(name: str, content: bytes | str) -> history.SourceImport:
    data = content.encode() if isinstance(content, str) else content
    (report,) = history.uploads_import([history.Upload(name, data)], max_unpacked_bytes=MAX_BYTES)
    return report


def named_run(content: bytes | str) -> str:
    return str(json.loads(content)["report"]["environment"][ENVIRONMENT_KEY])


@pytest.fixture
def dashboard_run(tmp_path: Path, eager_celery: None) -> Run:
    run = launch.run_create(project=example_project(tmp_path))
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED  # it ran: the example has a failing case
    return run


# --- every export names its run -----------------------------------------------------------------


def test_a_dashboard_run_exported_from_the_page_and_the_api_imports_again_as_the_same_run(
    dashboard_run: Run, viewer_client: Client, viewer: User
) -> None:
    _, secret = token_create(user=viewer, name="ci")
    page = viewer_client.get(reverse("run_export", args=[dashboard_run.pk]))
    api = viewer_client.get(
        f"/api/v1/runs/{dashboard_run.pk}/export",
        {"format": "json"},
        headers={"Authorization": f"Bearer {secret}"},
    )
    for name, response in (("page.json", page), ("api.json", api)):
        assert response.status_code == 200, name
        assert named_run(response.content) == str(dashboard_run.uid), name
        report = reimport(name, response.content)
        assert report.errors == [] and report.imported == [], name
        assert [run.pk for run in report.already_imported] == [dashboard_run.pk], name
    assert Run.objects.count() == 1


def test_the_result_files_of_a_cli_run_import_again_as_that_run(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    output = tmp_path / "out" / "run.json"
    with pytest.raises(SystemExit):
        call_command(
            "run_agent", str(project.agent_path), "--quiet", "--output", str(output),
            "--results-dir", str(tmp_path / "r"),
        )  # fmt: skip
    stored = Run.objects.get()
    (results_file,) = (tmp_path / "r").glob("*/*.json")
    for file in (results_file, output):
        assert named_run(file.read_text()) == str(stored.uid), file.name
        outcome = history.runs_import([file])
        assert outcome.imported == [], file.name
        assert [run.pk for run in outcome.already_imported] == [stored.pk], file.name
    assert Run.objects.count() == 1


def test_an_export_imported_elsewhere_keeps_its_identity_and_comes_back_recognised(
    dashboard_run: Run,
) -> None:
    exported = dump_eval_run(run_eval_run(run=dashboard_run))
    uid = dashboard_run.uid
    dashboard_run.delete()  # the file is now one this database never held: "elsewhere"
    (elsewhere,) = reimport("export.json", exported).imported
    assert elsewhere.uid == uid and elsewhere.source == Run.Source.IMPORT
    back = dump_eval_run(run_eval_run(run=elsewhere))
    assert named_run(back) == str(uid)
    again = reimport("back.json", back)
    assert again.imported == [] and [run.pk for run in again.already_imported] == [elsewhere.pk]
    assert Run.objects.count() == 1


def test_a_file_naming_a_run_in_no_uuid_form_imports_as_a_new_run(shared_dir: Path) -> None:
    data = json.loads((shared_dir / "fixtures" / "holodeck" / "seed_runs.json").read_text())[0]
    data["report"]["environment"][ENVIRONMENT_KEY] = "not-a-uuid"
    (run,) = reimport("edited.json", json.dumps(data)).imported
    assert isinstance(run.uid, uuid.UUID)


def test_a_cli_run_not_stored_still_names_a_run_in_its_result_file(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    with pytest.raises(SystemExit):
        call_command(
            "run_agent", str(project.agent_path), "--quiet", "--no-store",
            "--results-dir", str(tmp_path / "r"),
        )  # fmt: skip
    (results_file,) = (tmp_path / "r").glob("*/*.json")
    named = named_run(results_file.read_text())
    (run,) = history.runs_import([results_file]).imported
    assert str(run.uid) == named
    assert history.runs_import([results_file]).already_imported == [run]


# --- a summary contradicting its results ----------------------------------------------------


@pytest.fixture
def seed_runs(shared_dir: Path) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(
        (shared_dir / "fixtures" / "holodeck" / "seed_runs.json").read_text()
    )
    return runs


def test_a_file_whose_summary_contradicts_its_results_is_imported_as_its_results_say(
    seed_runs: list[dict[str, Any]], viewer_client: Client
) -> None:
    data = seed_runs[23]
    (original,) = load_eval_runs(data)
    summary = original.report.summary
    assert (summary.total_tests, summary.passed, summary.failed) == (12, 11, 1)
    assert all(result.passed for result in original.report.results)

    (run,) = reimport("contradiction.json", json.dumps(data)).imported
    run.refresh_from_db()
    assert run.status == Run.Status.PASSED
    assert (run.total_cases, run.passed_cases, run.failed_cases, run.pass_rate) == (12, 12, 0, 100)
    (warning,) = run.options["warnings"]
    assert "says 11 passed and 1 failed of 12" in warning
    assert "say 12 passed and 0 failed of 12" in warning

    page = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert "1 warning about this result file" in page
    assert "its results say 12 passed and 0 failed of 12 (100%)" in page
    exported = run_eval_run(run=run).report.summary
    assert (exported.passed, exported.failed, exported.pass_rate) == (12, 0, 100)


def test_a_summary_that_differs_from_its_results_only_by_rounding_gives_no_warning(
    seed_runs: list[dict[str, Any]], viewer_client: Client
) -> None:
    data = seed_runs[0]
    assert data["report"]["summary"]["pass_rate"] == 58.0  # 7 of 12, HoloDeck's rounding
    (run,) = reimport("rounded.json", json.dumps(data)).imported
    run.refresh_from_db()
    assert run.options.get("warnings", []) == []
    assert (
        "about this result file" not in viewer_client.get(reverse("run_detail", args=[run.pk])).text
    )


# --- recovery writes through the recorder -------------------------------------------------------


def test_the_cases_a_dead_cli_command_left_are_errored_cases(tmp_path: Path) -> None:
    project: AgentProject = example_project(tmp_path)
    store = RunStore.open(
        agent=load_agent(project.agent_path),
        indices=[0, 1, 2],
        limit=None,
        case_filter="",
        git=None,
        cli_args=[],
        warn=print,
    )
    assert store is not None and store.run is not None
    run = store.run
    assert case_claim(CaseRow.objects.get(run=run, index=0)) == 1  # running when it died
    # Our own pid with another start time: a process of this host that is gone.
    dead = f"{socket.gethostname()}:{os.getpid()}:1"
    Run.objects.filter(pk=run.pk).update(options={**run.options, "owner": dead})
    run.refresh_from_db()

    assert cli_run_recover(run=run)
    run.refresh_from_db()
    assert run.status == Run.Status.ERROR
    cases = CaseRow.objects.filter(run=run)
    assert {(case.status, case.outcome) for case in cases} == {(CaseRow.Status.ERROR, "error")}
    assert run.summary["cases"]["error"] == 3 and (run.failed_cases, run.errored_cases) == (0, 3)
