"""An idempotency key answers only the request it was first sent with (issue 38, item 8): its
user, its endpoint (launch, re-run, re-grade), its target (the project, the original run) and
its options. The same key with another request is a 422 (the API) or the page's message; a
retry of the same request answers 200 with the first run, also when retries race."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client

from runs.models import AgentProject, Run
from runs.services import launch
from runs.services.tokens import token_create
from tests.web.factories import build_run, make_project
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/v1/runs"
KEY = "retry-7f3a"


@pytest.fixture
def agent_project(tmp_path: Path) -> AgentProject:
    return example_project(tmp_path)


@pytest.fixture
def token(staff: User) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_create(user=staff, name='ci')[1]}"}


def post(client: Client, path: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    return client.post(
        f"{API}{path}",
        body,
        content_type="application/json",
        headers={**headers, "Idempotency-Key": KEY},
    )


def refusal(response: Any) -> str:
    assert response.status_code == 422, response.content
    (problem,) = response.json()["detail"]
    assert problem["loc"] == ["header", "Idempotency-Key"]
    return str(problem["msg"])


def said(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


@pytest.fixture
def settled(agent_project: AgentProject, staff: User, eager_celery: None) -> tuple[Run, Run]:
    """Two settled runs of the project, each with its snapshot (so each can be re-run)."""
    first = launch.run_create(project=agent_project, user=staff, limit=2)
    second = launch.run_create(project=agent_project, user=staff, limit=2)
    return first, second


def test_a_reruns_key_answers_only_a_rerun_of_the_same_run_and_cases(
    client: Client, token: dict[str, str], settled: tuple[Run, Run]
) -> None:
    first, second = settled
    created = post(client, f"/{first.pk}/rerun", {"case": 0}, token)
    assert created.status_code == 201
    rerun = created.json()["id"]

    other_run = refusal(post(client, f"/{second.pk}/rerun", {"case": 0}, token))
    other_case = refusal(post(client, f"/{first.pk}/rerun", {"case": 1}, token))
    again = post(client, f"/{first.pk}/rerun", {"case": 0}, token)

    assert f"first sent with a re-run of run {first.pk} (run {rerun})" in other_run
    assert f"cannot be used for a re-run of run {second.pk}" in other_run
    assert f"a re-run of run {first.pk} with other options" in other_case
    assert again.status_code == 200 and again.json()["id"] == rerun
    assert Run.objects.filter(rerun_of__isnull=False).count() == 1


def test_a_launchs_key_never_answers_a_rerun(
    client: Client, staff: User, token: dict[str, str], agent_project: AgentProject
) -> None:
    launched = launch.run_create(project=agent_project, user=staff, limit=1, idempotency_key=KEY)
    original = build_run()

    message = refusal(post(client, f"/{original.pk}/rerun", {"cases": "failed"}, token))

    assert f"first sent with a launch of project {agent_project.pk} (run {launched.pk})" in message
    assert Run.objects.count() == 2


def test_a_launchs_key_with_another_project_or_other_options_is_a_422(
    client: Client, token: dict[str, str], agent_project: AgentProject
) -> None:
    other_project = make_project()
    assert post(client, "", {"project": agent_project.pk, "limit": 1}, token).status_code == 201

    elsewhere = refusal(post(client, "", {"project": other_project.pk, "limit": 1}, token))
    more_cases = refusal(post(client, "", {"project": agent_project.pk, "limit": 2}, token))

    assert f"a launch of project {agent_project.pk} (run " in elsewhere
    assert f"a launch of project {agent_project.pk} with other options" in more_cases
    assert "send a new key with each new request" in more_cases
    assert Run.objects.count() == 1


def test_six_racing_launches_with_one_key_answer_201_once_and_200_five_times(
    client: Client, token: dict[str, str], agent_project: AgentProject
) -> None:
    """Each retry looks for the key before the first has committed (as threads racing against
    PostgreSQL do): it seals and opens a run of its own, which the unique key refuses."""
    real = launch.run_by_idempotency_key
    first_look = {"done": False}

    def look(**kwargs: Any) -> Run | None:
        if not first_look["done"]:
            first_look["done"] = True
            return None
        return real(**kwargs)

    statuses, ids = [], set()
    with mock.patch.object(launch, "run_by_idempotency_key", side_effect=look):
        for _ in range(6):
            first_look["done"] = False
            response = post(client, "", {"project": agent_project.pk, "limit": 1}, token)
            statuses.append(response.status_code)
            ids.add(response.json()["id"])

    assert statuses == [201, 200, 200, 200, 200, 200]
    assert len(ids) == 1 and Run.objects.count() == 1


def test_the_rerun_button_with_another_requests_key_says_so_on_the_page(
    staff_client: Client, staff: User, agent_project: AgentProject
) -> None:
    launched = launch.run_create(project=agent_project, user=staff, limit=1, idempotency_key=KEY)
    original = build_run()

    response = staff_client.post(
        f"/runs/{original.pk}/rerun/", {"cases": "failed", "idempotency_key": KEY}
    )

    assert response.status_code == 302 and response["Location"] == f"/runs/{original.pk}/"
    (message,) = said(response)
    assert message.startswith(
        f"Cannot re-run: this idempotency key was first sent with a launch of project "
        f"{agent_project.pk} (run {launched.pk})"
    )
    assert Run.objects.count() == 2


def test_the_regrade_button_with_another_requests_key_says_so_on_the_page(
    staff_client: Client, staff: User, agent_project: AgentProject
) -> None:
    launch.run_create(project=agent_project, user=staff, limit=1, idempotency_key=KEY)
    original = build_run(project=agent_project)

    response = staff_client.post(f"/runs/{original.pk}/regrade/", {"idempotency_key": KEY})

    assert response.status_code == 302 and response["Location"] == f"/runs/{original.pk}/"
    (message,) = said(response)
    assert message.startswith("Cannot re-grade: this idempotency key was first sent with a launch")
    assert not Run.objects.filter(regrade_of=original).exists()


def test_the_launch_form_resubmitted_with_other_options_says_so(
    staff_client: Client, agent_project: AgentProject
) -> None:
    url = f"/projects/{agent_project.pk}/launch/"
    first = staff_client.post(url, {"limit": "1", "idempotency_key": KEY})
    assert first.status_code == 302

    again = staff_client.post(url, {"limit": "2", "idempotency_key": KEY})

    assert "this idempotency key was first sent with a launch of project" in again.text
    assert "with other options" in again.text
    assert Run.objects.count() == 1


def test_a_key_stored_before_scopes_gets_its_scope_and_still_answers_its_own_request(
    staff: User, agent_project: AgentProject
) -> None:
    run = launch.run_create(project=agent_project, user=staff, limit=1, idempotency_key=KEY)
    rerun = build_run(rerun_of=run, created_by=staff, idempotency_key="k-rerun")
    Run.objects.filter(pk=run.pk).update(idempotency_scope="", idempotency_fingerprint="")
    migration = importlib.import_module("runs.migrations.0018_idempotency_scope")

    migration.fill_scopes(apps, SimpleNamespace(connection=connection))

    run.refresh_from_db()
    rerun.refresh_from_db()
    assert run.idempotency_scope == f"launch:project:{agent_project.pk}"
    assert rerun.idempotency_scope == f"re-run:run:{run.pk}"
    again = launch.run_create(project=agent_project, user=staff, limit=3, idempotency_key=KEY)
    assert again.pk == run.pk and again.replayed
    with pytest.raises(launch.IdempotencyKeyReused):
        launch.run_create(project=make_project(), user=staff, idempotency_key=KEY)


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="threads racing need PostgreSQL (DATABASE_URL)"
)
def test_six_launches_racing_in_threads_on_postgresql_answer_201_once_and_200_five_times(
    token: dict[str, str], agent_project: AgentProject
) -> None:
    import threading

    from django.db import connections

    start = threading.Barrier(6)
    answers: list[tuple[int, int]] = []

    def launch_once() -> None:
        try:
            start.wait(timeout=30)
            response = post(Client(), "", {"project": agent_project.pk, "limit": 1}, token)
            answers.append((response.status_code, response.json()["id"]))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=launch_once) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(status for status, _ in answers) == [200, 200, 200, 200, 200, 201]
    assert len({run_id for _, run_id in answers}) == 1 and Run.objects.count() == 1
