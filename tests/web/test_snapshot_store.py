"""Sealed snapshots in the database (runs/services/snapshots.py) and at launch
(runs/services/launch.py): a launch packs the agent directory, validates the agent from the
snapshot, stores it once per distinct tree and records it on the run; what was launched is what
runs, whatever happens to the directory afterwards."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.db.models import ProtectedError
from django.test import Client
from django.urls import reverse

from runs.core.sealing import PackedSnapshot, snapshot_working_tree
from runs.models import AgentSnapshot, Run
from runs.services import launch
from runs.services import snapshots as snapshot_services
from runs.services.regrade import run_regrade_create
from runs.services.snapshots import snapshot_store
from tests.web.services_helpers import example_project, git
from tests.web.snapshot_helpers import (
    edit_prompt,
    metric_outcomes,
    prompt_checked_project,
    run_here,
    verdicts,
)

pytestmark = pytest.mark.django_db(transaction=True)


def manifest_paths(run: Run) -> list[str]:
    assert run.snapshot is not None
    return [row["path"] for row in run.snapshot.manifest]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def manifest_sha(run: Run, path: str) -> str:
    assert run.snapshot is not None
    return next(row["sha256"] for row in run.snapshot.manifest if row["path"] == path)


# --- storing --------------------------------------------------------------------------------


def test_two_launches_of_the_same_tree_share_one_snapshot_of_its_files(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    directory = Path(project.directory)
    (directory / ".gitignore").write_text("scratch/\n")
    (directory / "scratch").mkdir()
    (directory / "scratch" / "notes.txt").write_text("ignored by .gitignore")
    (directory / "results").mkdir()
    (directory / "results" / "old.json").write_text("{}")

    first = launch.run_create(project=project)
    second = launch.run_create(project=project, limit=1)

    assert first.snapshot_id is not None and first.snapshot_id == second.snapshot_id
    assert AgentSnapshot.objects.count() == 1
    snapshot = AgentSnapshot.objects.get()
    assert manifest_paths(first) == [
        ".gitignore",
        "README.md",
        "agent.yaml",
        "graders/program.py",
        "prompts/system.md",
        "tools/finance.py",
        "transcript.yaml",
    ]
    assert (snapshot.file_count, len(snapshot.digest)) == (7, 64)
    assert snapshot.total_bytes == sum(row["size"] for row in snapshot.manifest)
    packed = PackedSnapshot.from_zip(bytes(snapshot.archive), expected_digest=snapshot.digest)
    assert packed.read("agent.yaml") == project.agent_path.read_bytes()


def test_a_launch_at_a_git_ref_records_the_tree_of_that_commit(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    repo = Path(project.directory)
    prompt = repo / "prompts" / "system.md"
    original = prompt.read_text()
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    old = git(repo, "rev-parse", "HEAD")
    prompt.write_text(original + "\nBe terse.\n")
    git(repo, "commit", "-qam", "two")
    prompt.write_text(original + "\nNot committed.\n")  # the working tree differs from both

    past = launch.run_create(project=project, git_ref=old[:10], limit=1)
    head = launch.run_create(project=project, git_ref="HEAD", limit=1)
    now = launch.run_create(project=project, limit=1)

    assert manifest_sha(past, "prompts/system.md") == sha(original)
    assert manifest_sha(head, "prompts/system.md") == sha(original + "\nBe terse.\n")
    assert manifest_sha(now, "prompts/system.md") == sha(original + "\nNot committed.\n")
    assert len({past.snapshot_id, head.snapshot_id, now.snapshot_id}) == 3
    assert past.git_commit == old and past.options["checkout_commit"] == old
    assert git(repo, "worktree", "list").count("\n") == 0  # no worktree is made any more


def test_concurrent_stores_of_one_tree_make_one_row(tmp_path: Path) -> None:
    if connection.vendor == "sqlite" and connection.settings_dict["NAME"] == ":memory:":
        pytest.skip("threads do not share an in-memory SQLite database")
    project = example_project(tmp_path)
    packed = snapshot_working_tree(Path(project.directory))
    barrier = threading.Barrier(4)
    stored: list[int] = []
    errors: list[BaseException] = []

    def store() -> None:
        try:
            barrier.wait()
            stored.append(snapshot_store(packed=packed).pk)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=store) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(stored) == 4 and len(set(stored)) == 1
    assert AgentSnapshot.objects.count() == 1


def test_a_store_that_loses_the_race_returns_the_winners_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = example_project(tmp_path)
    packed = snapshot_working_tree(Path(project.directory))
    winner = snapshot_store(packed=packed)
    # The lookup before the insert misses (the winner committed between the two).
    real_light = snapshot_services._light
    calls: list[int] = []

    def light() -> Any:
        calls.append(1)
        return AgentSnapshot.objects.none() if len(calls) == 1 else real_light()

    monkeypatch.setattr(snapshot_services, "_light", light)
    assert snapshot_store(packed=packed).pk == winner.pk
    assert AgentSnapshot.objects.count() == 1


def test_a_snapshot_cannot_be_deleted_while_a_run_holds_it(tmp_path: Path) -> None:
    run = launch.run_create(project=example_project(tmp_path), limit=1)
    assert run.snapshot is not None
    with pytest.raises(ProtectedError):
        AgentSnapshot.objects.filter(pk=run.snapshot.pk).delete()
    run.delete()
    AgentSnapshot.objects.all().delete()  # no run holds it any more


# --- launch errors ----------------------------------------------------------------------------


def test_a_directory_over_the_snapshot_limits_is_a_launch_error_on_the_form_and_the_api(
    tmp_path: Path,
) -> None:
    from runs.services.tokens import token_create

    project = example_project(tmp_path)
    big = Path(project.directory) / "data" / "dump.bin"
    big.parent.mkdir()
    with big.open("wb") as handle:
        handle.truncate(21 * 1024 * 1024)  # sparse: over the 20 MB per file, nothing written
    staff = User.objects.create_user("lead", password="pw-for-tests", is_staff=True)
    client = Client()
    client.force_login(staff)

    page = client.post(reverse("project_launch", args=[project.pk]), {"git_ref": ""})
    assert page.status_code == 400
    assert "data/dump.bin is 21 MB, over the snapshot limit of 20 MB per file" in page.text
    assert ".gitignore" in page.text  # it says how to leave the file out

    _, secret = token_create(user=staff, name="ci")
    api = client.post(
        "/api/v1/runs",
        {"project": project.pk},
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert api.status_code == 422
    (problem,) = api.json()["detail"]
    assert "data/dump.bin is 21 MB" in problem["msg"]
    assert not Run.objects.exists() and not AgentSnapshot.objects.exists()


def test_a_file_the_agent_reads_outside_its_directory_is_a_launch_error(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    outside = tmp_path / "shared-prompt.md"
    outside.write_text("You answer questions.\n")
    text = project.agent_path.read_text()
    project.agent_path.write_text(text.replace("file: prompts/system.md", f"file: {outside}"))
    with pytest.raises(launch.LaunchError, match=r"shared-prompt\.md is outside the agent dir"):
        launch.run_create(project=project)
    assert not Run.objects.exists() and not AgentSnapshot.objects.exists()


def test_an_invalid_agent_is_validated_from_the_snapshot_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    from runs.core.agentconfig.errors import ConfigError

    project = example_project(tmp_path)
    (Path(project.directory) / "prompts" / "system.md").unlink()
    with pytest.raises(ConfigError, match=r"system\.md"):
        launch.run_create(project=project)
    assert not Run.objects.exists() and not AgentSnapshot.objects.exists()


# --- what runs is what was launched ---------------------------------------------------------


def test_files_edited_after_launch_change_nothing_in_the_launched_run(tmp_path: Path) -> None:
    project = prompt_checked_project(tmp_path)
    directory = Path(project.directory)
    original = launch.run_create(project=project)  # not eager: queued
    run_here(original)
    run = launch.run_create(project=project)
    assert run.snapshot_id == original.snapshot_id

    edit_prompt(directory)
    (directory / "tools" / "finance.py").write_text("raise RuntimeError('edited')\n")
    project.agent_path.write_text("name: [broken\n")
    run_here(run)

    run.refresh_from_db()
    assert verdicts(run) == verdicts(original)
    assert run.status == Run.Status.FAILED and (run.passed_cases, run.failed_cases) == (2, 1)
    assert metric_outcomes(run, "prompt_as_launched") == {"passed"}


def test_a_regrade_records_the_snapshot_of_the_agent_it_grades_with(tmp_path: Path) -> None:
    project = prompt_checked_project(tmp_path)
    original = launch.run_create(project=project)
    run_here(original)
    edit_prompt(Path(project.directory))

    regrade = run_regrade_create(original=Run.objects.get(pk=original.pk), enqueue=False)
    assert regrade.snapshot_id not in (None, original.snapshot_id)
    assert regrade.options["agent_file"] == "agent.yaml"
    run_here(regrade)
    regrade.refresh_from_db()
    # Graded with the edited tree it was created from: the grader reads the edited prompt.
    assert metric_outcomes(regrade, "prompt_as_launched") == {"failed"}


def test_a_cli_run_records_the_snapshot_of_the_working_tree_it_ran(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    dashboard = launch.run_create(project=project, limit=1)
    with pytest.raises(SystemExit):
        call_command("run_agent", str(project.agent_path), "--quiet", "--no-results-file")
    cli = Run.objects.get(source=Run.Source.CLI)
    assert cli.snapshot_id == dashboard.snapshot_id is not None


def test_the_snapshot_limits_come_from_the_settings(
    tmp_path: Path, settings: Any, eager_celery: None
) -> None:
    from runs.services.launch import LaunchError, run_create

    project = example_project(tmp_path)
    settings.HOLODECK_SNAPSHOT_MAX_FILES = 3
    with pytest.raises(LaunchError, match="3 files"):
        run_create(project=project, user=None)
    settings.HOLODECK_SNAPSHOT_MAX_FILES = 2_000
    assert run_create(project=project, user=None).snapshot_id is not None
