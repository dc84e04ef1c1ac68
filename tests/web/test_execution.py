"""The agent of a run is loaded from its snapshot (runs/services/run_agents.py), once per process
per snapshot, not once per case: a run's cases share it, and so do runs of the same tree; the
project's directory is never read. Runs without a snapshot (launched before snapshots existed)
keep the old way: one load per run, from the project's directory."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runs.models import Run
from runs.services import launch, run_agents
from tests.web.factories import RunSpec, build_run, make_project
from tests.web.services_helpers import example_project
from tests.web.snapshot_helpers import run_here, verdicts

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The ids of the runs whose agent this process loaded from a snapshot, in order (the real
    loader runs)."""
    loaded: list[int] = []
    real_load: Callable[[Run], Any] = run_agents._agent_load

    def counting_load(run: Run) -> Any:
        loaded.append(run.pk)
        return real_load(run)

    run_agents.run_agents_forget()  # nothing kept from an earlier test
    monkeypatch.setattr(run_agents, "_agent_load", counting_load)
    yield loaded
    run_agents.run_agents_forget()


def test_runs_of_one_tree_share_one_agent_load_and_an_edited_tree_loads_its_own(
    tmp_path: Path, eager_celery: None, loads: list[int]
) -> None:
    project = example_project(tmp_path)

    first = launch.run_create(project=project, parallel=2)
    second = launch.run_create(project=project, parallel=2)
    prompt = Path(project.directory) / "prompts" / "system.md"
    prompt.write_text(prompt.read_text() + "\nAnswer in French.\n")
    third = launch.run_create(project=project, parallel=2)

    for run in (first, second, third):
        run.refresh_from_db()
        assert run.cases_done == run.total_cases == 3  # three cases ran in this process
    assert first.snapshot_id == second.snapshot_id != third.snapshot_id
    assert loads == [first.pk, third.pk]


def test_a_run_runs_from_its_snapshot_when_the_projects_directory_is_gone(
    tmp_path: Path, settings: Any, loads: list[int]
) -> None:
    project = example_project(tmp_path)
    expected = launch.run_create(project=project)  # not eager: queued, nothing ran yet
    run_here(expected)
    # Launched once the first has ended: a slot that finishes a case starts a queued run itself
    # (runs.services.execution.case_next_fair), and this one must run in a process of its own.
    run = launch.run_create(project=project)
    # The second run is run as a worker on another machine would: no project directory, and a
    # cache of its own, so the snapshot is unpacked from the database.
    run_agents.run_agents_forget()
    shutil.rmtree(project.directory)
    settings.HOLODECK_SNAPSHOT_CACHE = str(tmp_path / "elsewhere-cache")
    run_here(run)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.cases_done == 3
    assert verdicts(run) == verdicts(expected)
    assert loads == [expected.pk, run.pk]
    agent = run_agents.run_agent(run)
    assert agent.base_dir.is_relative_to(tmp_path / "elsewhere-cache")
    assert run.agent_config_path == str(project.agent_path)  # pages show the project's path


def test_a_kept_agent_of_a_run_without_a_snapshot_is_kept_until_its_run_is_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A stand-in agent per load: this test is about the cache, not about loading.
    loaded: list[int] = []

    def load(run: Run, stack: contextlib.ExitStack) -> object:
        loaded.append(run.pk)
        return object()

    run_agents.run_agents_forget()
    monkeypatch.setattr(run_agents, "_agent_load_legacy", load)
    project = make_project()
    one, other = (build_run(project, RunSpec(cases=2, status=Run.Status.RUNNING)) for _ in "ab")

    agent = run_agents.run_agent(one)
    assert all(run_agents.run_agent(one) is agent for _ in range(5))
    other_agent = run_agents.run_agent(other)
    assert run_agents.run_agent(one) is agent  # another run's load did not replace it
    assert other_agent is not agent
    assert loaded == [one.pk, other.pk]

    run_agents.run_agent_forget(one.pk)  # its run ended
    assert run_agents.run_agent(one) is not agent
    assert loaded == [one.pk, other.pk, one.pk]
    run_agents.run_agents_forget()
