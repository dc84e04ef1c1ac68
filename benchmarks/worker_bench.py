"""End-to-end throughput of dashboard runs: a real Celery worker on the embedded broker and
SQLite (the first README command's setup), or on Redis/PostgreSQL when REDIS_URL/DATABASE_URL
are set.

    .venv/bin/python benchmarks/worker_bench.py [--workers 2] [--parallel 4] [--latency-ms 20]
        [--rounds 3] [--repeats 10] [--compare]

Runs ../shared/fixtures/convfinqa/convfinqa_subset_inline.yaml (133 cases, 485 turns, copied
into the agent directory: a run holds only its snapshot's files) with the scripted provider and
reports wall time from launch to the run's end, and turns per second. ``--workers`` is the
number of worker processes (Celery's ``--concurrency``); each round starts a new worker, waits
until it answers, launches one run and stops the worker; the median of the rounds is printed.
Also printed: the CPU time the worker's processes spent on the run, per turn (read from /proc;
less sensitive than wall time to other work on the machine). ``--repeats N`` runs each case N
times (``execution.repeats``: 133 × 10 = 1,330 case rows, 4,850 turns). The storage of the
run's transcripts (bytes of events per turn) is printed too. ``--compare`` then times
the compare page of the last two runs (rendered by Django's test client, logged in, the median
of 5 renders after one warm-up).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO.parent / "shared" / "fixtures" / "convfinqa" / "convfinqa_subset_inline.yaml"

AGENT = """\
name: convfinqa-worker-bench
model: {{provider: scripted, name: generated, latency_ms: {latency}}}
instructions: {{inline: Answer from the filing.}}
evaluations:
  metrics:
    - {{type: standard, metric: numeric, relative_tolerance: 0.01}}
test_cases_file: cases.yaml
"""
READY_SECONDS = 60.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2, help="worker processes (concurrency)")
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1, help="each case's repetitions")
    parser.add_argument(
        "--compare", action="store_true", help="then time the compare page of the last two runs"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        agent = stage_agent(Path(tmp), AGENT.format(latency=args.latency_ms))
        django_start(Path(tmp))
        rates = []
        runs = []
        for _ in range(args.rounds):
            line, rate, run_id = one_round(
                agent, args.workers, args.parallel, args.latency_ms, args.repeats
            )
            print(line, flush=True)
            rates.append(rate)
            runs.append(run_id)
        if args.compare and len(runs) >= 2:
            print(compare_timing(runs[-2], runs[-1]), flush=True)
        if args.rounds > 1:
            print(
                f"median of {args.rounds} rounds, {args.workers} worker process(es): "
                f"{statistics.median(rates):.0f} turns/s"
            )


def stage_agent(tmp: Path, agent_yaml: str) -> Path:
    """An agent directory in ``tmp``: ``agent_yaml`` over the 133-case ConvFinQA fixture
    (``cases.yaml``); its agent.yaml."""
    if not FIXTURE.exists():
        sys.exit(f"fixture not found: {FIXTURE}")
    agent_dir = tmp / "agent"
    agent_dir.mkdir()
    shutil.copy(FIXTURE, agent_dir / "cases.yaml")
    agent = agent_dir / "agent.yaml"
    agent.write_text(agent_yaml)
    return agent


def django_start(tmp: Path) -> None:
    """Django on the embedded defaults in a data folder under ``tmp`` (unless
    HOLODECK_DATA_DIR is set), migrated."""
    os.environ.setdefault("HOLODECK_DATA_DIR", str(tmp / "data"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "holodeck_web.settings"
    sys.path.insert(0, str(REPO))
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, check=True)
    import django

    django.setup()


def one_round(
    agent: Path, workers: int, parallel: int, latency_ms: float, repeats: int
) -> tuple[str, float, int]:
    from runs.management.commands.serve import worker_command

    worker = subprocess.Popen(
        worker_command(workers),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_ready()
        return measure(agent, worker.pid, workers, parallel, latency_ms, repeats)
    finally:
        worker.terminate()
        worker.wait(timeout=60)


def wait_ready() -> None:
    """Until the worker answers a ping (Redis, RabbitMQ); a fixed wait on the embedded broker."""
    from django.conf import settings

    from holodeck_web.celery import app

    if settings.EMBEDDED_BROKER:
        time.sleep(5)
        return
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if app.control.ping(timeout=0.5):
            time.sleep(0.5)  # the pool's children finish starting
            return
    sys.exit("the worker did not start")


def measure(
    agent: Path, worker: int, workers: int, parallel: int, latency_ms: float, repeats: int
) -> tuple[str, float, int]:
    from django.db import connection, transaction

    from runs.models import Run
    from runs.services.launch import run_create
    from runs.services.projects import project_register

    project = project_register(agent_path=agent)
    with transaction.atomic():
        run = run_create(project=project, parallel=parallel, repeats=repeats)
    started, cpu_before = time.perf_counter(), cpu_seconds(worker)
    # Polled by its status alone: the whole row holds the config snapshot (every test case),
    # which this process would otherwise read 20 times a second.
    status = Run.objects.filter(pk=run.pk).values_list("status", flat=True)
    while status.get() in Run.ACTIVE:
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(worker) - cpu_before
    run.refresh_from_db()
    rate = run.turns_done / elapsed
    line = (
        f"{connection.vendor}, {workers} worker process(es), {run.total_cases} case rows "
        f"({run.repeats} repetition(s) each) / "
        f"{run.turns_done} turns, parallel {parallel}, {latency_ms:g} ms model latency: "
        f"{run.status} in {elapsed:.2f}s ({rate:.0f} turns/s; worker CPU "
        f"{cpu * 1000 / max(run.turns_done, 1):.2f} ms per turn)\n  " + transcript_storage(run.pk)
    )
    return line, rate, run.pk


def transcript_storage(run_id: int) -> str:
    """What the run's transcripts take: bytes of their events (JSON) per turn."""
    from django.db.models import Avg, Count, Max, Sum

    from runs.models import TurnTranscript

    sizes = TurnTranscript.objects.filter(run_id=run_id).aggregate(
        turns=Count("pk"), total=Sum("size_bytes"), mean=Avg("size_bytes"), top=Max("size_bytes")
    )
    if not sizes["turns"]:
        return "transcripts: none stored"
    return (
        f"transcripts: {sizes['turns']} turns, {sizes['total'] / 1024:.0f} KB of events, "
        f"{sizes['mean']:.0f} bytes per turn on average (largest {sizes['top']})"
    )


def compare_timing(before: int, after: int) -> str:
    """The compare page of two runs, rendered as a browser asks for it (median of 5)."""
    from django.contrib.auth.models import User
    from django.test import Client

    user, _ = User.objects.get_or_create(username="bench", defaults={"is_staff": True})
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    url = f"/compare/?runs={before},{after}"
    response = client.get(url)  # warm-up
    assert response.status_code == 200, response.status_code
    times = []
    for _ in range(5):
        started = time.perf_counter()
        client.get(url)
        times.append((time.perf_counter() - started) * 1000)
    return (
        f"compare of runs #{before} and #{after}: {statistics.median(times):.0f} ms (median of 5)"
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process and its children (the pool), 0 without /proc."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # fields[0] is the state (field 3); ppid is field 4, utime and stime fields 14 and 15.
        if stat.parent.name == str(pid) or fields[1] == str(pid):
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


if __name__ == "__main__":
    main()
