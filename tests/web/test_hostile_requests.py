"""Hostile or malformed requests get a 4xx with a message, never a 500."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import AgentProject
from tests.web.factories import PASSWORD, build_run, failing_case, make_user

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "params, field, message",
    [
        ({"project": str(2**64)}, "project", "must be between"),
        ({"project": "abc"}, "project", "&#x27;abc&#x27; is not a whole number"),
        ({"commit": "ab\x00cd"}, "commit", "must not contain a NUL character"),
        ({"agent": "weather\x00"}, "agent", "must not contain a NUL character"),
        ({"status": "exploded"}, "status", "must be one of"),
        ({"commit": "a" * 65}, "commit", "is longer than 64 characters"),
    ],
)
def test_a_bad_run_list_filter_is_a_400_that_names_it_at_its_field(
    viewer_client: Client, params: dict[str, str], field: str, message: str
) -> None:
    response = viewer_client.get(reverse("run_list"), params)
    assert response.status_code == 400
    assert f'<span class="field-error" id="{field}-error">{message}' in response.text


@pytest.mark.parametrize(
    "params, message",
    [
        ({"since": "0001-01-01T00:00:00"}, "?since= is out of range"),
        ({"since": "yesterday"}, "is not a date"),
        ({"since": "2026-13-45T99:00:00"}, "is not a date"),
        ({"known": "1" * 30}, "?known= must be between"),
        ({"q": "x\x00"}, "?q= must not contain a NUL character"),
        ({"failures": "maybe"}, "?failures= must be 1 or 0"),
    ],
)
def test_a_bad_progress_poll_parameter_is_a_400(
    viewer_client: Client, project: AgentProject, params: dict[str, str], message: str
) -> None:
    run = build_run(project)
    response = viewer_client.get(reverse("run_progress", args=[run.pk]), params)
    assert response.status_code == 400
    assert message in response.text


def test_a_nul_byte_in_the_case_search_is_a_400_not_a_database_error(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project)
    response = viewer_client.get(reverse("run_detail", args=[run.pk]), {"q": "refund\x00"})
    assert response.status_code == 400


def test_good_parameters_still_work(viewer_client: Client, project: AgentProject) -> None:
    run = build_run(project)
    assert viewer_client.get(reverse("run_list"), {"project": project.pk}).status_code == 200
    poll = viewer_client.get(
        reverse("run_progress", args=[run.pk]), {"since": "2026-01-01", "known": "10"}
    )
    assert poll.status_code == 286  # finished run: stop polling
    case = failing_case(run)
    assert viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).status_code == 200


def test_every_page_carries_a_content_security_policy(viewer_client: Client) -> None:
    policy = viewer_client.get(reverse("home")).headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "object-src 'none'" in policy
    assert "unsafe-inline" not in policy.split("script-src", 1)[1].split(";", 1)[0]


def test_repeated_failed_logins_are_refused_for_a_while(client: Client, settings: object) -> None:
    from django.core.cache import cache

    cache.clear()
    make_user("alice")
    url = reverse("login")
    for _ in range(5):
        response = client.post(url, {"username": "alice", "password": "wrong"})
        assert response.status_code == 200
    refused = client.post(url, {"username": "alice", "password": PASSWORD})
    assert refused.status_code == 429
    assert "Too many failed logins" in refused.text
    assert "_auth_user_id" not in client.session  # even the right password is not checked
    cache.clear()
    assert client.post(url, {"username": "alice", "password": PASSWORD}).status_code == 302


def test_launching_an_agent_whose_grader_exits_at_import_shows_the_problem(
    tmp_path: Path, client: Client
) -> None:
    from runs.models import Run

    (tmp_path / "quitter.py").write_text(
        "import sys\nsys.exit(2)\n\ndef check(ctx):\n    return 1\n"
    )
    (tmp_path / "agent.yaml").write_text(
        "name: quits\nmodel: {provider: scripted, name: s}\ninstructions: {inline: x}\n"
        "evaluations: {metrics: [{type: code, grader: 'quitter:check'}]}\n"
        "test_cases:\n  - {input: hi, ground_truth: hello}\n"
    )
    project = AgentProject.objects.create(name="quits", directory=str(tmp_path))
    client.force_login(make_user("op", staff=True))
    url = reverse("project_launch", args=[project.pk])
    assert client.get(url).status_code == 200
    response = client.post(url, {})
    assert response.status_code == 400
    assert "importing &#x27;quitter&#x27; failed: SystemExit" in response.text
    assert not Run.objects.exists()
