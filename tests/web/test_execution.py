"""The agent of a run is loaded once per process per run (runs/services/execution.py), not once
per case: a run's cases share it, another run loads its own."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runs.models import Run
from runs.services import execution, launch
from tests.web.factories import RunSpec, build_run, make_project
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The ids of the runs whose agent this process loaded, in order (the real loader runs)."""
    loaded: list[int] = []
    real_load: Callable[[Run, contextlib.ExitStack], Any] = execution._agent_load

    def counting_load(run: Run, stack: contextlib.ExitStack) -> Any:
        loaded.append(run.pk)
        return real_load(run, stack)

    execution.run_agents_forget()  # nothing kept from an earlier test
    monkeypatch.setattr(execution, "_agent_load", counting_load)
    yield loaded
    execution.run_agents_forget()


def test_a_runs_cases_share_one_agent_load_and_the_next_run_loads_its_own(
    tmp_path: Path, eager_celery: None, loads: list[int]
) -> None:
    project = example_project(tmp_path)

    first = launch.run_create(project=project, parallel=2)
    second = launch.run_create(project=project, parallel=1)

    for run in (first, second):
        run.refresh_from_db()
        assert run.cases_done == run.total_cases == 3  # three cases ran in this process
    assert loads == [first.pk, second.pk]


def test_a_kept_agent_is_reused_until_its_run_is_forgotten(
    monkeypatch: pytest.MonkeyPatch, loads: list[int]
) -> None:
    # A stand-in agent per load: this test is about the cache, not about loading.
    monkeypatch.setattr(
        execution, "_agent_load", lambda run, stack: loads.append(run.pk) or object()
    )
    project = make_project()
    one, other = (build_run(project, RunSpec(cases=2, status=Run.Status.RUNNING)) for _ in "ab")

    agent = execution.run_agent(one)
    assert all(execution.run_agent(one) is agent for _ in range(5))
    other_agent = execution.run_agent(other)
    assert execution.run_agent(one) is agent  # another run's load did not replace it
    assert other_agent is not agent
    assert loads == [one.pk, other.pk]

    execution.run_agent_forget(one.pk)  # its run ended
    assert execution.run_agent(one) is not agent
    assert loads == [one.pk, other.pk, one.pk]
