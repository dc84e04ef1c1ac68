"""End-to-end throughput of dashboard runs: a real Celery worker on the embedded broker and
SQLite (the first README command's setup), or on Redis/PostgreSQL when REDIS_URL/DATABASE_URL
are set.

    .venv/bin/python benchmarks/worker_bench.py [--workers 2] [--parallel 4] [--latency-ms 20]

Runs ../shared/fixtures/convfinqa/convfinqa_subset_inline.yaml (133 cases, 485 turns) with the
scripted provider and reports wall time from launch to the run's end, and turns per second.
"""

from __future__ import annotations

import argparse
import os
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
test_cases_file: {fixture}
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=20)
    args = parser.parse_args()
    if not FIXTURE.exists():
        sys.exit(f"fixture not found: {FIXTURE}")
    with tempfile.TemporaryDirectory() as tmp:
        agent = Path(tmp) / "agent.yaml"
        agent.write_text(AGENT.format(latency=args.latency_ms, fixture=FIXTURE))
        os.environ.setdefault("HOLODECK_DATA_DIR", str(Path(tmp) / "data"))
        os.environ["DJANGO_SETTINGS_MODULE"] = "holodeck_web.settings"
        sys.path.insert(0, str(REPO))
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v", "0"], cwd=REPO, check=True)
        from runs.management.commands.serve import worker_command

        worker = subprocess.Popen(
            worker_command(args.workers),
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(5)  # worker start-up
            print(measure(agent, args.parallel, args.latency_ms))
        finally:
            worker.terminate()
            worker.wait(timeout=60)


def measure(agent: Path, parallel: int, latency_ms: float) -> str:
    import django

    django.setup()
    from django.db import connection, transaction

    from runs.services.launch import run_create
    from runs.services.projects import project_register

    project = project_register(agent_path=agent)
    with transaction.atomic():
        run = run_create(project=project, parallel=parallel)
    started = time.perf_counter()
    while True:
        run.refresh_from_db()
        if not run.is_active:
            break
        time.sleep(0.2)
    elapsed = time.perf_counter() - started
    return (
        f"{connection.vendor}, {run.total_cases} cases / {run.turns_done} turns, parallel "
        f"{parallel}, {latency_ms:g} ms model latency: {run.status} in {elapsed:.1f}s "
        f"({run.turns_done / elapsed:.0f} turns/s)"
    )


if __name__ == "__main__":
    main()
