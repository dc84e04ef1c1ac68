"""A worker that lacks the project's directory runs a launched run from its snapshot: a real Celery
worker process on Redis and PostgreSQL, started in another working directory with another data
folder (so another snapshot cache) after the project's directory was renamed and its prompt
edited, runs the whole run; its verdicts are those of a run of the original tree."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from holodeck_web.celery import app as celery_app
from runs.models import Run
from runs.services import launch
from tests.web.services_helpers import kill_at_once
from tests.web.snapshot_helpers import (
    edit_prompt,
    metric_outcomes,
    prompt_checked_project,
    verdicts,
)
from tests.web.worker_helpers import Workers, require_redis_and_postgresql

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.process]


def test_a_worker_without_the_projects_directory_runs_the_launched_run_from_its_snapshot(
    tmp_path: Path, eager_celery: None
) -> None:
    require_redis_and_postgresql()
    project = prompt_checked_project(tmp_path)
    original = launch.run_create(project=project)  # eager: the original tree, run in this process
    celery_app.conf.task_always_eager = False  # queued from here on; eager_celery puts it back
    run = launch.run_create(project=project, parallel=2)  # queued on Redis, nothing runs yet
    assert run.status == Run.Status.QUEUED and run.snapshot_id == original.snapshot_id

    moved = Path(project.directory).rename(tmp_path / "convfinqa-moved")
    edit_prompt(moved)
    assert not Path(project.directory).exists()

    elsewhere = tmp_path / "elsewhere"  # a working directory and data folder not the test's
    elsewhere.mkdir()
    with Workers(tmp_path, cwd=elsewhere) as workers:
        worker = workers.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            run.refresh_from_db()
            if not run.is_active:
                break
            workers.assert_alive(worker)
            time.sleep(0.1)
        kill_at_once(workers.procs)  # the run has ended: no warm shutdown to wait for

    run.refresh_from_db()
    original.refresh_from_db()
    assert run.status == original.status == Run.Status.FAILED, workers.logs()
    assert (run.cases_done, run.passed_cases, run.failed_cases, run.turns_done) == (3, 2, 1, 10)
    assert verdicts(run) == verdicts(original)
    assert metric_outcomes(run, "prompt_as_launched") == {"passed"}
    assert run.snapshot is not None
    unpacked = workers.data_dir / "snapshots" / run.snapshot.digest / "agent.yaml"
    assert unpacked.is_file()  # in the worker's own snapshot cache
