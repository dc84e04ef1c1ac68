"""How long a small run waits behind a big one: a 4-case re-grade, and a 4-case run, launched
while a 133-case run keeps every worker slot busy, with a real Celery worker (embedded broker
and SQLite, or Redis/PostgreSQL when REDIS_URL/DATABASE_URL are set).

    .venv/bin/python benchmarks/fair_queue_bench.py [--workers 2] [--latency-ms 300]
        [--rounds 1]

Each round starts a worker (``--workers`` processes), then:

1. runs 4 cases of ../shared/fixtures/convfinqa/convfinqa_subset_inline.yaml (the scripted
   provider with ``--latency-ms`` per model call), to have a run to re-grade;
2. launches the whole file (133 cases, ``parallel_test_cases: 2`` as in examples/convfinqa) and
   waits until it has finished a few cases (every slot is then busy with it);
3. re-grades the 4-case run (the "Re-grade" button's ``run_regrade_create``) and reports its
   wait (from the run's creation to its first case's start, as the rows record them) and its
   turnaround (to its end);
4. launches 4 cases of the same agent as a run of their own, and reports the same;
5. cancels the big run and stops the worker.

"Before" is measured by running this script from a checkout of the earlier code (it only uses
services both have).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Beside this script: the staged agent, Django on the embedded defaults, the worker's ping.
from worker_bench import REPO, django_start, stage_agent, wait_ready

AGENT = """\
name: convfinqa-fair-queue-bench
model: {{provider: scripted, name: generated, latency_ms: {latency}}}
instructions: {{inline: Answer from the filing.}}
evaluations:
  metrics:
    - {{type: standard, metric: numeric, relative_tolerance: 0.01}}
execution:
  parallel_test_cases: 2
test_cases_file: cases.yaml
"""
SMALL = 4
BUSY_CASES = 4  # the big run's cases done before the small ones are launched
END_SECONDS = 600.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2, help="worker processes (concurrency)")
    parser.add_argument("--latency-ms", type=float, default=300)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        agent = stage_agent(Path(tmp), AGENT.format(latency=args.latency_ms))
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        django_start(Path(tmp))
        from django.db import connection

        from runs.services.projects import project_register

        project = project_register(agent_path=agent)
        waits: dict[str, list[float]] = {"re-grade": [], "run": []}
        for number in range(1, args.rounds + 1):
            for line, kind, wait in one_round(project, args.workers):
                print(f"round {number}, {line}", flush=True)
                waits[kind].append(wait)
        print(
            f"{connection.vendor}, {args.workers} worker process(es), "
            f"{args.latency_ms:g} ms model latency; median wait behind the 133-case run: "
            + ", ".join(
                f"{SMALL}-case {kind} {statistics.median(found):.1f} s"
                for kind, found in waits.items()
            )
        )


def one_round(project: Any, workers: int) -> list[tuple[str, str, float]]:
    from runs.management.commands.serve import worker_command
    from runs.services.launch import run_cancel, run_create
    from runs.services.regrade import run_regrade_create

    worker = subprocess.Popen(
        worker_command(workers), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_ready()
        original = wait_end(run_create(project=project, limit=SMALL))
        big = run_create(project=project)
        wait_busy(big.pk)
        lines = []
        for kind, launch in (
            ("re-grade", lambda: run_regrade_create(original=original)),
            ("run", lambda: run_create(project=project, limit=SMALL)),
        ):
            started = time.perf_counter()
            small = launch()
            launched = time.perf_counter() - started
            wait_end(small)
            wait, turnaround = timings(small.pk)
            done = big_cases_done(big.pk)
            lines.append(
                (
                    f"{SMALL}-case {kind} #{small.pk} ({small.status}): waited {wait:.1f} s for "
                    f"its first case, ended {turnaround:.1f} s after its launch (the launch "
                    f"itself {launched:.1f} s; the big run had {done} of {big.total_cases} "
                    "cases done)",
                    kind,
                    wait,
                )
            )
        big.refresh_from_db()
        run_cancel(run=big)
        return lines
    finally:
        worker.terminate()
        worker.wait(timeout=60)


def wait_end(run: Any) -> Any:
    from runs.models import Run

    # Polled by its status alone: the whole row holds the config snapshot.
    status = Run.objects.filter(pk=run.pk).values_list("status", flat=True)
    deadline = time.monotonic() + END_SECONDS
    while status.get() in Run.ACTIVE:
        if time.monotonic() > deadline:
            sys.exit(f"run #{run.pk} did not end in {END_SECONDS:.0f} s")
        time.sleep(0.05)
    run.refresh_from_db()
    return run


def wait_busy(run_id: int) -> None:
    while big_cases_done(run_id) < BUSY_CASES:
        time.sleep(0.05)


def big_cases_done(run_id: int) -> int:
    from runs.models import Run

    return int(Run.objects.filter(pk=run_id).values_list("cases_done", flat=True).get())


def timings(run_id: int) -> tuple[float, float]:
    """(launch to its first case's start, launch to its end), in seconds, from the rows."""
    from django.db.models import Max, Min

    from runs.models import CaseRow, Run

    created, finished = Run.objects.filter(pk=run_id).values_list("created_at", "finished_at").get()
    found = CaseRow.objects.filter(run_id=run_id).aggregate(
        first=Min("started_at"), last=Max("finished_at")
    )
    end = finished or found["last"]
    return (
        (found["first"] - created).total_seconds(),
        (end - created).total_seconds(),
    )


if __name__ == "__main__":
    main()
