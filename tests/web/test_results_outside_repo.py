"""Command-line runs and the CI gate leave the project's git tree as they found it: their result
files go to the data folder (or ``--results-dir``), and a ``results/`` folder beside agent.yaml
(HoloDeck's CLI writes one) does not make a launch "dirty"."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from runs.models import AgentProject, Run
from runs.services.launch import run_create
from tests.web.services_helpers import example_project, git

pytestmark = pytest.mark.django_db(transaction=True)


def committed_project(tmp_path: Path) -> AgentProject:
    """The example in a fresh repository, committed without any bytecode cache (and with no
    .gitignore for one), so a cache written later would show."""
    project = example_project(tmp_path)
    directory = project.agent_path.parent
    for cache in list(directory.rglob("__pycache__")):
        shutil.rmtree(cache)
    git(directory, "init", "-q", "-b", "main")
    git(directory, "add", "-A")
    git(directory, "commit", "-q", "-m", "agent")
    return project


def test_run_agent_and_gate_leave_a_clean_repository_clean_and_the_next_launch_not_dirty(
    tmp_path: Path, eager_celery: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as on a machine that writes .pyc
    project = committed_project(tmp_path)
    directory = project.agent_path.parent
    with pytest.raises(SystemExit):
        call_command("run_agent", str(project.agent_path), "--quiet")
    with pytest.raises(SystemExit):
        call_command("gate", "--agent", str(project.agent_path), "--baseline", "parent-commit")
    assert git(directory, "status", "--porcelain") == ""
    assert list((Path(settings.DATA_DIR) / "results" / "convfinqa-analyst").glob("*.json"))
    run = run_create(project=project, user=None)
    assert run.git_dirty is False
    assert Run.objects.filter(source=Run.Source.CLI).count() == 2


def test_a_results_folder_beside_agent_yaml_does_not_make_a_launch_dirty(
    tmp_path: Path, eager_celery: None
) -> None:
    project = committed_project(tmp_path)
    directory = project.agent_path.parent
    (directory / "results" / "convfinqa-analyst").mkdir(parents=True)
    (directory / "results" / "convfinqa-analyst" / "old.json").write_text("{}")
    run = run_create(project=project, user=None)
    assert run.git_dirty is False
    (directory / "prompts" / "system.md").write_text("Changed.\n")
    assert run_create(project=project, user=None).git_dirty is True


def test_results_dir_puts_the_result_file_where_it_is_asked(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    target = tmp_path / "elsewhere"
    with pytest.raises(SystemExit):
        call_command("run_agent", str(project.agent_path), "--quiet", "--results-dir", str(target))
    assert len(list(target.glob("convfinqa-analyst/*.json"))) == 1
