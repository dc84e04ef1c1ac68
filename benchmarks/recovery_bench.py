"""Recovery time: from a SIGKILL in the middle of a case to the end of its run, at the default
recovery settings (HOLODECK_CASE_STALE_SECONDS=60, heartbeat 5 s, sweep 15 s).

    .venv/bin/python benchmarks/recovery_bench.py                     # embedded broker + SQLite
    REDIS_URL=redis://127.0.0.1:6379/3 DATABASE_URL=postgres://... \\
      .venv/bin/python benchmarks/recovery_bench.py                   # Redis + PostgreSQL

Two scenarios, each on a fresh run of the example agent (3 cases, 10 turns, 800 ms a model
call, two cases at a time) with a real Celery worker (2 pool processes):

1. one pool child is killed while its case is mid-turns; the worker lives on;
2. the whole worker (its process group) is killed, and a new worker is started at once.

For each: seconds from the kill to the run's end, how often the killed case ran, and the run's
final status (it must be "failed": the example has a deliberately failing case).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("HOLODECK_DATA_DIR", str(Path(tmp) / "data"))
        os.environ["DJANGO_SETTINGS_MODULE"] = "holodeck_web.settings"
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        sys.path.insert(0, str(REPO))
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, check=True)
        import django

        django.setup()
        from django.db import connection

        from holodeck_web.celery import app

        broker = "Redis" if os.environ.get("REDIS_URL") else "embedded broker"
        print(f"{broker} + {connection.vendor}")
        if os.environ.get("REDIS_URL"):
            app.control.purge()
        for scenario in ("pool child", "whole worker"):
            print(f"  {scenario} killed: {scenario_run(Path(tmp), scenario)}")


def scenario_run(tmp: Path, scenario: str) -> str:
    from runs.management.commands.serve import worker_command

    agent_dir = tmp / f"agent-{scenario.replace(' ', '-')}"
    shutil.copytree(REPO / "examples" / "convfinqa", agent_dir)
    agent = agent_dir / "agent.yaml"
    agent.write_text(
        agent.read_text().replace("provider: scripted", "provider: scripted\n  latency_ms: 800", 1)
    )
    command = [*worker_command(2), "--without-gossip", "--without-mingle"]
    workers = [_start(command)]
    try:
        run, case = _launch_and_wait_mid_case(agent)
        if scenario == "pool child":
            os.kill(int(case.claimed_by.split(":")[1]), signal.SIGKILL)
        else:
            os.killpg(workers[0].pid, signal.SIGKILL)
            workers[0].wait()
        killed = time.perf_counter()
        if scenario == "whole worker":
            workers.append(_start(command))
        while run.is_active:
            time.sleep(0.2)
            run.refresh_from_db()
        elapsed = time.perf_counter() - killed
        case.refresh_from_db()
        return (
            f"run ended {elapsed:.1f} s after the kill ({run.status}; the killed case ran "
            f"{case.attempts} times)"
        )
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.terminate()
                try:
                    worker.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    print("  (a worker did not stop within 60 s of SIGTERM: killed)")
                    os.killpg(worker.pid, signal.SIGKILL)


def _start(command: list[str]) -> subprocess.Popen[bytes]:
    log = open(os.environ.get("RECOVERY_BENCH_LOG", os.devnull), "ab")  # noqa: SIM115
    return subprocess.Popen(
        command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def _launch_and_wait_mid_case(agent: Path) -> tuple[object, object]:
    from runs.models import CaseRow, TurnRow
    from runs.services.launch import run_create
    from runs.services.projects import project_register

    run = run_create(project=project_register(agent_path=agent), parallel=2)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for case in CaseRow.objects.filter(run=run, status=CaseRow.Status.RUNNING):
            if 0 < TurnRow.objects.filter(case=case).count() < case.turn_count:
                return run, case
        time.sleep(0.1)
    sys.exit("no case reached the middle of its turns within 2 minutes")


if __name__ == "__main__":
    main()
