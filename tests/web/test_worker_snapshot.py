"""A worker that lacks the project's directory runs a launched run from its snapshot: a real Celery
worker process on Redis and PostgreSQL, started in another working directory with another data
folder (so another snapshot cache) after the project's directory was renamed and its prompt
edited, runs the whole run; its verdicts are those of a run of the original tree."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from holodeck_web.celery import app as celery_app
from runs.management.commands.serve import worker_command
from runs.models import Run
from runs.services import launch
from tests.web.services_helpers import REPO
from tests.web.snapshot_helpers import (
    edit_prompt,
    metric_outcomes,
    prompt_checked_project,
    verdicts,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.process]


def services_missing() -> str | None:
    """None when PostgreSQL and Redis are configured and reachable, else why not."""
    if connection.vendor != "postgresql":
        return "DATABASE_URL does not point at PostgreSQL"
    url = os.environ.get("REDIS_URL") or os.environ.get("CELERY_BROKER_URL")
    if not url or not url.startswith("redis"):
        return "REDIS_URL is not set"
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        return f"Redis at {url} is unreachable: {exc}"
    return None


@pytest.fixture
def services() -> None:
    reason = services_missing()
    if reason:
        if os.environ.get("HOLODECK_REQUIRE_SERVICES"):
            pytest.fail(f"HOLODECK_REQUIRE_SERVICES is set but {reason}")
        pytest.skip(reason)
    celery_app.control.purge()  # no stale tasks from earlier runs


@contextlib.contextmanager
def eager() -> Iterator[None]:
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = previous


@contextlib.contextmanager
def worker_elsewhere(workdir: Path, data_dir: Path, log_path: Path) -> Iterator[subprocess.Popen]:
    """A Celery worker whose working directory and data folder are not the test's."""
    db = connection.settings_dict
    env = {k: v for k, v in os.environ.items() if k != "HOLODECK_SNAPSHOT_CACHE"}
    env.update(
        DATABASE_URL=f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:"
        f"{db['PORT'] or 5432}/{db['NAME']}",
        HOLODECK_DATA_DIR=str(data_dir),
        PYTHONPATH=str(REPO),  # the project's code, not its working directory
    )
    workdir.mkdir()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*worker_command(2, loglevel="INFO"), "--without-gossip", "--without-mingle"],
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_a_worker_without_the_projects_directory_runs_the_launched_run_from_its_snapshot(
    tmp_path: Path, services: None
) -> None:
    project = prompt_checked_project(tmp_path)
    with eager():
        original = launch.run_create(project=project)  # the original tree, run in this process
    run = launch.run_create(project=project, parallel=2)  # queued on Redis, nothing runs yet
    assert run.status == Run.Status.QUEUED and run.snapshot_id == original.snapshot_id

    moved = Path(project.directory).rename(tmp_path / "convfinqa-moved")
    edit_prompt(moved)
    assert not Path(project.directory).exists()

    log = tmp_path / "worker.log"
    data_dir = tmp_path / "worker-data"
    with worker_elsewhere(tmp_path / "elsewhere", data_dir, log) as worker:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            run.refresh_from_db()
            if not run.is_active:
                break
            assert worker.poll() is None, log.read_text()[-3000:]
            time.sleep(0.1)

    run.refresh_from_db()
    original.refresh_from_db()
    assert run.status == original.status == Run.Status.FAILED, log.read_text()[-3000:]
    assert (run.cases_done, run.passed_cases, run.failed_cases, run.turns_done) == (3, 2, 1, 10)
    assert verdicts(run) == verdicts(original)
    assert metric_outcomes(run, "prompt_as_launched") == {"passed"}
    assert run.snapshot is not None
    assert (data_dir / "snapshots" / run.snapshot.digest / "agent.yaml").is_file()  # unpacked
