"""A case's session start, from the engine to the database, the exports and the case page."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from runs.core.wire.models import holodeck_dump
from runs.models import CaseRow, Run
from runs.selectors.export import run_eval_run
from tests.web.factories import make_user
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_command_run_stores_each_cases_session_start_and_the_case_page_shows_it(
    tmp_path: Path, client: Client
) -> None:
    project = example_project(tmp_path)
    with pytest.raises(SystemExit):
        call_command("run_agent", str(project.agent_path), "--quiet", "--no-results-file")
    run = Run.objects.filter(source=Run.Source.CLI).latest("pk")

    cases = list(CaseRow.objects.filter(run=run).order_by("index"))
    assert cases
    for case in cases:
        assert case.session_start_ms is not None
        # The case opened its own session: the whole start is in its time.
        assert case.execution_time_ms >= case.session_start_ms
    exported = run_eval_run(run=run)
    assert [r.session_start_ms for r in exported.report.results] == [
        c.session_start_ms for c in cases
    ]
    assert all("session_start_ms" not in r for r in holodeck_dump(exported)["report"]["results"])

    client.force_login(make_user("viewer"))
    html = client.get(reverse("case_detail", args=[run.pk, cases[0].pk])).text
    assert "session start" in html
