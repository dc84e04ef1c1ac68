"""Server time and HTML size of the compare page: 2 runs and 8 runs of 1,000 cases × 5 turns.

    .venv/bin/python benchmarks/compare_bench.py                      # temporary SQLite
    DATABASE_URL=postgres://... .venv/bin/python benchmarks/compare_bench.py --use-configured-db
    (PostgreSQL, add --analyze: VACUUM ANALYZE once built, as autovacuum does in time)

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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from pages_bench import measure, vacuum_analyze  # noqa: E402

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
    from runs.recorder import run_finish
    from tests.web.factories import RunSpec, build_run, make_project, make_user

    started = time.perf_counter()
    project = make_project(f"bench-{os.getpid()}", "/tmp/bench-agent")
    runs = [
        build_run(
            project,
            RunSpec(cases=args.cases, turns=args.turns, failing=range(n, args.cases, 7)),
        )
        for n in range(8)
    ]
    for run in runs:
        run_finish(run.pk)  # stores its summary, as every finished run has
    if args.analyze:
        vacuum_analyze()
    print(
        f"8 runs of {args.cases} cases × {args.turns} turns built in "
        f"{time.perf_counter() - started:.1f} s on {connection.vendor}\n"
    )
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
    print(f"{'page':<28} {'median ms':>10} {'max ms':>8} {'KB':>8}")
    failed = False
    for name, url in pages.items():
        times, size = measure(client, url, {}, args.repeat)
        line = (
            f"{name:<28} {statistics.median(times):>10.1f} {max(times):>8.1f} {size / 1024:>8.1f}"
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
    if args.use_configured_db:
        for run in runs:
            run.delete()
        project.delete()
    scratch.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
