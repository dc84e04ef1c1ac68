"""Profile the case task: where a worker's time goes when it executes the cases of one run.

    .venv/bin/python benchmarks/case_task_profile.py [--cases 40]

Launches the 485-turn ConvFinQA fixture (../shared/fixtures, scripted provider, 0 ms latency)
in a temporary SQLite database, then executes its first N cases one after another in this
process under cProfile, as one worker process would. Prints the time per case and how often
the agent was loaded (``load_agent``) and what that cost: once per run and process is the
design; the code before it loaded the agent (and its 800 KB test cases file) for every case.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO.parent / "shared" / "fixtures" / "convfinqa" / "convfinqa_subset_inline.yaml"
AGENT = """\
name: convfinqa-profile
model: {{provider: scripted, name: generated}}
instructions: {{inline: Answer from the filing.}}
evaluations:
  metrics:
    - {{type: standard, metric: numeric, relative_tolerance: 0.01}}
test_cases_file: {fixture}
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=40)
    args = parser.parse_args()
    if not FIXTURE.exists():
        sys.exit(f"fixture not found: {FIXTURE}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
            os.environ.pop(name, None)
        os.environ["HOLODECK_DATA_DIR"] = str(Path(tmp) / "data")
        os.environ["DJANGO_SETTINGS_MODULE"] = "holodeck_web.settings"
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        sys.path.insert(0, str(REPO))
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        agent = Path(tmp) / "agent.yaml"
        agent.write_text(AGENT.format(fixture=FIXTURE))
        print(profile(agent, args.cases))


def profile(agent: Path, count: int) -> str:
    from runs.models import CaseResult
    from runs.services.execution import case_execute, run_start
    from runs.services.launch import run_create
    from runs.services.projects import project_register

    run = run_create(project=project_register(agent_path=agent), parallel=1)
    run_start(run_id=run.pk)
    case_ids = list(
        CaseResult.objects.filter(run=run).order_by("index").values_list("pk", flat=True)
    )[:count]
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for case_id in case_ids:
        case_execute(case_id=case_id)  # a task may go on to the run's next cases itself
    profiler.disable()
    elapsed = time.perf_counter() - started
    executed = CaseResult.objects.filter(run=run, status=CaseResult.Status.DONE).count()
    stats = pstats.Stats(profiler)
    loads, load_time = _calls(stats, "loader.py", "load_agent")
    return (
        f"{executed} cases in {elapsed:.2f}s ({elapsed / executed * 1000:.1f} ms per case); "
        f"load_agent called {loads} time(s), {load_time:.2f}s cumulative "
        f"({load_time / elapsed * 100:.1f}% of the task time)"
    )


def _calls(stats: pstats.Stats, filename: str, function: str) -> tuple[int, float]:
    for (file, _, name), (_, calls, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        if file.endswith(filename) and name == function:
            return calls, cumulative
    return 0, 0.0


if __name__ == "__main__":
    main()
