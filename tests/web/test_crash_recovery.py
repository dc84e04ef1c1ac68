"""A killed worker's case runs again: real Celery worker processes on Redis and PostgreSQL,
killed with SIGKILL in the middle of a case, with the default recovery settings."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection
from django.db.models import Count

from runs.management.commands.serve import worker_command
from runs.models import CaseResult, MetricResult, Run, TurnResult
from runs.services import launch
from tests.web.services_helpers import REPO, example_project
from tests.web.test_worker import services_available

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.process]

RECOVERY_BUDGET_S = 120  # "with default settings the run ends within 2 minutes of the kill"


class Workers:
    """Start and kill real worker processes (each a Celery main process with 2 pool children)."""

    def __init__(self, tmp_path: Path) -> None:
        db = connection.settings_dict
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("HOLODECK_") or k == "HOLODECK_REQUIRE_SERVICES"
        }
        self.env.update(
            DATABASE_URL=f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:"
            f"{db['PORT'] or 5432}/{db['NAME']}",
            HOLODECK_DATA_DIR=str(tmp_path / "worker-data"),
        )
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        log = open(self.tmp_path / f"worker-{len(self.procs)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [*worker_command(2, loglevel="INFO"), "--without-gossip", "--without-mingle"],
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: "the whole worker" is killable
        )
        self.procs.append(proc)
        return proc

    def kill_all(self, proc: subprocess.Popen[bytes]) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def logs(self) -> str:
        return "\n".join(p.read_text()[-3000:] for p in sorted(self.tmp_path.glob("worker-*.log")))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    reason = services_available()
    if reason:
        if os.environ.get("HOLODECK_REQUIRE_SERVICES"):
            pytest.fail(f"HOLODECK_REQUIRE_SERVICES is set but {reason}")
        pytest.skip(reason)
    from holodeck_web.celery import app

    app.control.purge()
    pool = Workers(tmp_path)
    try:
        yield pool
    finally:
        pool.stop()


def slow_run(tmp_path: Path) -> Run:
    """The example agent (3 cases, 10 turns) at 800 ms a model call, two cases at a time."""
    project = example_project(tmp_path)
    text = project.agent_path.read_text()
    project.agent_path.write_text(
        text.replace("provider: scripted", "provider: scripted\n  latency_ms: 800", 1)
    )
    return launch.run_create(project=project, parallel=2)


def wait_for(condition: Callable[[], bool], seconds: float, workers: Workers) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out after {seconds} s\n{workers.logs()}")


def a_case_mid_turns(run: Run) -> CaseResult | None:
    """A running case with at least one turn written and more to come."""
    for case in CaseResult.objects.filter(run=run, status=CaseResult.Status.RUNNING):
        written = TurnResult.objects.filter(case=case).count()
        if 0 < written < case.turn_count:
            return case
    return None


def assert_finished_whole(run: Run, killed: CaseResult) -> None:
    run.refresh_from_db()
    cases = list(CaseResult.objects.filter(run=run))
    assert run.status == Run.Status.FAILED  # the example's deliberately failing case
    assert {c.status for c in cases} == {CaseResult.Status.DONE}  # every case graded
    assert CaseResult.objects.get(pk=killed.pk).attempts >= 2  # it ran again
    turns = TurnResult.objects.filter(run=run)
    assert turns.count() == run.total_turns == run.turns_done == 10
    duplicates = turns.values("case_id", "index").annotate(n=Count("id")).filter(n__gt=1)
    assert not duplicates.exists()
    assert MetricResult.objects.filter(run=run, turn__in=turns).count() == (
        MetricResult.objects.filter(run=run).count()
    )
    assert (run.cases_done, run.passed_cases, run.failed_cases) == (3, 2, 1)
    assert run.cases_done == len(cases)


def test_a_case_whose_pool_child_is_killed_runs_again(tmp_path: Path, workers: Workers) -> None:
    workers.start()
    run = slow_run(tmp_path)
    victim: list[CaseResult] = []
    wait_for(lambda: bool(victim.append(c) or True) if (c := a_case_mid_turns(run)) else False,
             90, workers)  # fmt: skip
    case = victim[0]
    pid = int(case.claimed_by.split(":")[1])
    os.kill(pid, signal.SIGKILL)  # one pool child, mid-case
    killed_at = time.monotonic()
    wait_for(lambda: not Run.objects.get(pk=run.pk).is_active, RECOVERY_BUDGET_S, workers)
    assert time.monotonic() - killed_at < RECOVERY_BUDGET_S
    assert_finished_whole(run, case)


def test_a_case_whose_whole_worker_is_killed_runs_again_on_the_next_worker(
    tmp_path: Path, workers: Workers
) -> None:
    first = workers.start()
    run = slow_run(tmp_path)
    victim: list[CaseResult] = []
    wait_for(lambda: bool(victim.append(c) or True) if (c := a_case_mid_turns(run)) else False,
             90, workers)  # fmt: skip
    workers.kill_all(first)  # the main process and its pool children
    killed_at = time.monotonic()
    workers.start()
    wait_for(lambda: not Run.objects.get(pk=run.pk).is_active, RECOVERY_BUDGET_S, workers)
    assert time.monotonic() - killed_at < RECOVERY_BUDGET_S
    assert_finished_whole(run, victim[0])
