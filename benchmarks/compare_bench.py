"""Server time and HTML size of the compare page: 2 runs and 8 runs of 1,000 cases × 5 turns.

    .venv/bin/python benchmarks/compare_bench.py                      # temporary SQLite
    DATABASE_URL=postgres://... .venv/bin/python benchmarks/compare_bench.py --use-configured-db
    (PostgreSQL, add --analyze: VACUUM ANALYZE once built, as autovacuum does in time)
    DATABASE_URL=postgres://.../cb100k .venv/bin/python benchmarks/compare_bench.py \
        --cases 100000 --use-configured-db --analyze [--keep]
    (100,000 cases × 5 turns a run: the first run built by the factories, the 7 others cloned
    from it in SQL, 24 minutes on the shared 2-core machine; --keep leaves the rows in the
    database to study them between changes, --reuse times the 8 runs kept instead of building)

Builds the runs (every 7th case failing, shifted per run, so there are regressions and fixes),
each ended by the recorder's ``run_finish`` as a real run is (its summary stored), then times
Django test Client requests (median of N after one warm-up). Targets on the 2-core development
machine: the 2-run page ≤ 300 ms and ≤ 400 KB, the 8-run page ≤ 300 ms. The 8-run page in
commit order, with rouge's deltas sorted by its drop, and searched for a text are measured for
the record.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from pages_bench import measure, vacuum_analyze  # noqa: E402

CLONE_FROM = 10_000  # cases: building 8 such runs through the factories takes too long
TARGET_MS, TARGET_BYTES = 300.0, 400 * 1024
# page -> (median ms, bytes or None)
TARGETS = {"2 runs": (TARGET_MS, TARGET_BYTES), "8 runs": (TARGET_MS, None)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--use-configured-db", action="store_true")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="with --use-configured-db: leave the built rows in the database (to study them)",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --use-configured-db: time the last 8 runs of --cases cases a --keep left "
        "(migrated since, if need be) instead of building them",
    )
    parser.add_argument(
        "--only",
        default="",
        help="the pages to time, by name, separated by ';' (default: every page)",
    )
    parser.add_argument(
        "--clone-from",
        type=int,
        default=CLONE_FROM,
        help="at this many cases or more, build the first run with the factories and clone "
        f"the others from it in SQL (default {CLONE_FROM:,})",
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

    setup_test_environment()
    call_command("migrate", verbosity=0)
    from tests.web.factories import make_user

    started = time.perf_counter()
    if args.reuse:
        project, runs = runs_kept(args.cases)
    else:
        project, runs = runs_built(args)
    if args.analyze:
        vacuum_analyze()
    print(
        f"8 runs of {args.cases} cases × {args.turns} turns "
        f"{'found' if args.reuse else 'built'} in "
        f"{time.perf_counter() - started:.1f} s on {connection.vendor}"
        f"{' (7 cloned in SQL)' if args.cases >= args.clone_from and not args.reuse else ''}\n"
    )
    if args.keep or args.reuse:
        print(f"runs kept: {','.join(str(run.pk) for run in runs)}\n")
    client = Client()
    client.force_login(make_user(f"bench-{os.getpid()}"))
    ids = [str(run.pk) for run in runs]
    pages = {
        "2 runs": f"/compare/?runs={','.join(ids[:2])}&baseline={ids[0]}",
        "2 runs, kinds code+tools": f"/compare/?runs={','.join(ids[:2])}&kinds=code,tools",
        "2 runs, regressions only": f"/compare/?runs={','.join(ids[:2])}&show=regressions",
        "8 runs": f"/compare/?runs={','.join(ids)}&baseline={ids[0]}",
        "8 runs, kinds code": f"/compare/?runs={','.join(ids)}&kinds=code",
        "8 runs, commit order": f"/compare/?runs={','.join(ids)}&order=commits",
        "8 runs, rouge by drop": f"/compare/?runs={','.join(ids)}&metric=rouge&sort=delta",
        "8 runs, search": f"/compare/?runs={','.join(ids)}&q=order+7-",
    }
    print(f"{'page':<28} {'median ms':>10} {'max ms':>8} {'KB':>8} {'first ms':>9}")
    failed = False
    only = [name for name in args.only.split(";") if name]
    for name, url in pages.items():
        if only and name not in only:
            continue
        first = time.perf_counter()  # the first view in this process: nothing kept yet
        assert client.get(url).status_code == 200, url
        first_ms = (time.perf_counter() - first) * 1000
        times, size = measure(client, url, {}, args.repeat)
        line = (
            f"{name:<28} {statistics.median(times):>10.1f} {max(times):>8.1f} {size / 1024:>8.1f}"
            f" {first_ms:>9.1f}"
        )
        if name in TARGETS:
            limit_ms, limit_bytes = TARGETS[name]
            ok = statistics.median(times) <= limit_ms and (
                limit_bytes is None or size <= limit_bytes
            )
            failed |= not ok
            verdict = "ok" if ok else "MISSED"
            kb = f", ≤ {limit_bytes // 1024} KB" if limit_bytes else ""
            line += f"  target ≤ {limit_ms:.0f} ms{kb} {verdict}"
        print(line)
    if args.use_configured_db and not (args.keep or args.reuse):
        for run in runs:
            run.delete()
        project.delete()
    scratch.cleanup()
    return 1 if failed else 0


def runs_built(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """A project and its 8 runs, each ended by the recorder (its summary stored)."""
    from runs.recorder import run_finish
    from tests.web.factories import RunSpec, build_run, make_project

    project = make_project(f"bench-{os.getpid()}", "/tmp/bench-agent")
    cloned = args.cases >= args.clone_from
    runs = [
        build_run(
            project,
            RunSpec(cases=args.cases, turns=args.turns, failing=range(n, args.cases, 7)),
        )
        for n in range(1 if cloned else 8)
    ]
    runs += [run_clone(runs[0], shift=n, cases=args.cases) for n in range(1, 8) if cloned]
    for run in runs:
        run_finish(run.pk)  # stores its summary, as every finished run has
    return project, runs


def runs_kept(cases: int) -> tuple[Any, list[Any]]:
    """The last 8 runs of ``cases`` cases a bench left (``--keep``), oldest first."""
    from runs.models import Run

    runs = list(
        Run.objects.filter(project__name__startswith="bench-", total_cases=cases).order_by("-pk")[
            :8
        ]
    )[::-1]
    if len(runs) != 8:
        raise SystemExit(f"--reuse: {len(runs)} kept runs of {cases} cases, not 8")
    return runs[0].project, runs


def run_clone(source: Any, *, shift: int, cases: int) -> Any:
    """A copy of ``source`` (built with ``failing=range(0, cases, 7)``) whose failing cases are
    ``range(shift, cases, 7)``, as ``build_run`` would make them, copied in SQL: case ``i``
    from a source case of the same verdict, its name and its turns' texts renumbered. Three
    INSERT … SELECT through a temporary table of (source case, new index)."""
    from django.db import connection, transaction

    from runs.models import Run

    by_index = dict(Run.objects.get(pk=source.pk).cases.values_list("index", "id"))
    # Case i >= shift fails as i - shift does in the source; the first ``shift`` cases pass,
    # each copied from a passing source case (1–6, then 8).
    passing = [1, 2, 3, 4, 5, 6, 8]
    mapping = [(by_index[i - shift], i - shift, i) for i in range(shift, cases)]
    mapping += [(by_index[passing[i]], passing[i], i) for i in range(min(shift, cases))]
    with transaction.atomic(), connection.cursor() as cursor:
        clone = Run.objects.get(pk=source.pk)
        clone.pk = None
        clone.summary = {}
        clone.uid = uuid.uuid4()
        clone.save()
        cursor.execute("DROP TABLE IF EXISTS bench_map")
        cursor.execute(
            "CREATE TEMPORARY TABLE bench_map (src integer, src_index integer, idx integer)"
        )
        for start in range(0, len(mapping), 5000):
            chunk = mapping[start : start + 5000]
            cursor.execute(
                "INSERT INTO bench_map VALUES " + ",".join(["(%s, %s, %s)"] * len(chunk)),
                [value for row in chunk for value in row],
            )
        for statement in _clone_statements(clone.pk):
            cursor.execute(statement)
        cursor.execute("DROP TABLE bench_map")
    return clone


def _columns(model: Any, *skip: str) -> list[str]:
    return [
        field.column
        for field in model._meta.concrete_fields
        if not field.primary_key and field.column not in skip
    ]


def _clone_statements(run_id: int) -> list[str]:
    """INSERT … SELECT of the cases, turns and metrics of the source cases in ``bench_map``
    into run ``run_id``."""
    from runs.models import CaseRow, MetricRow, TurnRow

    case_cols = _columns(CaseRow, "run_id", "index", "name")
    turn_cols = _columns(TurnRow, "run_id", "case_id", "input", "response")
    metric_cols = _columns(MetricRow, "run_id", "turn_id")
    old = "'order ' || m.src_index || '-'"
    new = "'order ' || m.idx || '-'"
    cases_in, turns_in, metrics_in = (
        ", ".join(map(_q, cols)) for cols in (case_cols, turn_cols, metric_cols)
    )
    new_case = f"JOIN runs_caseresult nc ON nc.run_id = {run_id} AND nc.{_q('index')} = m.idx"
    return [
        f"INSERT INTO runs_caseresult (run_id, {_q('index')}, name, {cases_in}) "
        f"SELECT {run_id}, m.idx, CASE WHEN c.name LIKE 'failing%%' THEN 'failing refund case ' "
        f"ELSE 'refund case ' END || m.idx, {', '.join('c.' + _q(c) for c in case_cols)} "
        "FROM runs_caseresult c JOIN bench_map m ON m.src = c.id",
        f"INSERT INTO runs_turnresult (run_id, case_id, input, response, {turns_in}) "
        f"SELECT {run_id}, nc.id, replace(t.input, {old}, {new}), "
        f"replace(t.response, {old}, {new}), {', '.join('t.' + _q(c) for c in turn_cols)} "
        f"FROM runs_turnresult t JOIN bench_map m ON m.src = t.case_id {new_case}",
        f"INSERT INTO runs_metricresult (run_id, turn_id, {metrics_in}) "
        f"SELECT {run_id}, nt.id, {', '.join('r.' + _q(c) for c in metric_cols)} "
        "FROM runs_metricresult r JOIN runs_turnresult st ON st.id = r.turn_id "
        f"JOIN bench_map m ON m.src = st.case_id {new_case} "
        f"JOIN runs_turnresult nt ON nt.case_id = nc.id AND nt.{_q('index')} = st.{_q('index')}",
    ]


def _q(column: str) -> str:
    from django.db import connection

    return connection.ops.quote_name(column)


if __name__ == "__main__":
    raise SystemExit(main())
