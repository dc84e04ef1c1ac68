"""Idempotent launch and re-grade: the launch form's hidden key, the re-grade form's, and the
API's Idempotency-Key header; the same key from the same user answers with the first run."""

from __future__ import annotations

import re
from pathlib import Path
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from runs.models import AgentProject, CaseRow, Run
from runs.services import launch
from runs.services.tokens import token_create
from tests.web.factories import make_user
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/v1/runs"
KEY_FIELD = re.compile(r'<input type="hidden" name="idempotency_key" value="([0-9a-f]{32})"')


@pytest.fixture
def agent_project(tmp_path: Path) -> AgentProject:
    return example_project(tmp_path)


def bearer(user: User) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_create(user=user, name='ci')[1]}"}


def api_launch(client: Client, headers: dict[str, str], project: AgentProject) -> tuple[int, int]:
    response = client.post(
        API, {"project": project.pk, "limit": 1}, content_type="application/json", headers=headers
    )
    assert response.status_code in (200, 201), response.content
    return response.status_code, response.json()["id"]


def test_the_same_launch_form_submitted_twice_makes_one_run(
    staff_client: Client, agent_project: AgentProject
) -> None:
    page = staff_client.get(f"/projects/{agent_project.pk}/launch/")
    (key,) = KEY_FIELD.findall(page.content.decode())
    assert KEY_FIELD.findall(staff_client.get(f"/projects/{agent_project.pk}/launch/").text) != [
        key
    ]  # each render its own key

    form = {"limit": "1", "idempotency_key": key}
    first = staff_client.post(f"/projects/{agent_project.pk}/launch/", form)
    again = staff_client.post(f"/projects/{agent_project.pk}/launch/", form)

    assert first.status_code == again.status_code == 302
    assert first["Location"] == again["Location"]
    assert Run.objects.count() == 1
    assert Run.objects.get().idempotency_key == key


def test_the_same_api_launch_twice_answers_201_then_200_with_the_same_run(
    client: Client, staff: User, agent_project: AgentProject
) -> None:
    headers = {**bearer(staff), "Idempotency-Key": "retry-1"}
    assert api_launch(client, headers, agent_project)[0] == 201
    status, again = api_launch(client, headers, agent_project)

    assert status == 200
    assert Run.objects.count() == 1 and Run.objects.get().pk == again


def test_different_keys_and_no_key_make_different_runs(
    client: Client, staff: User, agent_project: AgentProject
) -> None:
    token = bearer(staff)
    ids = {
        api_launch(client, {**token, "Idempotency-Key": "a"}, agent_project)[1],
        api_launch(client, {**token, "Idempotency-Key": "b"}, agent_project)[1],
        api_launch(client, token, agent_project)[1],
        api_launch(client, token, agent_project)[1],
    }
    assert len(ids) == 4 == Run.objects.count()


def test_a_key_reused_by_another_user_makes_that_users_own_run(
    client: Client, staff: User, agent_project: AgentProject
) -> None:
    other = make_user("second-operator", staff=True)
    _, mine = api_launch(client, {**bearer(staff), "Idempotency-Key": "shared"}, agent_project)
    status, theirs = api_launch(
        client, {**bearer(other), "Idempotency-Key": "shared"}, agent_project
    )

    assert status == 201 and theirs != mine
    assert Run.objects.get(pk=theirs).created_by == other


def test_a_malformed_key_is_a_422_at_the_header(
    client: Client, staff: User, agent_project: AgentProject
) -> None:
    response = client.post(
        API,
        {"project": agent_project.pk},
        content_type="application/json",
        headers={**bearer(staff), "Idempotency-Key": "no spaces allowed"},
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]
    assert Run.objects.count() == 0


def test_two_racing_submits_with_one_key_answer_with_the_winner_and_keep_no_second_run(
    staff: User, agent_project: AgentProject
) -> None:
    winner = launch.run_create(project=agent_project, user=staff, limit=1, idempotency_key="k")
    cases = CaseRow.objects.count()
    # The second submit looked before the first had committed: it seals and opens its own run,
    # whose key the unique constraint then refuses.
    with mock.patch.object(launch, "run_by_idempotency_key", side_effect=[None, winner]):
        answer = launch.run_create(project=agent_project, user=staff, limit=1, idempotency_key="k")

    assert answer.pk == winner.pk
    assert Run.objects.count() == 1 and CaseRow.objects.count() == cases


def test_the_same_regrade_submitted_twice_makes_one_regrade(
    staff_client: Client, staff: User, agent_project: AgentProject, eager_celery: None
) -> None:
    original = launch.run_create(project=agent_project, user=staff, limit=1)
    original.refresh_from_db()
    assert original.status in (Run.Status.PASSED, Run.Status.FAILED)
    (key,) = KEY_FIELD.findall(staff_client.get(f"/runs/{original.pk}/").text)

    url = f"/runs/{original.pk}/regrade/"
    first = staff_client.post(url, {"idempotency_key": key})
    again = staff_client.post(url, {"idempotency_key": key})
    other = staff_client.post(url, {"idempotency_key": key[::-1]})

    assert first.status_code == again.status_code == other.status_code == 302
    assert first["Location"] == again["Location"] != other["Location"]
    assert Run.objects.filter(regrade_of=original).count() == 2


def test_a_launch_is_opened_with_its_key_and_never_patched_afterwards(
    agent_project: AgentProject,
) -> None:
    user = make_user("keyed")
    with CaptureQueriesContext(connection) as queries:
        run = launch.run_create(project=agent_project, user=user, idempotency_key="k-1", limit=1)

    assert Run.objects.get(pk=run.pk).idempotency_key == "k-1"
    updates = [q["sql"] for q in queries if q["sql"].startswith('UPDATE "runs_run"')]
    assert not [sql for sql in updates if "idempotency_key" in sql]
