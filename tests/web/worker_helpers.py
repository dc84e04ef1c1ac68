"""Real Celery worker processes for the service-backed tests, on any broker: start them in a
process group of their own, kill one pool child or the whole worker, and check that a run ended
whole (every case graded, no duplicate rows, counters equal to the rows)."""

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

import pytest
from django.db import connection
from django.db.models import Count

from runs.management.commands.serve import worker_command
from runs.models import CaseResult, MetricResult, Run, TurnResult
from runs.services import launch
from tests.web.services_helpers import REPO, example_project

# Celery's worker log line for each message it takes (at --loglevel INFO).
RECEIVED = re.compile(r"Task runs\.tasks\.execute_case\[([0-9a-f-]+)\] received")


def database_url() -> str:
    """The URL of the test database this process uses, for a worker process to use too."""
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return (
        f"postgres://{db['USER'] or 'postgres'}{password}@{db['HOST'] or '127.0.0.1'}:"
        f"{db['PORT'] or 5432}/{db['NAME']}"
    )


class Workers:
    """Real worker processes (each a Celery main process with 2 pool children), started with
    the recovery settings' defaults (no HOLODECK_* variable of the shell) and ``env``."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("HOLODECK_") or k == "HOLODECK_REQUIRE_SERVICES"
        }
        self.env.update(
            DATABASE_URL=database_url(), HOLODECK_DATA_DIR=str(tmp_path / "worker-data"), **env
        )
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        log = self.tmp_path / f"worker-{len(self.procs)}.log"
        # A node name of its own: no clash with another worker on this host and broker.
        name = f"holodeck-test-{uuid.uuid4().hex[:8]}@%h"
        quiet = ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [*worker_command(2, loglevel="INFO"), "-n", name, *quiet],
                cwd=REPO,
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


def slow_run(tmp_path: Path, latency_ms: int = 800) -> Run:
    """The example agent (3 cases, 10 turns) at ``latency_ms`` a model call, two cases at a time,
    launched as the view launches it."""
    project = example_project(tmp_path)
    text = project.agent_path.read_text()
    project.agent_path.write_text(
        text.replace("provider: scripted", f"provider: scripted\n  latency_ms: {latency_ms}", 1)
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


def wait_for_a_case_mid_turns(run: Run, workers: Workers, seconds: float = 90) -> CaseResult:
    found: list[CaseResult] = []

    def mid_turns() -> bool:
        case = a_case_mid_turns(run)
        if case is not None:
            found.append(case)
        return bool(found)

    wait_for(mid_turns, seconds, workers)
    return found[0]


def assert_run_whole(run: Run) -> None:
    """The example run ended with every case graded once: no duplicate turn rows, no metric row
    of a removed turn, and counters equal to the rows."""
    run.refresh_from_db()
    cases = list(CaseResult.objects.filter(run=run))
    assert run.status == Run.Status.FAILED  # the example's deliberately failing case
    assert {c.status for c in cases} == {CaseResult.Status.DONE}  # every case graded
    turns = TurnResult.objects.filter(run=run)
    assert turns.count() == run.total_turns == run.turns_done == 10
    duplicates = turns.values("case_id", "index").annotate(n=Count("id")).filter(n__gt=1)
    assert not duplicates.exists()
    assert sum(c.turn_count for c in cases) == run.total_turns
    assert MetricResult.objects.filter(run=run, turn__in=turns).count() == (
        MetricResult.objects.filter(run=run).count()
    )
    assert (run.total_cases, run.cases_done, run.passed_cases, run.failed_cases) == (3, 3, 2, 1)
    assert run.cases_done == len(cases)
    assert run.passed_cases == sum(1 for c in cases if c.passed)
    assert run.failed_cases == sum(1 for c in cases if c.passed is False)
