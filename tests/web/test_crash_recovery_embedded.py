"""The embedded default recovers too: ``serve`` (SQLite, the embedded broker) killed with SIGKILL
in the middle of a run, started again, finishes the run."""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.web.services_helpers import EXAMPLES, REPO
from tests.web.test_serve import (
    answers,
    descendants_of,
    free_port,
    kill_tree,
    linux_only,
    proc_stat,
    ready_worker_pid,
    serve_env,  # noqa: F401 - the module fixture: a migrated data folder
    wait_for,
)

pytestmark = pytest.mark.process

RECOVERY_BUDGET_S = 120

LAUNCH = """
from pathlib import Path

import pytest
from runs.services.launch import run_create
from runs.services.projects import project_register
run = run_create(project=project_register(agent_path=Path({path!r})), parallel=2)
print(run.pk)
"""


def start_serve(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--addr", f"127.0.0.1:{port}", "--workers", "2"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    wait_for("the login page answers", lambda: answers(f"http://127.0.0.1:{port}/login/"), 60, log)
    wait_for("the worker runs its pool", lambda: ready_worker_pid(proc), 30, log)
    return proc, port


def query(env: dict[str, str], sql: str, *args: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(Path(env["HOLODECK_DATA_DIR"]) / "db.sqlite3", timeout=30) as db:
        return db.execute(sql, args).fetchall()


@linux_only
def test_a_run_survives_serve_killed_with_sigkill_and_started_again(
    serve_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "convfinqa"
    shutil.copytree(EXAMPLES / "convfinqa", agent_dir, ignore=shutil.ignore_patterns("results"))
    agent = agent_dir / "agent.yaml"
    agent.write_text(
        agent.read_text().replace("provider: scripted", "provider: scripted\n  latency_ms: 800", 1)
    )
    log = tmp_path / "serve.log"
    first, _ = start_serve(serve_env, log)
    family = descendants_of(first.pid)
    try:
        launched = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", LAUNCH.format(path=str(agent))],
            cwd=REPO,
            env=serve_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert launched.returncode == 0, launched.stderr[-3000:]
        run_id = int(launched.stdout.strip().splitlines()[-1])
        mid_case = (
            "select count(*) from runs_turnresult t join runs_caseresult c on t.case_id = c.id "
            "where c.run_id = ? and c.status = 'running'"
        )
        wait_for("a case is mid-turns", lambda: query(serve_env, mid_case, run_id)[0][0], 60, log)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    killed_at = time.monotonic()
    wait_for("serve's children are gone", lambda: not any(map(proc_stat, family)), 30, log)

    second, _ = start_serve(serve_env, log)
    try:
        status = "select status from runs_run where id = ?"
        wait_for(
            "the run ends",
            lambda: query(serve_env, status, run_id)[0][0] not in ("queued", "running"),
            RECOVERY_BUDGET_S,
            log,
        )
        assert time.monotonic() - killed_at < RECOVERY_BUDGET_S
    finally:
        # At once, not stopped cleanly (a worker's warm shutdown takes 5-8 s): what is read
        # below was committed before the run ended, and test_serve.py checks a clean stop.
        kill_tree(second)
    ((run_status, total_turns, turns_done, cases_done, passed, failed),) = query(
        serve_env,
        "select status, total_turns, turns_done, cases_done, passed_cases, failed_cases "
        "from runs_run where id = ?",
        run_id,
    )
    assert run_status == "failed"  # the example's deliberately failing case
    statuses = query(serve_env, "select status from runs_caseresult where run_id = ?", run_id)
    assert {s for (s,) in statuses} == {"done"}
    ((rows, distinct),) = query(
        serve_env,
        "select count(*), count(distinct case_id || ':' || \"index\") from runs_turnresult "
        "where run_id = ?",
        run_id,
    )
    assert rows == distinct == total_turns == turns_done == 10
    assert (cases_done, passed, failed) == (3, 2, 1)
