"""Worker status: the heartbeat rows, the no-worker banner and notices, ``manage.py workers``."""

from __future__ import annotations

import json
import os
import socket
import time
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from runs.models import AgentProject, CaseRow, Run, WorkerHeartbeat
from runs.selectors.workers import worker_live_exists, worker_overview
from runs.services.workers import worker_heartbeat_beat, worker_heartbeat_delete, worker_identity

pytestmark = pytest.mark.django_db

BANNER = "No worker is running: runs wait in the queue until a worker starts"


def fresh_worker(**fields: object) -> WorkerHeartbeat:
    values = {"name": "box-1:4242", "host": "box-1", "pid": 4242, "concurrency": 4}
    values.update(fields)
    return WorkerHeartbeat.objects.create(**values)  # type: ignore[arg-type]


# --- services and selectors -------------------------------------------------------------------


def test_a_heartbeat_creates_the_row_once_and_then_stamps_it() -> None:
    worker = worker_identity(concurrency=3, queue="celery")
    first = worker_heartbeat_beat(worker=worker)
    second = worker_heartbeat_beat(worker=worker)
    assert WorkerHeartbeat.objects.count() == 1
    assert first.name == f"{socket.gethostname()}:{os.getpid()}"
    assert second.seen_at >= first.seen_at
    assert second.started_at == worker.started_at
    assert (second.concurrency, second.queue) == (3, "celery")
    assert worker_heartbeat_delete(name=worker.name) == 1
    assert not WorkerHeartbeat.objects.exists()


@override_settings(HOLODECK_WORKER_STALE_SECONDS=30)
def test_a_worker_counts_as_live_only_when_seen_within_the_stale_limit() -> None:
    assert not worker_live_exists()
    row = fresh_worker(seen_at=timezone.now() - timedelta(seconds=31))
    assert not worker_live_exists()
    assert worker_overview().workers == []
    assert [w.live for w in worker_overview(include_stale=True).workers] == [False]
    WorkerHeartbeat.objects.filter(pk=row.pk).update(seen_at=timezone.now())
    assert worker_live_exists()


def test_a_running_case_belongs_to_the_worker_whose_child_process_claimed_it(
    project: AgentProject,
) -> None:
    host = socket.gethostname()
    # This test process plays a pool child: its parent is the "worker" main process.
    parent = fresh_worker(name=f"{host}:{os.getppid()}", host=host, pid=os.getppid())
    other = fresh_worker(name=f"{host}:1", host=host, pid=1)
    run = Run.objects.create(project=project, agent_name="a", status=Run.Status.RUNNING)
    mine = CaseRow.objects.create(
        run=run, index=0, name="weather", status="running", claimed_by=f"{host}:{os.getpid()}:99"
    )
    CaseRow.objects.create(run=run, index=1, status="done", claimed_by=f"{host}:{os.getpid()}:9")
    elsewhere = CaseRow.objects.create(
        run=run, index=2, status="running", claimed_by="far-away:77:1"
    )
    overview = worker_overview()
    by_name = {w.name: w for w in overview.workers}
    assert [c.case_id for c in by_name[parent.name].cases] == [mine.pk]
    assert by_name[other.name].cases == []
    assert [c.case_id for c in overview.unattributed] == [elsewhere.pk]


def test_a_claim_on_another_host_goes_to_that_hosts_only_live_worker(
    project: AgentProject,
) -> None:
    fresh_worker(name="far-away:10", host="far-away", pid=10)
    run = Run.objects.create(project=project, agent_name="a", status=Run.Status.RUNNING)
    case = CaseRow.objects.create(run=run, index=0, status="running", claimed_by="far-away:11:5")
    (worker,) = worker_overview().workers
    assert [c.case_id for c in worker.cases] == [case.pk]


# --- the banner and notices -----------------------------------------------------------------


@override_settings(CELERY_EAGER=False)
def test_every_page_shows_the_banner_when_no_worker_is_live(viewer_client: Client) -> None:
    for name in ("home", "run_list", "tokens"):
        response = viewer_client.get(reverse(name))
        assert BANNER in response.text, name
        assert "manage.py serve" in response.text
        assert "celery -A holodeck_web worker" in response.text


@override_settings(CELERY_EAGER=False)
def test_the_banner_is_hidden_when_a_worker_was_seen_recently(viewer_client: Client) -> None:
    fresh_worker()
    assert BANNER not in viewer_client.get(reverse("home")).text


@override_settings(CELERY_EAGER=False, HOLODECK_WORKER_STALE_SECONDS=20)
def test_a_stale_heartbeat_does_not_hide_the_banner(viewer_client: Client) -> None:
    fresh_worker(seen_at=timezone.now() - timedelta(seconds=60))
    assert BANNER in viewer_client.get(reverse("home")).text


@override_settings(CELERY_EAGER=True)
def test_the_banner_is_never_shown_when_runs_run_eagerly(viewer_client: Client) -> None:
    assert BANNER not in viewer_client.get(reverse("home")).text


@override_settings(CELERY_EAGER=False)
def test_the_login_page_says_nothing_about_workers(client: Client) -> None:
    assert BANNER not in client.get(reverse("login")).text


@override_settings(CELERY_EAGER=False)
def test_the_launch_form_shows_the_notice_beside_the_run_button(
    staff_client: Client, project: AgentProject
) -> None:
    page = staff_client.get(reverse("project_launch", args=[project.pk])).text
    form = page[page.index("<form") :]
    assert BANNER in form[form.index('type="submit" class="btn">Run</button>') :]
    fresh_worker()
    page = staff_client.get(reverse("project_launch", args=[project.pk])).text
    assert BANNER not in page


@override_settings(CELERY_EAGER=False)
def test_a_queued_runs_page_says_why_it_waits(viewer_client: Client, project: AgentProject) -> None:
    queued = Run.objects.create(project=project, agent_name="a")
    page = viewer_client.get(reverse("run_detail", args=[queued.pk])).text
    header = page[
        page.index('id="run-header"') : page.index("</header>", page.index('id="run-header"'))
    ]
    assert BANNER in header
    finished = Run.objects.create(project=project, agent_name="a", status=Run.Status.PASSED)
    page = viewer_client.get(reverse("run_detail", args=[finished.pk])).text
    header = page[
        page.index('id="run-header"') : page.index("</header>", page.index('id="run-header"'))
    ]
    assert BANNER not in header


# --- manage.py workers ------------------------------------------------------------------------


def test_the_workers_command_lists_live_workers_and_their_cases(project: AgentProject) -> None:
    host = socket.gethostname()
    fresh_worker(name=f"{host}:{os.getppid()}", host=host, pid=os.getppid(), queue="celery")
    fresh_worker(name="gone:5", host="gone", pid=5, seen_at=timezone.now() - timedelta(hours=1))
    run = Run.objects.create(project=project, agent_name="a", status=Run.Status.RUNNING)
    CaseRow.objects.create(
        run=run, index=0, name="weather", status="running", claimed_by=f"{host}:{os.getpid()}:1"
    )
    out = StringIO()
    call_command("workers", stdout=out)
    text = out.getvalue()
    assert f"{host}:{os.getppid()}  live  host={host} pid={os.getppid()} concurrency=4" in text
    assert "queue=celery" in text and "last seen" in text and "started=" in text
    assert f"run {run.pk} case" in text and "weather" in text
    assert "gone:5" not in text

    out = StringIO()
    call_command("workers", "--all", "--json", stdout=out)
    document = json.loads(out.getvalue())
    assert {(w["name"], w["live"]) for w in document["workers"]} == {
        (f"{host}:{os.getppid()}", True),
        ("gone:5", False),
    }
    (live,) = [w for w in document["workers"] if w["live"]]
    assert [c["name"] for c in live["cases"]] == ["weather"]


def test_the_workers_command_says_how_to_start_one_when_none_is_live() -> None:
    out = StringIO()
    call_command("workers", stdout=out)
    assert "no live worker" in out.getvalue()
    assert "celery -A holodeck_web worker" in out.getvalue()


# --- a real worker ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.services
@pytest.mark.process
def test_a_real_worker_stamps_its_row_and_deletes_it_when_it_stops(tmp_path: Path) -> None:
    from tests.web.worker_helpers import Workers, require_redis_and_postgresql

    require_redis_and_postgresql()
    with Workers(tmp_path, {"HOLODECK_HEARTBEAT_SECONDS": "1"}) as workers:
        proc = workers.start()
        name = f"{socket.gethostname()}:{proc.pid}"
        deadline = time.monotonic() + 60
        while not WorkerHeartbeat.objects.filter(name=name).exists():
            workers.assert_alive(proc)
            assert time.monotonic() < deadline, workers.logs()
            time.sleep(0.2)
        row = WorkerHeartbeat.objects.get(name=name)
        assert (row.pid, row.concurrency) == (proc.pid, 2)
        first_seen = row.seen_at
        while WorkerHeartbeat.objects.get(name=name).seen_at == first_seen:
            assert time.monotonic() < deadline, workers.logs()
            time.sleep(0.2)
        out = StringIO()
        call_command("workers", stdout=out)
        assert name in out.getvalue()
        proc.terminate()
        proc.wait(timeout=30)
    assert not WorkerHeartbeat.objects.filter(name=name).exists(), workers.logs()
