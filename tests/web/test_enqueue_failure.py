"""A launch whose start message cannot be sent (the broker is down) is no 500: the run is
answered queued, the failure logged, and the sweeper sends it again."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from celery import current_app
from django.contrib.auth.models import User
from django.test import Client
from kombu.exceptions import OperationalError

from runs.models import Run
from runs.services.queue import START_RUN
from runs.services.tokens import token_create
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_launch_whose_message_cannot_be_sent_answers_201_with_the_queued_run(
    client: Client, staff: User, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = example_project(tmp_path)
    headers = {"Authorization": f"Bearer {token_create(user=staff, name='ci')[1]}"}
    task = current_app.tasks[START_RUN]
    refused = OperationalError("[Errno 111] Connection refused")
    with mock.patch.object(task, "delay", side_effect=refused) as delay:
        response = client.post(
            "/api/v1/runs", {"project": project.pk, "limit": 1},
            content_type="application/json", headers=headers,
        )  # fmt: skip

    assert delay.called
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.status == Run.Status.QUEUED
    assert "the sweeper will send it again" in caplog.text
