"""A run keeps the warnings of the agent.yaml it was launched with, and its page shows them."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from runs.services.launch import run_create
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db


def test_the_run_page_shows_holodeck_fields_that_have_no_effect(
    tmp_path: Path, viewer_client: Client
) -> None:
    project = example_project(tmp_path)
    text = project.agent_path.read_text()
    project.agent_path.write_text(text + "\nobservability: {enabled: true}\n")
    run = run_create(project=project)  # queued: the warnings are kept from the launch
    assert any(line.startswith("observability") for line in run.options["warnings"])
    page = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert "warning" in page and "observability: accepted for HoloDeck compatibility" in page
