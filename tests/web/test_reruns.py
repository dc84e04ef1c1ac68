"""Re-running a settled run's failed cases, or one of its cases, as a new run at its snapshot:
the service, the run and case pages' buttons, and the API."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.models import AgentProject, AgentSnapshot, CaseRow, Run
from runs.services import launch
from runs.services.rerun import RerunCaseNotFound, RerunError, run_rerun
from runs.services.tokens import token_create
from tests.web.factories import RunSpec, build_run, make_user
from tests.web.snapshot_helpers import (
    edit_prompt,
    metric_outcomes,
    prompt_checked_project,
    verdicts,
)

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/v1/runs"
GIT = {
    "git_commit": "3f2a9c1d0b7e4f6a8c9d0e1f2a3b4c5d6e7f8a9b",
    "git_branch": "main",
    "git_ref": "v1.2",
    "git_dirty": True,
    "git_subject": "Tighten the tolerance",
}


@pytest.fixture
def original(tmp_path: Path, eager_celery: None) -> Run:
    """A settled run of the example (two cases pass, one fails) whose snapshot's prompt a code
    grader checks; its directory's prompt is edited after it ran (a run reading the directory
    now fails that grader on every turn). Its git identity is set to one to carry over."""
    project = prompt_checked_project(tmp_path)
    run = launch.run_create(project=project)  # eager: run here, to the end
    edit_prompt(Path(project.directory))
    Run.objects.filter(pk=run.pk).update(**GIT)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and (run.passed_cases, run.failed_cases) == (2, 1)
    return run


def indices(run: Run) -> list[tuple[int, int]]:
    return list(run.cases.order_by("index", "repetition").values_list("index", "repetition"))


def failed_index(run: Run) -> int:
    return run.cases.filter(outcome="failed").values_list("index", flat=True)[0]


def test_a_rerun_of_the_failed_cases_runs_only_them_at_the_originals_snapshot(
    original: Run,
) -> None:
    lead = make_user("lead", staff=True)
    rerun = run_rerun(original=original, cases="failed", user=lead)
    rerun.refresh_from_db()

    failed = failed_index(original)
    assert indices(rerun) == [(failed, 0)]
    assert rerun.rerun_of_id == original.pk and rerun.source == Run.Source.DASHBOARD
    assert rerun.created_by == lead and rerun.project_id == original.project_id
    assert rerun.snapshot_id == original.snapshot_id
    assert {field: getattr(rerun, field) for field in GIT} == GIT
    assert rerun.options["parallel"] == original.options["parallel"]
    assert rerun.repeats == original.repeats
    assert rerun.options["rerun"] == {"of": original.pk, "cases": "failed"}
    # It ran, through the workers' path, the files the original ran, not the edited directory.
    assert rerun.status == Run.Status.FAILED and rerun.cases_done == 1
    assert metric_outcomes(rerun, "prompt_as_launched") == {"passed"}
    assert verdicts(rerun) == [v for v in verdicts(original) if v[1] == "failed"]
    assert list(original.reruns.all()) == [rerun]


def test_a_rerun_of_one_case_runs_that_case_alone(original: Run) -> None:
    rerun = run_rerun(original=original, cases=0)
    rerun.refresh_from_db()
    assert indices(rerun) == [(0, 0)]
    assert rerun.options["rerun"]["case"] == 0
    assert verdicts(rerun) == verdicts(original)[:1]
    assert rerun.partial_text == "partial: 1 of 3 cases"


def test_a_rerun_with_an_idempotency_key_is_made_once(original: Run) -> None:
    lead = make_user("lead", staff=True)
    first = run_rerun(original=original, cases="failed", user=lead, idempotency_key="k-1")
    again = run_rerun(original=original, cases="failed", user=lead, idempotency_key="k-1")
    assert again.pk == first.pk
    assert Run.objects.filter(rerun_of=original).count() == 1


def test_a_rerun_of_a_repeated_run_takes_every_case_a_repetition_of_which_failed(
    tmp_path: Path, eager_celery: None
) -> None:
    from tests.web.services_helpers import example_project

    repeated = launch.run_create(project=example_project(tmp_path), repeats=2)
    repeated.refresh_from_db()  # eager: it ran to the end meanwhile
    failed = failed_index(repeated)
    flaky = next(i for i in range(3) if i != failed)
    CaseRow.objects.filter(run=repeated, index=flaky, repetition=1).update(outcome="error")

    rerun = run_rerun(original=repeated, cases="failed", enqueue=False)
    assert rerun.repeats == 2
    assert indices(rerun) == sorted((i, r) for i in (failed, flaky) for r in (0, 1))


def snapshotted(run: Run) -> Run:
    """``run`` (a built one) given a stored snapshot: the refusals come before it is read."""
    snapshot, _ = AgentSnapshot.objects.get_or_create(
        digest="0" * 64, defaults={"archive": b"", "file_count": 0, "total_bytes": 0}
    )
    Run.objects.filter(pk=run.pk).update(snapshot=snapshot)
    run.refresh_from_db()
    return run


def test_a_run_that_cannot_be_rerun_says_why_and_queues_nothing(project: AgentProject) -> None:
    imported = build_run(project, source=Run.Source.IMPORT)
    with pytest.raises(RerunError, match=r"no snapshot .*an imported run"):
        run_rerun(original=imported, cases="failed")
    older = build_run(project)
    with pytest.raises(RerunError, match=r"no snapshot .*an older run"):
        run_rerun(original=older, cases="failed")
    live = snapshotted(build_run(project, RunSpec(status=Run.Status.RUNNING, done=5)))
    with pytest.raises(RerunError, match="has not ended yet"):
        run_rerun(original=live, cases="failed")
    passed = snapshotted(build_run(project, RunSpec(failing=(), status=Run.Status.PASSED)))
    with pytest.raises(RerunError, match="no failed or errored case"):
        run_rerun(original=passed, cases="failed")
    with pytest.raises(RerunCaseNotFound, match="no case of index 99"):
        run_rerun(original=passed, cases=99)
    regrade = build_run(project, source=Run.Source.REGRADE, snapshot=passed.snapshot)
    with pytest.raises(RerunError, match="is a re-grade"):
        run_rerun(original=regrade, cases=0)
    assert not Run.objects.filter(rerun_of__isnull=False).exists()


# --- the pages ------------------------------------------------------------------------------

KEY_FIELD = re.compile(r'name="idempotency_key" value="([0-9a-f]{32})"')


def test_the_run_page_offers_a_rerun_of_its_failed_cases_and_the_rerun_links_back(
    original: Run, staff_client: Client, client: Client
) -> None:
    page = staff_client.get(reverse("run_detail", args=[original.pk])).text
    assert "Re-run failed cases (1)" in page
    form = page[page.index('class="inline rerun-form"') :]
    (key,) = KEY_FIELD.findall(form[: form.index("</form>")])

    posted = staff_client.post(
        reverse("run_rerun", args=[original.pk]), {"cases": "failed", "idempotency_key": key}
    )
    rerun = Run.objects.get(rerun_of=original)
    assert posted.status_code == 302 and posted["Location"] == rerun.get_absolute_url()
    again = staff_client.post(
        reverse("run_rerun", args=[original.pk]), {"cases": "failed", "idempotency_key": key}
    )
    assert again["Location"] == rerun.get_absolute_url()  # a double submit: the same re-run

    shown = staff_client.get(rerun.get_absolute_url()).text
    assert f'href="/runs/{original.pk}/">run #{original.pk}</a> (failed cases)' in shown
    assert "Re-run failed cases" in shown  # it failed again: its own failures can be re-run
    back = staff_client.get(reverse("run_detail", args=[original.pk])).text
    assert f're-runs: <a class="rerun-link" href="/runs/{rerun.pk}/">#{rerun.pk}</a>' in back

    client.force_login(make_user("viewer"))
    assert "Re-run failed cases" not in client.get(original.get_absolute_url()).text
    assert client.post(reverse("run_rerun", args=[original.pk]), {"cases": "0"}).status_code == 403


def test_the_case_page_reruns_its_case(original: Run, staff_client: Client) -> None:
    case = original.cases.get(index=1)
    page = staff_client.get(case.get_absolute_url()).text
    assert "Re-run this case" in page and 'name="cases" value="1"' in page
    posted = staff_client.post(reverse("run_rerun", args=[original.pk]), {"cases": "1"})
    rerun = Run.objects.get(rerun_of=original)
    assert posted["Location"] == rerun.get_absolute_url() and indices(rerun) == [(1, 0)]
    name = case.name
    assert f"(case {name})" in staff_client.get(rerun.get_absolute_url()).text


def test_a_run_without_a_snapshot_offers_no_rerun_and_a_post_says_why(
    project: AgentProject, staff_client: Client
) -> None:
    imported = build_run(project, source=Run.Source.IMPORT)
    assert "Re-run failed cases" not in staff_client.get(imported.get_absolute_url()).text
    case = imported.cases.get(index=1)
    assert "Re-run this case" not in staff_client.get(case.get_absolute_url()).text
    posted = staff_client.post(
        reverse("run_rerun", args=[imported.pk]), {"cases": "failed"}, follow=True
    )
    assert "Cannot re-run: run" in posted.text and "no snapshot" in posted.text
    bad = staff_client.post(reverse("run_rerun", args=[imported.pk]), {"cases": "-1"}, follow=True)
    assert "Cannot re-run: say which cases" in bad.text


# --- the API --------------------------------------------------------------------------------


def bearer(user: User) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_create(user=user, name='ci')[1]}"}


def api_rerun(client: Client, run: Run, headers: dict[str, str], body: Any) -> Any:
    return client.post(
        f"{API}/{run.pk}/rerun", body, content_type="application/json", headers=headers
    )


def test_the_api_reruns_the_failed_cases_once_per_idempotency_key(
    original: Run, client: Client
) -> None:
    staff = bearer(make_user("lead", staff=True))
    keyed = {**staff, "Idempotency-Key": "retry-1"}
    created = api_rerun(client, original, keyed, {"cases": "failed"})
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["rerun_of"] == original.pk
    rerun = Run.objects.get(pk=body["id"])
    assert indices(rerun) == [(failed_index(original), 0)]
    repeat = api_rerun(client, original, keyed, {"cases": "failed"})
    assert repeat.status_code == 200 and repeat.json()["id"] == rerun.pk
    detail = client.get(f"{API}/{rerun.pk}", headers=staff).json()
    assert detail["rerun_of"] == original.pk
    assert client.get(f"{API}/{original.pk}", headers=staff).json()["rerun_of"] is None

    one = api_rerun(client, original, staff, {"case": 2})
    assert one.status_code == 201 and indices(Run.objects.get(pk=one.json()["id"])) == [(2, 0)]


def test_the_api_refuses_a_rerun_it_cannot_make_with_a_reason(
    project: AgentProject, client: Client
) -> None:
    staff = bearer(make_user("lead", staff=True))
    imported = build_run(project, source=Run.Source.IMPORT)
    refused = api_rerun(client, imported, staff, {"cases": "failed"})
    assert refused.status_code == 409 and "no snapshot" in refused.json()["detail"]
    passed = snapshotted(build_run(project, RunSpec(failing=(), status=Run.Status.PASSED)))
    nothing = api_rerun(client, passed, staff, {"cases": "failed"})
    assert nothing.status_code == 409 and "no failed" in nothing.json()["detail"]
    missing = api_rerun(client, passed, staff, {"case": 99})
    assert missing.status_code == 404 and "no case of index 99" in missing.json()["detail"]
    for body in ({}, {"cases": "failed", "case": 1}, {"cases": "all"}, {"case": -1}):
        assert api_rerun(client, passed, staff, body).status_code == 422, body
    viewer = bearer(make_user("viewer"))
    assert api_rerun(client, passed, viewer, {"case": 0}).status_code == 403
    assert api_rerun(client, Run(pk=999999), staff, {"case": 0}).status_code == 404
