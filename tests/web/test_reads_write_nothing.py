"""GET requests never write: recovery belongs to the workers' sweeper, not to a page view."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from runs.core.sealing import snapshot_working_tree
from runs.models import AgentProject, CaseRow, Run
from runs.services.snapshots import snapshot_store
from runs.services.tokens import token_create, token_revoke
from tests.web.factories import RunSpec, build_run, failing_case
from tests.web.services_helpers import example_project

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def writes_of(client: Client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        params = {"since": timezone.now().isoformat(), "known": 1} if "progress" in url else {}
        response = client.get(url, params)
        if response.streaming:  # read as it is sent (the compare's CSV)
            b"".join(response.streaming_content)  # type: ignore[attr-defined]
    assert response.status_code in (200, 286), (url, response.status_code)
    return [
        q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith(WRITES)
    ]


@pytest.mark.django_db
def test_no_dashboard_page_writes_to_the_database_on_a_get(client: Client, tmp_path: Path) -> None:
    from django.contrib.auth.models import User

    root = User.objects.create_superuser("root", password="a-long-password")
    client.force_login(root)
    token_revoke(token=token_create(user=root, name="old")[0])
    token_create(user=root, name="ci")
    project: AgentProject = example_project(tmp_path)
    # A running run whose worker died long ago: the old progress poll would have reaped it.
    run = build_run(project, RunSpec(cases=4, turns=2, status=Run.Status.RUNNING, done=2))
    long_ago = timezone.now() - timezone.timedelta(days=1)
    CaseRow.objects.filter(run=run, status=CaseRow.Status.PENDING).update(
        status=CaseRow.Status.RUNNING, heartbeat_at=long_ago, enqueued=True, enqueued_at=long_ago
    )
    case = failing_case(run)
    other = build_run(project, RunSpec(cases=4, turns=2, transcripts=True))
    snapshot = snapshot_store(packed=snapshot_working_tree(Path(project.directory)))
    Run.objects.filter(pk=other.pk).update(snapshot=snapshot)
    urls = [
        reverse("home"),
        reverse("project_launch", args=[project.pk]),
        reverse("project_launch", args=[project.pk]) + f"?rerun={run.pk}",
        reverse("project_new"),
        reverse("project_detail", args=[project.pk]),
        reverse("project_edit", args=[project.pk]),
        reverse("project_remove", args=[project.pk]),  # the confirm step
        reverse("run_list"),
        reverse("run_detail", args=[run.pk]),
        reverse("run_progress", args=[run.pk]),
        reverse("run_export", args=[run.pk]),
        reverse("run_export", args=[run.pk]) + "?format=junit",
        reverse("run_snapshot", args=[run.pk]),  # none: says so
        reverse("run_snapshot", args=[other.pk]),
        reverse("run_snapshot_file", args=[other.pk, "agent.yaml"]),
        reverse("run_snapshot_zip", args=[other.pk]),
        reverse("run_replay", args=[run.pk]) + "?cases=0",  # the what-if replay's form
        reverse("import_results"),
        reverse("case_detail", args=[run.pk, case.pk]),
        reverse("case_turns", args=[run.pk, case.pk]),
        reverse("compare") + f"?runs={run.pk},{other.pk}",
        reverse("compare") + f"?runs={run.pk}",
        reverse("compare_case") + f"?runs={other.pk},{run.pk}&key={case.name}",
        reverse("compare_config") + f"?runs={other.pk},{run.pk}",
        reverse("compare_csv") + f"?runs={run.pk},{other.pk}",
        reverse("case_transcript", args=[run.pk, case.pk]) + "?turn=0",
        reverse("model_call_request", args=[other.pk, other.cases.get(index=1).pk])
        + "?turn=0&call=0",
        reverse("compare_transcript") + f"?a={case.pk}&b={other.cases.get(index=1).pk}&turn=1",
        reverse("trends") + f"?project={project.pk}",
        reverse("tokens"),
        reverse("project_roles", args=[project.pk]),  # the default categories: not stored
        reverse("audit") + f"?project={project.pk}&action=role.set",
        reverse("review_queue", args=[project.pk]),
        reverse("run_review_tile", args=[run.pk]),
        reverse("run_detail", args=[run.pk]) + "?review=untriaged",
        reverse("project_calibration", args=[project.pk]),
        reverse("project_calibration_metric", args=[project.pk, "rouge"]),
        reverse("admin:index"),
        reverse("admin:runs_run_changelist"),
        reverse("admin:runs_run_change", args=[run.pk]),
        reverse("admin:runs_apitoken_changelist"),
    ]
    # Every named dashboard page with a GET handler is in the list above.
    names = pattern_names(get_resolver().url_patterns[-1].url_patterns)  # runs.web.urls
    posts = {"run_cancel", "run_regrade", "run_rerun", "run_keep", "token_revoke"}
    posts |= {"project_role_set", "project_category_save"}
    posts |= {"case_review", "turn_review", "turn_review_confirm", "turn_review_reopen"}
    posts |= {"queue_triage", "queue_confirm", "queue_assign"}
    assert names - posts <= {url_name(url) for url in urls}
    for url in urls:
        assert writes_of(client, url) == [], url
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def pattern_names(patterns: list[URLPattern | URLResolver]) -> set[str]:
    """The names of every page under ``patterns``, included lists too."""
    names: set[str] = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            names |= pattern_names(pattern.url_patterns)
        elif pattern.name:
            names.add(pattern.name)
    return names


def url_name(url: str) -> str | None:
    from django.urls import resolve

    return resolve(url.split("?")[0]).url_name
