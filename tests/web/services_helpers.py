"""Helpers for service/task tests: an eager Celery app and example projects."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from holodeck_web.celery import app as celery_app
from runs.models import AgentProject
from runs.services.projects import project_register

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


@pytest.fixture
def eager_celery() -> Iterator[None]:
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = previous


def example_project(tmp_path: Path, name: str = "convfinqa") -> AgentProject:
    """A private copy of an example (so results files and edits stay in tmp)."""
    target = tmp_path / name
    shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns("results"))
    return project_register(agent_path=target / "agent.yaml")


def git(directory: Path, *args: str) -> str:
    """Run git in ``directory`` with a throwaway identity; its output."""
    return subprocess.run(
        ["git", "-C", str(directory), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


# Tests that start processes on the embedded defaults (serve, workers, manage.py commands) give
# them a fresh data folder. `manage.py migrate` in a child costs 3-5 s (Django's start-up and
# every migration): it runs once per test process, and each folder gets a copy of its database.


def embedded_env(data_dir: Path) -> dict[str, str]:
    """This process's environment for a child on the embedded defaults (SQLite and the embedded
    broker) in ``data_dir``: no database, Redis or broker URL, no settings module."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"REDIS_URL", "CELERY_BROKER_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env["HOLODECK_DATA_DIR"] = str(data_dir)
    return env


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder in which ``manage.py migrate`` made the SQLite database and nothing else
    ran; ``with_migrated_database`` copies it."""
    data = tmp_path_factory.mktemp("migrated-data")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=REPO,
        env=embedded_env(data),
        check=True,
        timeout=120,
    )
    return data


def with_migrated_database(data_dir: Path, migrated: Path) -> Path:
    """``data_dir`` (made if absent) holding a copy of the database in ``migrated`` (the
    ``migrated_sqlite`` fixture's folder): what ``manage.py migrate`` would have made there."""
    data_dir.mkdir(parents=True, exist_ok=True)
    for path in migrated.glob("db.sqlite3*"):  # the database, and a write-ahead log if left
        shutil.copy2(path, data_dir / path.name)
    return data_dir


def kill_at_once(procs: Iterable[subprocess.Popen[bytes]]) -> None:
    """SIGKILL each live process and its process group (a Celery worker started in a session of
    its own, with its pool children). For the end of a test whose runs have ended, so nothing
    is in flight: a worker's warm shutdown, even idle, takes 3-5 s; a test that checks a clean
    stop stops its worker itself."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def run_recovered_after_a_silent_worker(run: Any, stale_seconds: int, **case_fields: Any) -> Any:
    """``run`` (ended) as if its first case's worker, on another machine, went silent mid-case
    before the run ended (``case_fields``: more of that case row as it was then), then
    recovered by the sweeper's ``run_recover``; the run as it is after."""
    from django.utils import timezone

    from runs.models import CaseRow, Run
    from runs.services import recovery

    case = run.cases.order_by("index").first()
    assert case is not None
    long_ago = timezone.now() - timezone.timedelta(seconds=stale_seconds + 5)
    CaseRow.objects.filter(pk=case.pk).update(
        status=CaseRow.Status.RUNNING, started_at=long_ago, heartbeat_at=long_ago,
        enqueued_at=long_ago, claimed_by="elsewhere:1:1", **case_fields,
    )  # fmt: skip
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, cases_done=run.cases_done - 1, list_counts=None
    )
    assert recovery.run_recover(run=Run.objects.get(pk=run.pk))
    return Run.objects.get(pk=run.pk)


def example_run_and_rerun(tmp_path: Path) -> tuple[Any, Any]:
    """The example run (with eager Celery: it ran to its end) and a re-run of its case 1, ended
    and linked to it."""
    from runs.services import launch
    from runs.services.rerun import run_rerun

    run = launch.run_create(project=example_project(tmp_path), user=None)
    run.refresh_from_db()
    rerun = run_rerun(original=run, cases=1)
    rerun.refresh_from_db()
    assert rerun.rerun_of_id == run.pk and not rerun.is_live
    return run, rerun
