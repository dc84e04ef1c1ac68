"""Retention: ``manage.py prune_runs`` deletes exactly the old, unkept, finished runs (with
their rows and the snapshots they freed), and the keep flag is set on the run page and the API."""

from __future__ import annotations

import uuid
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from runs.models import AgentProject, AgentSnapshot, CaseRow, MetricRow, Run, TurnRow
from runs.services import retention
from tests.web.factories import RunSpec, build_run, make_project

pytestmark = pytest.mark.django_db

SPEC = RunSpec(cases=3, turns=2, failing=())


def old_run(project: AgentProject | None, days: int = 100, **fields: Any) -> Run:
    fields.setdefault("status", Run.Status.PASSED)
    run = build_run(
        project, RunSpec(cases=3, turns=2, failing=(), status=fields.pop("status")), **fields
    )
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(days=days))
    return run


def snapshot() -> AgentSnapshot:
    return AgentSnapshot.objects.create(
        digest=uuid.uuid4().hex, archive=b"zip", manifest=[], file_count=0, total_bytes=3
    )


def prune(*args: str) -> str:
    out = StringIO()
    call_command("prune_runs", *args, stdout=out)
    return out.getvalue()


def remaining() -> set[int]:
    return set(Run.objects.values_list("pk", flat=True))


def test_it_deletes_only_old_unkept_finished_runs_with_their_rows(project: AgentProject) -> None:
    doomed = [old_run(project), old_run(project, status=Run.Status.ERROR), old_run(None)]
    kept = old_run(project, keep=True)
    queued = old_run(project, status=Run.Status.QUEUED)
    running = old_run(project, status=Run.Status.RUNNING)
    young = old_run(project, days=10)
    output = prune("--older-than", "90d")
    assert remaining() == {kept.pk, queued.pk, running.pk, young.pk}
    doomed_ids = [run.pk for run in doomed]
    for model in (CaseRow, TurnRow, MetricRow):
        assert not model.objects.filter(run_id__in=doomed_ids).exists()
    assert CaseRow.objects.filter(run=kept).count() == 3
    assert output.startswith("deleted 3 run(s), 9 case(s), 18 turn(s)")


def test_a_dry_run_deletes_nothing_and_reports_the_same_counts(project: AgentProject) -> None:
    used = snapshot()
    for _ in range(2):
        old_run(project, snapshot=used)
    old_run(project, keep=True)
    before = (Run.objects.count(), CaseRow.objects.count(), TurnRow.objects.count())
    dry = prune("--older-than", "90d", "--dry-run")
    assert (Run.objects.count(), CaseRow.objects.count(), TurnRow.objects.count()) == before
    assert AgentSnapshot.objects.filter(pk=used.pk).exists()
    real = prune("--older-than", "90d")
    assert dry.startswith("would delete 2 run(s), 6 case(s), 12 turn(s)")
    assert dry.removeprefix("would delete") == real.removeprefix("deleted")
    assert "1 unused snapshot(s)" in real


def test_keep_last_keeps_each_projects_newest_runs_whatever_their_age() -> None:
    first, second = make_project("one", "/srv/one"), make_project("two", "/srv/two")
    ones = [old_run(first, days=200 - n) for n in range(4)]  # ones[-1] is the newest
    twos = [old_run(second, days=300 - n) for n in range(2)]
    prune("--older-than", "90d", "--keep-last", "2")
    assert remaining() == {ones[2].pk, ones[3].pk, twos[0].pk, twos[1].pk}


def test_project_limits_the_prune_to_one_project() -> None:
    first, second = make_project("one", "/srv/one"), make_project("two", "/srv/two")
    mine, theirs = old_run(first), old_run(second)
    prune("--older-than", "90d", "--project", "one")
    assert remaining() == {theirs.pk}
    assert mine.pk not in remaining()


def test_a_snapshot_is_deleted_only_when_no_run_uses_it_any_more(project: AgentProject) -> None:
    freed, shared = snapshot(), snapshot()
    old_run(project, snapshot=freed)
    old_run(project, snapshot=shared)
    survivor = old_run(project, days=1, snapshot=shared)
    unrelated = snapshot()  # used by no run, not freed by this prune: a launch may be taking it
    prune("--older-than", "90d")
    assert set(AgentSnapshot.objects.values_list("pk", flat=True)) == {shared.pk, unrelated.pk}
    assert remaining() == {survivor.pk}


def test_it_deletes_in_batches_bounded_by_runs_and_rows(
    project: AgentProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "BATCH_ROWS", 10)  # 3 cases + 6 turns a run: one run a batch
    batches: list[list[int]] = []
    delete_batch = retention._delete_batch

    def spy(ids: list[int]) -> Any:
        batches.append(ids)
        return delete_batch(ids)

    monkeypatch.setattr(retention, "_delete_batch", spy)
    runs = [old_run(project, days=100 + n) for n in range(3)]
    counts = retention.runs_prune(older_than=timedelta(days=90))
    assert counts.runs == 3
    assert batches == [[runs[2].pk], [runs[1].pk], [runs[0].pk]]  # oldest first, one each


def test_a_regrade_of_a_deleted_run_stays_and_forgets_its_original(project: AgentProject) -> None:
    original = old_run(project)
    regrade = old_run(project, days=1, regrade_of=original)
    prune("--older-than", "90d")
    regrade.refresh_from_db()
    assert regrade.regrade_of_id is None
    assert remaining() == {regrade.pk}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--older-than", "90"], "give a duration like 90d"),
        (["--older-than=-5d"], "give a duration like 90d"),
        (["--older-than", "٩٠d"], "give a duration like 90d"),
        (["--older-than", "99999999999d"], "at most"),
        (["--older-than", "1d", "--keep-last", "x"], "--keep-last"),
        (["--older-than", "1d", "--project", "nope"], "no project named 'nope'"),
    ],
)
def test_it_refuses_bad_arguments_with_a_clear_error(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        prune(*args)


def test_durations_in_hours_and_minutes_are_understood(project: AgentProject) -> None:
    run = build_run(project, SPEC)
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(hours=3))
    prune("--older-than", "4h")
    assert remaining() == {run.pk}
    prune("--older-than", "150m")
    assert remaining() == set()


# --- the keep flag ------------------------------------------------------------------------------


def test_staff_keep_and_release_a_run_on_its_page(
    staff_client: Client, project: AgentProject
) -> None:
    run = build_run(project, SPEC)
    page = staff_client.get(reverse("run_detail", args=[run.pk])).text
    assert f'action="/runs/{run.pk}/keep/"' in page and "csrfmiddlewaretoken" in page
    response = staff_client.post(reverse("run_keep", args=[run.pk]), {"keep": "1"})
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.keep
    assert "Stop keeping" in staff_client.get(reverse("run_detail", args=[run.pk])).text
    staff_client.post(reverse("run_keep", args=[run.pk]), {"keep": "0"})
    run.refresh_from_db()
    assert not run.keep


def test_the_keep_form_refuses_a_bad_value_and_a_get(
    staff_client: Client, project: AgentProject
) -> None:
    run = build_run(project, SPEC)
    assert staff_client.post(reverse("run_keep", args=[run.pk]), {"keep": "yes"}).status_code == 400
    assert staff_client.get(reverse("run_keep", args=[run.pk])).status_code == 405
    assert staff_client.post(reverse("run_keep", args=[999_999]), {"keep": "1"}).status_code == 404


def test_a_viewer_can_neither_see_nor_use_the_keep_form(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, SPEC)
    assert "keep-form" not in viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert viewer_client.post(reverse("run_keep", args=[run.pk]), {"keep": "1"}).status_code == 403
    run.refresh_from_db()
    assert not run.keep


def test_the_api_keeps_a_run_for_staff_only(
    staff: User, viewer: User, project: AgentProject
) -> None:
    run = build_run(project, SPEC)
    url = f"/api/v1/runs/{run.pk}/keep"
    viewer_client, staff_client = Client(), Client()
    viewer_client.force_login(viewer)
    staff_client.force_login(staff)
    refused = viewer_client.post(url, {"keep": True}, content_type="application/json")
    assert refused.status_code == 403
    run.refresh_from_db()
    assert not run.keep
    response = staff_client.post(url, {"keep": True}, content_type="application/json")
    assert response.status_code == 200, response.content
    assert response.json()["keep"] is True
    assert staff_client.get(f"/api/v1/runs/{run.pk}").json()["keep"] is True
    bad = staff_client.post(url, {"keep": "maybe"}, content_type="application/json")
    assert bad.status_code == 422
    old = Run.objects.filter(pk=run.pk)
    old.update(created_at=timezone.now() - timedelta(days=400))
    prune("--older-than", "90d")
    assert old.exists()  # kept: never pruned


@override_settings(HOLODECK_RETENTION_DAYS=90, HOLODECK_RETENTION_KEEP_LAST=1)
def test_the_sweepers_retention_prunes_with_the_settings(
    project: AgentProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runs import tasks

    # The sweeper closes its thread's connection after each pass; here that would be the
    # test's own connection, inside the test's transaction.
    monkeypatch.setattr(tasks, "close_old_connections", lambda: None)
    older, newest = old_run(project, days=200), old_run(project, days=100)
    tasks._prune()
    assert remaining() == {newest.pk}
    assert older.pk not in remaining()
