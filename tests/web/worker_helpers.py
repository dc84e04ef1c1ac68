"""Real Celery worker processes for the service-backed tests, on any broker: check that the
services are up, start workers in a process group of their own, kill one pool child or the whole
worker, and check that a run ended whole (every case graded, no duplicate rows, counters equal to
the rows)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Count
from django.test import Client
from django.urls import reverse

from holodeck_web.celery import app as celery_app
from runs.management.commands.serve import worker_command
from runs.models import AgentProject, CaseRow, MetricRow, Run, TurnRow
from runs.services import launch
from tests.web.services_helpers import REPO, example_project

# Celery's worker log line for each message it takes (at --loglevel INFO).
RECEIVED = re.compile(r"Task runs\.tasks\.execute_case\[([0-9a-f-]+)\] received")
RECOVERY_BUDGET_S = 120  # "with default settings the run ends within 2 minutes of the kill"


def redis_and_postgresql_missing() -> str | None:
    """None when PostgreSQL and Redis are configured and reachable, else why not."""
    if connection.vendor != "postgresql":
        return "DATABASE_URL does not point at PostgreSQL"
    url = os.environ.get("REDIS_URL") or os.environ.get("CELERY_BROKER_URL")
    if not url or not url.startswith("redis"):
        return "REDIS_URL is not set"
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        return f"Redis at {url} is unreachable: {exc}"
    return None


def require_redis_and_postgresql() -> None:
    """Skip the test unless PostgreSQL and Redis are up (a failure in CI:
    HOLODECK_REQUIRE_SERVICES, tests/conftest.py), then drop stale tasks of earlier runs."""
    reason = redis_and_postgresql_missing()
    if reason:
        pytest.skip(reason)
    celery_app.control.purge()


def database_url() -> str:
    """The URL of the test database this process uses, for a worker process to use too."""
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return (
        f"postgres://{db['USER'] or 'postgres'}{password}@{db['HOST'] or '127.0.0.1'}:"
        f"{db['PORT'] or 5432}/{db['NAME']}"
    )


class Workers:
    """Real worker processes (each a Celery main process with 2 pool children), started in
    ``cwd`` (the repository's code either way) with the recovery settings' defaults (no
    HOLODECK_* variable of the shell) and ``env``, their data folder ``tmp_path /
    "worker-data"``. As a context manager, stopped on the way out."""

    def __init__(
        self, tmp_path: Path, env: dict[str, str] | None = None, *, cwd: Path = REPO
    ) -> None:
        self.data_dir = tmp_path / "worker-data"
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("HOLODECK_") or k == "HOLODECK_REQUIRE_SERVICES"
        }
        self.env.update(
            DATABASE_URL=database_url(),
            HOLODECK_DATA_DIR=str(self.data_dir),
            HOLODECK_WORKER_PRELOAD=os.environ.get("HOLODECK_WORKER_PRELOAD", "none"),
        )
        self.env.update(env or {})
        if cwd != REPO:  # the project's code, not the working directory's
            self.env["PYTHONPATH"] = str(REPO)
        self.tmp_path = tmp_path
        self.cwd = cwd
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Workers:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self, concurrency: int = 2) -> subprocess.Popen[bytes]:
        log = self.tmp_path / f"worker-{len(self.procs)}.log"
        # A node name of its own: no clash with another worker on this host and broker.
        name = f"holodeck-test-{uuid.uuid4().hex[:8]}@%h"
        quiet = ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [*worker_command(concurrency, loglevel="INFO"), "-n", name, *quiet],
                cwd=self.cwd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: "the whole worker" is killable
            )
        self.procs.append(proc)
        return proc

    def kill_all(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the main process and its pool children at once."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def logs(self) -> str:
        return "\n".join(p.read_text()[-3000:] for p in sorted(self.tmp_path.glob("worker-*.log")))

    def redelivered(self) -> set[str]:
        """Ids of the tasks a worker received more than once: messages the broker gave back
        (a sweep that queues a case again sends a new message, with a new id)."""
        received = Counter(
            m.group(1)
            for log in self.tmp_path.glob("worker-*.log")
            for m in RECEIVED.finditer(log.read_text(errors="replace"))
        )
        return {task_id for task_id, n in received.items() if n > 1}

    def assert_alive(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.poll() is None, self.logs()

    def stop(self) -> None:
        """Stop every worker, then kill what is left of each process group (a pool child)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            with contextlib.suppress(ProcessLookupError):  # the group is gone: nothing is left
                os.killpg(proc.pid, signal.SIGKILL)


def slow_project(tmp_path: Path, latency_ms: int) -> AgentProject:
    """A copy of the example agent (3 cases, 10 turns) at ``latency_ms`` a model call."""
    project = example_project(tmp_path)
    text = project.agent_path.read_text()
    project.agent_path.write_text(
        text.replace("provider: scripted", f"provider: scripted\n  latency_ms: {latency_ms}", 1)
    )
    return project


def slow_run(tmp_path: Path, latency_ms: int = 800) -> Run:
    """The example agent at ``latency_ms`` a model call, two cases at a time, launched as the
    view launches it."""
    return launch.run_create(project=slow_project(tmp_path, latency_ms), parallel=2)


def run_from_the_view_to_the_end(
    tmp_path: Path, workers: Workers, *, seconds: float
) -> tuple[Client, Run, bool]:
    """A worker runs the example agent, launched through the launch form by a staff user, with a
    little simulated model latency so the run is observable while it runs; polled until it ends
    or ``seconds`` pass. That user's client, the run, and whether turn rows were seen while it
    was running (never fewer rows than its counter)."""
    worker = workers.start()
    project = slow_project(tmp_path, latency_ms=150)
    staff = User.objects.create_user("lead", password="pw-for-tests", is_staff=True)
    client = Client()
    client.force_login(staff)
    response = client.post(
        reverse("project_launch", args=[project.pk]),
        {"git_ref": "", "parallel": "2", "limit": "", "case_filter": ""},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get()
    seen_partial = False
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        run.refresh_from_db()
        rows = TurnRow.objects.filter(run=run).count()
        if run.status == Run.Status.RUNNING and 0 < rows < run.total_turns:
            seen_partial = True
            assert rows >= run.turns_done  # rows are written with the counter, atomically
        if not run.is_active:
            break
        workers.assert_alive(worker)
        time.sleep(0.05)
    return client, run, seen_partial


def assert_run_page_shows_the_cases(client: Client, run: Run) -> None:
    page = client.get(reverse("run_detail", args=[run.pk]))
    assert page.status_code == 200
    assert "northwind_capex_decline" in page.content.decode()


def wait_for(condition: Callable[[], bool], seconds: float, workers: Workers) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out after {seconds} s\n{workers.logs()}")


def a_case_mid_turns(run: Run) -> CaseRow | None:
    """A running case with at least one turn written and more to come."""
    for case in CaseRow.objects.filter(run=run, status=CaseRow.Status.RUNNING):
        written = TurnRow.objects.filter(case=case).count()
        if 0 < written < case.turn_count:
            return case
    return None


def wait_for_a_case_mid_turns(run: Run, workers: Workers, seconds: float = 90) -> CaseRow:
    found: list[CaseRow] = []

    def mid_turns() -> bool:
        case = a_case_mid_turns(run)
        if case is not None:
            found.append(case)
        return bool(found)

    wait_for(mid_turns, seconds, workers)
    return found[0]


def run_whose_pool_child_is_killed(
    tmp_path: Path, workers: Workers
) -> tuple[Run, CaseRow, subprocess.Popen[bytes]]:
    """A worker runs the slow run; the pool child running a case is killed with SIGKILL in the
    middle of it, and the run ends within the recovery budget. The run, the case, the worker."""
    worker = workers.start()
    run = slow_run(tmp_path)
    case = wait_for_a_case_mid_turns(run, workers)
    os.kill(int(case.claimed_by.split(":")[1]), signal.SIGKILL)  # one pool child, mid-case
    ends_within_recovery_budget(run, workers, killed_at=time.monotonic())
    return run, case, worker


def run_whose_whole_worker_is_killed(tmp_path: Path, workers: Workers) -> tuple[Run, CaseRow]:
    """A worker runs the slow run; the whole worker is killed with SIGKILL while a case is in
    the middle of its turns, a next worker starts, and the run ends within the recovery budget.
    The run and the case."""
    first = workers.start()
    run = slow_run(tmp_path)
    case = wait_for_a_case_mid_turns(run, workers)
    workers.kill_all(first)  # the main process and its pool children
    killed_at = time.monotonic()
    workers.start()
    ends_within_recovery_budget(run, workers, killed_at=killed_at)
    return run, case


def ends_within_recovery_budget(run: Run, workers: Workers, *, killed_at: float) -> None:
    wait_for(lambda: not Run.objects.get(pk=run.pk).is_active, RECOVERY_BUDGET_S, workers)
    assert time.monotonic() - killed_at < RECOVERY_BUDGET_S


def assert_run_whole(run: Run, *, killed: CaseRow | None = None) -> None:
    """The example run ended with every case graded once: no duplicate turn rows, no metric row
    of a removed turn, and counters equal to the rows; the ``killed`` case ran again."""
    run.refresh_from_db()
    cases = list(CaseRow.objects.filter(run=run))
    assert run.status == Run.Status.FAILED  # the example's deliberately failing case
    assert {c.status for c in cases} == {CaseRow.Status.DONE}  # every case graded
    turns = TurnRow.objects.filter(run=run)
    assert turns.count() == run.total_turns == run.turns_done == 10
    duplicates = turns.values("case_id", "index").annotate(n=Count("id")).filter(n__gt=1)
    assert not duplicates.exists()
    assert sum(c.turn_count for c in cases) == run.total_turns
    assert MetricRow.objects.filter(run=run, turn__in=turns).count() == (
        MetricRow.objects.filter(run=run).count()
    )
    assert (run.total_cases, run.cases_done, run.passed_cases, run.failed_cases) == (3, 3, 2, 1)
    assert run.cases_done == len(cases)
    assert run.passed_cases == sum(1 for c in cases if c.passed)
    assert run.failed_cases == sum(1 for c in cases if c.passed is False)
    if killed is not None:
        assert CaseRow.objects.get(pk=killed.pk).attempts >= 2  # it ran again
