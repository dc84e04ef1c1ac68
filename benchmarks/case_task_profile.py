"""Profile the case task: where a worker's time goes when it executes the cases of one run.

    .venv/bin/python benchmarks/case_task_profile.py [--cases 133] [--top 25] [--sort cumulative]
    .venv/bin/python benchmarks/case_task_profile.py --no-profile   # time, CPU, statements only
    DATABASE_URL=postgres://... .venv/bin/python benchmarks/case_task_profile.py \
        --use-configured-db

Launches the 485-turn ConvFinQA fixture (../shared/fixtures, copied into the agent directory;
scripted provider, 0 ms latency) in a temporary SQLite database (or the configured one, which
keeps the run), then executes its first N cases (default: all 133) in this process under
cProfile, as one worker process would. Prints the time and CPU per case and per turn, the SQL
statements per turn (counted on every thread's connection: the recorder writes from a thread of
its own), how often the agent was loaded (``load_agent``: once per run and process is the
design) and the most expensive functions. cProfile sees only this thread: the recorder
thread's time shows as waiting.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO.parent / "shared" / "fixtures" / "convfinqa" / "convfinqa_subset_inline.yaml"
AGENT = """\
name: convfinqa-profile
model: {provider: scripted, name: generated}
instructions: {inline: Answer from the filing.}
evaluations:
  metrics:
    - {type: standard, metric: numeric, relative_tolerance: 0.01}
test_cases_file: cases.yaml
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=133)
    parser.add_argument("--top", type=int, default=25, help="how many functions to list")
    parser.add_argument("--sort", default="tottime", help="pstats order: tottime, cumulative")
    parser.add_argument("--use-configured-db", action="store_true")
    parser.add_argument(
        "--no-profile", action="store_true", help="time and CPU only, without cProfile's overhead"
    )
    args = parser.parse_args()
    if not FIXTURE.exists():
        sys.exit(f"fixture not found: {FIXTURE}")
    with tempfile.TemporaryDirectory() as tmp:
        names = ["REDIS_URL", "CELERY_BROKER_URL"]
        if not args.use_configured_db:
            names.append("DATABASE_URL")
        for name in names:
            os.environ.pop(name, None)
        os.environ["HOLODECK_DATA_DIR"] = str(Path(tmp) / "data")
        os.environ["DJANGO_SETTINGS_MODULE"] = "holodeck_web.settings"
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        sys.path.insert(0, str(REPO))
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        agent_dir = Path(tmp) / "agent"
        agent_dir.mkdir()
        shutil.copy(FIXTURE, agent_dir / "cases.yaml")
        (agent_dir / "agent.yaml").write_text(AGENT)
        top = 0 if args.no_profile else args.top
        print(profile(agent_dir / "agent.yaml", args.cases, top, args.sort))


def profile(agent: Path, count: int, top: int, sort: str) -> str:
    from django.db import connection

    from runs.models import CaseRow, TurnRow
    from runs.services.execution import case_execute, run_start
    from runs.services.launch import run_create
    from runs.services.projects import project_register

    run = run_create(project=project_register(agent_path=agent), parallel=1, limit=count)
    run_start(run_id=run.pk)
    profiler = cProfile.Profile()
    queries = QueryCounter()
    started, cpu_started = time.perf_counter(), time.process_time()
    with queries:
        if top:
            profiler.enable()
        # As the run's tasks would: a task goes on to the run's next cases itself for a while,
        # so the next task takes the first case still pending.
        while case_id := _next_pending(run.pk):
            case_execute(case_id=case_id)
        profiler.disable()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    executed = CaseRow.objects.filter(run=run, status=CaseRow.Status.DONE).count()
    turns = TurnRow.objects.filter(run=run).count()
    lines = [
        f"{connection.vendor}: {executed} cases / {turns} turns in {elapsed:.2f}s "
        f"({elapsed / executed * 1000:.1f} ms per case, {elapsed / turns * 1000:.2f} ms per "
        f"turn{', under cProfile' if top else ''}); CPU of this process (all threads) "
        f"{cpu / turns * 1000:.2f} ms per turn",
        f"{queries.total} SQL statements, {queries.total / turns:.1f} per turn (BEGIN/COMMIT "
        "counted on SQLite only); by kind: "
        + ", ".join(f"{kind} {n}" for kind, n in queries.kinds.most_common()),
    ]
    if top:
        stats = pstats.Stats(profiler)
        loads, load_time = _calls(stats, "loader.py", "load_agent")
        listing = io.StringIO()
        stats.stream = listing  # type: ignore[attr-defined]
        stats.sort_stats(sort).print_stats(top)
        lines.insert(0, listing.getvalue())
        lines.append(
            f"load_agent called {loads} time(s), {load_time:.2f}s cumulative "
            f"({load_time / elapsed * 100:.1f}% of the task time)"
        )
    return "\n".join(lines)


class QueryCounter:
    """Counts the SQL statements of every connection (the recorder writes from a thread of its
    own), by their first word."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.kinds.values())

    def __enter__(self) -> QueryCounter:
        from django.db import connections
        from django.db.backends.signals import connection_created

        for conn in connections.all():
            conn.execute_wrappers.append(self)
        connection_created.connect(self._attach)
        return self

    def __exit__(self, *_: object) -> None:
        from django.db.backends.signals import connection_created

        connection_created.disconnect(self._attach)

    def _attach(self, sender: Any, connection: Any, **_: Any) -> None:
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.kinds[sql.split(None, 1)[0].upper()] += 1
        return execute(sql, params, many, context)


def _next_pending(run_id: int) -> int | None:
    from runs.models import CaseRow

    return (
        CaseRow.objects.filter(run_id=run_id, status=CaseRow.Status.PENDING)
        .order_by("index")
        .values_list("pk", flat=True)
        .first()
    )


def _calls(stats: pstats.Stats, filename: str, function: str) -> tuple[int, float]:
    for (file, _, name), (_, calls, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        if file.endswith(filename) and name == function:
            return calls, cumulative
    return 0, 0.0


if __name__ == "__main__":
    main()
