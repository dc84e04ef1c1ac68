"""Re-grading the 485-turn ConvFinQA fixture with deterministic metrics: the grading alone, and
end to end through a real worker.

    .venv/bin/python benchmarks/regrade_bench.py [--workers 2]

1. Runs ../shared/fixtures/convfinqa/convfinqa_subset_inline.yaml (133 cases, 485 turns) once
   with the scripted provider (``run_agent``, stored) to have a run to re-grade.
2. Grading alone: every stored turn graded again with a stricter numeric metric and a code
   grader (``runs.core.engine.regrade.regrade_case``, in this process, no database writes).
   Target < 1 s.
3. End to end: the "Re-grade" button's ``run_regrade_create`` on the registered project's run,
   with a real Celery worker (embedded broker and SQLite, or Redis/PostgreSQL when
   REDIS_URL/DATABASE_URL are set), from the click to the run's end.
   Target < 5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO.parent / "shared" / "fixtures" / "convfinqa" / "convfinqa_subset_inline.yaml"
AGENT = """\
name: convfinqa-regrade-bench
model: {{provider: scripted, name: generated}}
instructions: {{inline: Answer from the filing.}}
evaluations:
  metrics:
    - {{type: standard, metric: numeric, relative_tolerance: {tolerance}}}
{extra}test_cases_file: {fixture}
"""
GRADER = "def short(ctx):\n    return len(ctx.agent_response) <= 12\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if not FIXTURE.exists():
        sys.exit(f"fixture not found: {FIXTURE}")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("HOLODECK_DATA_DIR", str(Path(tmp) / "data"))
        os.environ["DJANGO_SETTINGS_MODULE"] = "holodeck_web.settings"
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        sys.path.insert(0, str(REPO))
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, check=True)
        import django

        django.setup()
        agent_dir = Path(tmp) / "agent"
        agent_dir.mkdir()
        (agent_dir / "agent.yaml").write_text(
            AGENT.format(tolerance=0.01, extra="", fixture=FIXTURE)
        )
        from runs.services.projects import project_register

        # A registered project, as on the dashboard: its runs are re-graded with its agent.yaml.
        project_register(agent_path=agent_dir / "agent.yaml")
        original = run_original(agent_dir / "agent.yaml")
        (agent_dir / "brevity.py").write_text(GRADER)
        (agent_dir / "agent.yaml").write_text(
            AGENT.format(
                tolerance=0.0,
                extra="    - {type: code, name: brevity, grader: 'brevity:short'}\n",
                fixture=FIXTURE,
            )
        )
        print(grading_alone(original, agent_dir / "agent.yaml"))
        print(end_to_end(original, args.workers))


def run_original(agent: Path) -> object:
    from django.core.management import call_command

    from runs.models import Run

    with contextlib.suppress(SystemExit):
        call_command("run_agent", str(agent), "--quiet", "--no-results-file")
    run = Run.objects.filter(source=Run.Source.CLI).latest("pk")
    print(f"original: run {run.pk}, {run.total_cases} cases / {run.turns_done} turns")
    return run


def grading_alone(original: object, agent_path: Path) -> str:
    from runs import selectors
    from runs.core.agentconfig.loader import load_agent
    from runs.core.engine.metrics import MetricRunner
    from runs.core.engine.regrade import regrade_case

    agent = load_agent(agent_path)
    results = selectors.run_eval_run(run=original).report.results  # type: ignore[arg-type]
    runner = MetricRunner(agent)

    async def grade_all() -> int:
        graded = 0
        for index, result in enumerate(results):
            turns = result.turns or []
            _, done = await regrade_case(
                agent,
                case_name=result.test_name,
                case_index=index,
                stored=turns,
                multi_turn=True,
                runner=runner,
            )
            graded += len(done)
        return graded

    started = time.perf_counter()
    graded = asyncio.run(grade_all())
    elapsed = time.perf_counter() - started
    return f"grading alone: {graded} turns in {elapsed:.2f} s (target < 1 s)"


def end_to_end(original: object, workers: int) -> str:
    from django.db import connection

    from runs.management.commands.serve import worker_command
    from runs.services.regrade import run_regrade_create

    worker = subprocess.Popen(
        worker_command(workers), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        time.sleep(6)  # worker start-up
        started = time.perf_counter()
        run = run_regrade_create(original=original)  # type: ignore[arg-type]
        while run.is_active:
            time.sleep(0.05)
            run.refresh_from_db()
        elapsed = time.perf_counter() - started
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    return (
        f"end to end through the worker ({connection.vendor}, {workers} processes): "
        f"{run.turns_done} turns re-graded in {elapsed:.2f} s, {run.status} (target < 5 s)"
    )


if __name__ == "__main__":
    main()
