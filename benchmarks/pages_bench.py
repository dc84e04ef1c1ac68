"""Server time and HTML size of the run page, its live poll and the home page.

    .venv/bin/python benchmarks/pages_bench.py [--cases 10000] [--turns 5] [--projects 200]
    DATABASE_URL=postgres://... .venv/bin/python benchmarks/pages_bench.py --use-configured-db
    (PostgreSQL, add --analyze: VACUUM ANALYZE once built, as autovacuum does in time)

Builds, in a throwaway SQLite database (or the configured one with ``--use-configured-db``):

- a finished run of ``--cases`` × ``--turns`` (every 7th case failing, every 50th not graded),
  ended by the recorder's ``run_finish`` as a real run is (so its summary is stored);
- a running run of the same size, half of its cases done;
- a finished repeated run of ``--cases`` single-turn case rows: ``--cases`` / ``--repeats``
  cases, each ``--repeats`` times (its page lists one row per case), ended by ``run_finish``;
- ``--projects`` projects with ``--runs-per-project`` runs each (the home page lists them).

Then it times Django test Client requests (median of N, after one warm-up request). The polls
use the URL the running run's page gives ``#run-progress``, as the browser does:

- "nothing changed": no case finished since the page was rendered;
- "10 cases finished": ten cases finished (and the run's counters moved) since;
- "run finished": the run ended since (the last poll, which stops the polling).

The finished run's turns each have a transcript (about 1.5 KB of events, as a ConvFinQA turn's;
its message names the turn's ticket, "T-<case>-<turn>"): the pages never read them; "open a
case's transcript" reads one case's, and "text in a transcript" searches them for a ticket
(through their search text's index, as "text search" does the responses).

With reviews (issue 39): ``--reviews`` (2,000) reviews on the finished run's turns, its
failing ones first, then the run page, its untriaged filter and its review tile (a request of
its own, drawn once the page is), and a project whose latest run has ``--queue-failures``
(1,000) untriaged failing turns: its review queue.

Targets (the 2-core development machine; issue 43 at 100,000 cases × 5 turns on PostgreSQL):
the run page ≤ 60 ms with or without "only failures", "not graded only", "a metric failed" or
"tool assertions failed", whatever the run's size; a text search in the responses, or in the
transcripts, ≤ 150 ms;
the next 100 cases ≤ 30 ms; the repeated run's page ≤ 60 ms; a poll with nothing new ≤ 20 ms,
the last poll (the run finished) ≤ 30 ms; expanding a case ≤ 50 ms; opening a case's
transcript ≤ 50 ms; the home page with 200 projects ≤ 30 ms; with 2,000 reviews the run page,
its untriaged filter and its review tile ≤ 60 ms each; the review queue of 1,000 failures
≤ 100 ms; every page ≤ 300 KB.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KB = 1024
# (median ms, bytes); None: no target, measured for the record.
TARGETS: dict[str, tuple[float | None, int | None]] = {
    "run page": (60.0, 300 * KB),
    "run page, only failures": (60.0, 300 * KB),
    "run page, not graded only": (60.0, 300 * KB),
    "run page, a metric failed": (60.0, 300 * KB),
    "run page, tools failed": (60.0, 300 * KB),
    "run page, text search": (150.0, 300 * KB),
    "run page, text in a transcript": (150.0, 300 * KB),
    "run page, next 100 cases": (30.0, 300 * KB),
    "repeated run page": (60.0, 300 * KB),
    "repeated, only failures": (60.0, 300 * KB),
    "expand one case": (50.0, None),
    "open a case's transcript (API)": (50.0, None),
    "poll, nothing changed": (20.0, 300 * KB),
    "poll, 10 cases finished": (None, 300 * KB),
    "poll, run finished": (30.0, 300 * KB),
    "home": (30.0, 300 * KB),
    "run page, 2,000 reviews": (60.0, 300 * KB),
    "run page, untriaged only": (60.0, 300 * KB),
    "run page's review tile": (60.0, 300 * KB),
    "review queue, 1,000 failures": (100.0, 300 * KB),
}
LOAD_MORE_URL = re.compile(r'class="btn btn-small load-more" hx-get="([^"]+)"')
POLL_URL = re.compile(r'id="run-progress"[^>]*?hx-get="([^"]+)"', re.S)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--projects", type=int, default=200)
    parser.add_argument("--runs-per-project", type=int, default=5)
    parser.add_argument("--reviews", type=int, default=2000)
    parser.add_argument("--queue-failures", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--use-configured-db", action="store_true")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="with --use-configured-db: leave the built rows in the database (to study them)",
    )
    parser.add_argument(
        "--analyze",
        action="store_true",
        help="PostgreSQL: VACUUM ANALYZE the tables once built, as autovacuum does in time "
        "(without, the planner has no statistics of the rows just written)",
    )
    args = parser.parse_args()

    scratch = tempfile.TemporaryDirectory(prefix="holodeck-bench-")
    if not args.use_configured_db:
        os.environ["HOLODECK_DATA_DIR"] = scratch.name
        os.environ["DATABASE_URL"] = f"sqlite:///{Path(scratch.name) / 'bench.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "holodeck_web.settings")
    sys.path.insert(0, str(REPO))

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()  # lets the test Client run with ALLOWED_HOSTS=testserver
    call_command("migrate", verbosity=0)

    from runs.models import AgentProject, Run
    from runs.recorder import run_finish
    from tests.web.factories import (
        RunSpec,
        build_run,
        failing_case,
        make_not_graded,
        make_project,
        make_user,
        repeated_run,
    )

    started = time.perf_counter()
    tag = f"bench-{os.getpid()}"
    project = make_project(tag, "/tmp/bench-agent")
    spec = RunSpec(cases=args.cases, turns=args.turns, failing=range(1, args.cases, 7))
    run = build_run(project, spec)
    stored = transcripts_add(run)
    for index in range(3, args.cases, 50):  # could not be graded: the header names why
        make_not_graded(run, index)
    run_finish(run.pk)  # stores its summary, as every finished run has
    spec.status, spec.done = Run.Status.RUNNING, args.cases // 2
    running = build_run(project, spec)
    chances = [0.8] * max(1, args.cases // args.repeats)
    repeated = repeated_run(project, chances, repeats=args.repeats, seed=1)
    run_finish(repeated.pk)  # its summary and list counts stored, as a finished run's are
    projects = home_projects(tag, args.projects, args.runs_per_project)
    if args.analyze:
        vacuum_analyze()
    print(
        f"2 runs of {args.cases} cases × {args.turns} turns (one finished, one half done), "
        f"{len(chances)} cases × {args.repeats} repetitions and "
        f"{args.projects} projects × {args.runs_per_project} runs, "
        f"{stored} transcripts (the finished run's turns), built in "
        f"{time.perf_counter() - started:.1f} s on {connection.vendor}"
        f"{' (configured DB)' if args.use_configured_db else ' (temporary SQLite)'}\n"
    )
    # The data was built in this process: its garbage would be collected during the timed
    # requests (a server process carries none of it), so collect it now and freeze what is left.
    gc.collect()
    gc.freeze()
    client = Client()
    client.force_login(make_user(tag))
    htmx = {"HX-Request": "true"}
    print(f"{'page':<26} {'median ms':>10} {'max ms':>8} {'KB':>8}  target")
    failed = False

    def report(name: str, url: str, headers: dict[str, str] | None = None) -> None:
        nonlocal failed
        times, size = measure(client, url, headers or {}, args.repeat)
        failed |= not print_line(name, times, size)

    case = failing_case(run)
    report("run page", f"/runs/{run.pk}/")
    report("run page, only failures", f"/runs/{run.pk}/?failures=1")
    report("run page, not graded only", f"/runs/{run.pk}/?outcome=not_graded")
    report("run page, a metric failed", f"/runs/{run.pk}/?metric=rouge")
    report("run page, tools failed", f"/runs/{run.pk}/?tools=failed")
    # A scan of every response of the run (the text is in one of them).
    report("run page, text search", f"/runs/{run.pk}/?text=order+{args.cases // 2}-2")
    report("run page, text in a transcript", f"/runs/{run.pk}/?text=T-{args.cases // 2}-2")
    report("run page, next 100 cases", load_more_url(client, run), htmx)
    report("repeated run page", f"/runs/{repeated.pk}/")
    report("repeated, only failures", f"/runs/{repeated.pk}/?failures=1")
    report("expand one case", f"/runs/{run.pk}/cases/{case.pk}/turns/", htmx)
    report("open a case's transcript (API)", f"/api/v1/runs/{run.pk}/cases/{case.pk}/transcript")

    poll = poll_url(client, running)
    report("poll, nothing changed", poll, htmx)
    finish_cases(running, 10)
    report("poll, 10 cases finished", poll, htmx)
    run_finish(running.pk)
    report("poll, run finished", poll, htmx)
    report("home", "/")

    reviews_add(run, args.reviews)
    report("run page, 2,000 reviews", f"/runs/{run.pk}/")
    report("run page, untriaged only", f"/runs/{run.pk}/?review=untriaged")
    # The review tile loads itself once the page is drawn: its own request, its own target.
    report("run page's review tile", f"/runs/{run.pk}/reviews/tile/", htmx)
    queued = queue_project(tag, args.queue_failures)
    report("review queue, 1,000 failures", f"/projects/{queued.pk}/review/")

    if args.use_configured_db and not args.keep:
        Run.objects.filter(project__in=[project, *projects]).delete()
        AgentProject.objects.filter(pk__in=[p.pk for p in [project, *projects]]).delete()
    scratch.cleanup()
    return 1 if failed else 0


def transcripts_add(run: Any) -> int:
    """A transcript on every turn of ``run``, the size of a ConvFinQA turn's (about 1.5 KB:
    a model call asking for two tools, their calls, the answering call and its text; the
    system prompt on each case's first turn). Pages must not read them: only an opened
    transcript does."""
    from runs.models import TurnRow, TurnTranscript

    def events(case: int, index: int) -> list[dict[str, Any]]:
        call = {
            "type": "model_call",
            "model": "gpt-4o-mini",
            "duration_ms": 812.5,
            "input_tokens": 1830,
            "output_tokens": 41,
            "cached_tokens": 1024,
            "stop_reason": "tool_calls",
            "attempt": 1,
            "messages": 4,
        }
        tool = {
            "type": "tool_call",
            "id": "call_1",
            "name": "tools-lookup",
            "args": {"table": "net revenue", "year": 2009},
            "result": 206588,
            "error": None,
            "start_ms": 820.1,
            "duration_ms": 0.4,
        }
        found = [
            {
                "type": "user",
                "text": f"what was the change in net revenue from 2008 to 2009? (T-{case}-{index})",
            },
            {**call, "start_ms": 0.0},
            tool,
            {**tool, "id": "call_2", "result": 181001},
            {**call, "start_ms": 821.0, "stop_reason": "stop", "output_tokens": 12},
            {"type": "assistant", "text": "The net revenue grew by 25587."},
        ]
        if index == 0:
            found.insert(
                0,
                {
                    "type": "system",
                    "text": "Answer from the filing. " * 40,
                    "source": "prompts/system.md",
                },
            )
        return found

    rows = []
    turns = TurnRow.objects.filter(run=run).values_list("pk", "case__index", "index")
    for pk, case, index in turns.iterator():
        stored = events(case, index)
        rows.append(TurnTranscript.of_events(stored, turn_id=pk, run=run))
    TurnTranscript.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


def reviews_add(run: Any, count: int) -> int:
    """``count`` reviews on ``run``'s turns (its failing turns first), each triaged into one of
    its project's default categories, as reviewers leave them."""
    from django.contrib.auth.models import User

    from runs.models import TurnRow
    from runs.review_models import Review
    from runs.services.reviews import categories_ensure

    categories = categories_ensure(project_id=run.project_id)
    reviewer = User.objects.create_user(username=f"reviewer-{run.pk}")
    turns = list(
        TurnRow.objects.filter(run=run)
        .order_by("outcome", "pk")  # "error", "failed", "not_graded" before "passed"
        .values_list("pk", "case_id", "turn_key", "definition", "failure", "outcome")[:count]
    )
    Review.objects.bulk_create(
        [
            Review(
                project_id=run.project_id, run=run, case_id=case_id, turn_id=pk,
                turn_key=key, definition=definition, failure=failure, machine_outcome=outcome,
                verdict="agrees", category=categories[n % len(categories)],
                note="the tool was **not called**", created_by=reviewer, updated_by=reviewer,
            )
            for n, (pk, case_id, key, definition, failure, outcome) in enumerate(turns)
        ],
        batch_size=1000,
    )  # fmt: skip
    return len(turns)


def queue_project(tag: str, failures: int) -> Any:
    """A project whose latest finished run has ``failures`` failing turns, none triaged."""
    from tests.web.factories import RunSpec, build_run, make_project

    project = make_project(f"{tag}-queue", "/tmp/bench-queue")
    build_run(project, RunSpec(cases=failures, turns=1, failing=range(failures)))
    return project


def print_line(name: str, times: list[float], size: int) -> bool:
    limit_ms, limit_bytes = TARGETS.get(name, (None, None))
    median = statistics.median(times)
    ok = (limit_ms is None or median <= limit_ms) and (limit_bytes is None or size <= limit_bytes)
    targets = [
        f"≤ {limit_ms:.0f} ms" if limit_ms else "",
        f"≤ {limit_bytes // KB} KB" if limit_bytes else "",
    ]
    target = ", ".join(text for text in targets if text)
    verdict = ("ok" if ok else "MISSED") if target else ""
    print(f"{name:<26} {median:>10.1f} {max(times):>8.1f} {size / KB:>8.1f}  {target} {verdict}")
    return ok


def home_projects(tag: str, count: int, runs_each: int) -> list[Any]:
    """``count`` projects with ``runs_each`` finished runs each (run rows only: the home page
    reads each project's last run, never its cases)."""
    from datetime import timedelta

    from django.utils import timezone

    from runs.models import AgentProject, Run

    projects = AgentProject.objects.bulk_create(
        [
            AgentProject(name=f"{tag}-{n:03d}", directory=f"/tmp/bench-agent-{n}")
            for n in range(count)
        ]
    )
    now = timezone.now()
    Run.objects.bulk_create(
        [
            Run(
                project=project,
                agent_name=project.name,
                status=Run.Status.FAILED if n % 2 else Run.Status.PASSED,
                git_commit=f"{n:040x}",
                total_cases=100,
                cases_done=100,
                passed_cases=90 + n,
                failed_cases=10 - n,
                pass_rate=90.0 + n,
                created_at=now - timedelta(hours=n),
            )
            for project in projects
            for n in range(runs_each)
        ],
        batch_size=500,
    )
    return projects


def poll_url(client: Any, run: Any) -> str:
    """The URL the run page polls (``#run-progress``'s hx-get), as a browser would read it."""
    import html

    page = client.get(f"/runs/{run.pk}/")
    found = POLL_URL.search(page.content.decode())
    assert found, "the running run's page does not poll"
    return html.unescape(found.group(1))


def load_more_url(client: Any, run: Any) -> str:
    """The URL of the run page's "load more" button (the next 100 cases), as a browser reads it."""
    import html

    page = client.get(f"/runs/{run.pk}/")
    found = LOAD_MORE_URL.search(page.content.decode())
    assert found, "the run page has no load-more button"
    return html.unescape(found.group(1))


def finish_cases(run: Any, count: int) -> None:
    """``count`` pending cases of ``run`` finish (rows and counters, as the recorder writes
    them; their turns are left out: the poll reads the case rows and the counters)."""
    from django.db.models import F
    from django.utils import timezone

    from runs.models import CaseRow, Run

    pending = CaseRow.objects.filter(run=run, status=CaseRow.Status.PENDING)
    ids = list(pending.order_by("index").values_list("pk", flat=True)[:count])
    CaseRow.objects.filter(pk__in=ids).update(
        status=CaseRow.Status.DONE,
        outcome="passed",
        passed=True,
        finished_at=timezone.now(),
    )
    Run.objects.filter(pk=run.pk).update(
        cases_done=F("cases_done") + len(ids), passed_cases=F("passed_cases") + len(ids)
    )


def vacuum_analyze() -> None:
    """On PostgreSQL, what autovacuum does some time after rows are written: planner statistics
    and the visibility map (index-only scans). Nothing on SQLite."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def measure(
    client: object, url: str, headers: dict[str, str], repeat: int
) -> tuple[list[float], int]:
    from django.test import Client

    assert isinstance(client, Client)
    response = client.get(url, headers=headers)  # warm-up (template compilation, caches)
    assert response.status_code in (200, 204, 286), (url, response.status_code)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url, headers=headers)
        times.append((time.perf_counter() - started) * 1000)
    return times, len(response.content)


if __name__ == "__main__":
    raise SystemExit(main())
