"""A real Celery worker process on Redis and PostgreSQL runs a run launched through the view."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse

from runs.management.commands.serve import worker_command
from runs.models import Run, TurnResult
from tests.web.services_helpers import REPO, example_project

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.process]


def services_available() -> str | None:
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
def worker(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    reason = services_available()
    if reason:
        if os.environ.get("HOLODECK_REQUIRE_SERVICES"):
            pytest.fail(f"HOLODECK_REQUIRE_SERVICES is set but {reason}")
        pytest.skip(reason)
    from holodeck_web.celery import app

    app.control.purge()  # no stale tasks from earlier runs
    db = connection.settings_dict
    env = dict(
        os.environ,
        DATABASE_URL=f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:"
        f"{db['PORT'] or 5432}/{db['NAME']}",
        HOLODECK_DATA_DIR=str(tmp_path / "worker-data"),
    )
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
    command = worker_command(2, loglevel="INFO")
    proc = subprocess.Popen(
        [*command, "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=REPO,
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
        log.close()
        if proc.returncode not in (0, -15, None):
            print((tmp_path / "worker.log").read_text()[-4000:])


def test_a_worker_runs_a_run_launched_from_the_view_turn_by_turn(
    tmp_path: Path, worker: subprocess.Popen[bytes]
) -> None:
    project = example_project(tmp_path)
    # A little simulated model latency so the run is observable while it runs.
    text = project.agent_path.read_text()
    latency = "provider: scripted\n  latency_ms: 150"
    project.agent_path.write_text(text.replace("provider: scripted", latency, 1))
    staff = User.objects.create_user("lead", password="pw-for-tests", is_staff=True)
    client = Client()
    client.force_login(staff)
    response = client.post(
        reverse("project_launch", args=[project.pk]),
        {"git_ref": "", "parallel": "2", "limit": "", "case_filter": ""},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get()

    seen_partial = False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        run.refresh_from_db()
        rows = TurnResult.objects.filter(run=run).count()
        if run.status == Run.Status.RUNNING and 0 < rows < run.total_turns:
            seen_partial = True
            assert rows >= run.turns_done  # rows are written with the counter, atomically
        if not run.is_active:
            break
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
        time.sleep(0.05)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED, (tmp_path / "worker.log").read_text()[-3000:]
    assert seen_partial, "turn rows never appeared while the run was running"
    assert (run.total_cases, run.cases_done, run.passed_cases, run.failed_cases) == (3, 3, 2, 1)
    assert run.turns_done == run.total_turns == TurnResult.objects.filter(run=run).count() == 10
    page = client.get(reverse("run_detail", args=[run.pk]))
    assert page.status_code == 200
    assert "northwind_capex_decline" in page.content.decode()


def test_a_run_launched_through_the_api_is_run_by_a_worker_to_the_end(
    tmp_path: Path, worker: subprocess.Popen[bytes]
) -> None:
    from runs.services.tokens import token_create

    project = example_project(tmp_path)
    staff = User.objects.create_user("ci", password="pw-for-tests", is_staff=True)
    _, secret = token_create(user=staff, name="ci")
    headers = {"Authorization": f"Bearer {secret}"}
    client = Client()
    launched = client.post(
        "/api/v1/runs",
        {"project": project.pk, "parallel": 2},
        content_type="application/json",
        headers=headers,
    )
    assert launched.status_code == 201, launched.content
    run_id = launched.json()["id"]
    deadline = time.monotonic() + 120
    progress: dict[str, object] = {}
    while time.monotonic() < deadline:
        progress = client.get(f"/api/v1/runs/{run_id}/progress", headers=headers).json()
        if not progress["active"]:
            break
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
        time.sleep(0.1)
    assert progress["status"] == "failed", (tmp_path / "worker.log").read_text()[-3000:]
    assert (progress["cases_done"], progress["turns_done"], progress["percent"]) == (3, 10, 100)
