"""A real Celery worker process on Redis and PostgreSQL runs a run launched through the view."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import Run, TurnRow
from tests.web.services_helpers import example_project, kill_at_once
from tests.web.worker_helpers import (
    Workers,
    assert_run_page_shows_the_cases,
    require_redis_and_postgresql,
    run_from_the_view_to_the_end,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.process]


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    require_redis_and_postgresql()
    with Workers(tmp_path) as pool:
        yield pool
        kill_at_once(pool.procs)  # the run has ended: no warm shutdown to wait for


def test_a_worker_runs_a_run_launched_from_the_view_turn_by_turn(
    tmp_path: Path, workers: Workers
) -> None:
    client, run, seen_partial = run_from_the_view_to_the_end(tmp_path, workers, seconds=120)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED, workers.logs()
    assert seen_partial, "turn rows never appeared while the run was running"
    assert (run.total_cases, run.cases_done, run.passed_cases, run.failed_cases) == (3, 3, 2, 1)
    assert run.turns_done == run.total_turns == TurnRow.objects.filter(run=run).count() == 10
    assert_run_page_shows_the_cases(client, run)


def test_a_run_launched_through_the_api_is_run_by_a_worker_to_the_end(
    tmp_path: Path, workers: Workers
) -> None:
    worker = workers.start()
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
        workers.assert_alive(worker)
        time.sleep(0.1)
    assert progress["status"] == "failed", workers.logs()
    assert (progress["cases_done"], progress["turns_done"], progress["percent"]) == (3, 10, 100)
