"""Server time and HTML size of the run page and the expand fragment for a 1,000 × 5 run.

    .venv/bin/python benchmarks/pages_bench.py [--cases 1000] [--turns 5] [--repeat 15]

Builds the run in a throwaway SQLite database (or the configured one with ``--use-configured-db``),
then times Django test Client requests (median of N, after one warm-up request). Targets: the
run page ≤ 200 ms and ≤ 300 KB, expanding a case ≤ 50 ms.
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
TARGETS = {
    "run page": (200.0, 300 * 1024),
    "run page, only failures": (200.0, 300 * 1024),
    "expand one case": (50.0, None),
    "progress poll, final": (200.0, 300 * 1024),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--use-configured-db", action="store_true")
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
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()  # lets the test Client run with ALLOWED_HOSTS=testserver
    call_command("migrate", verbosity=0)

    from tests.web.factories import RunSpec, build_run, failing_case, make_project, make_user

    started = time.perf_counter()
    project = make_project(f"bench-{os.getpid()}", "/tmp/bench-agent")
    run = build_run(
        project, RunSpec(cases=args.cases, turns=args.turns, failing=range(1, args.cases, 7))
    )
    build_s = time.perf_counter() - started
    client = Client()
    client.force_login(make_user(f"bench-{os.getpid()}"))
    case = failing_case(run)
    htmx = {"HX-Request": "true"}
    pages = {
        "run page": (f"/runs/{run.pk}/", {}),
        "run page, only failures": (f"/runs/{run.pk}/?failures=1", {}),
        "expand one case": (f"/runs/{run.pk}/cases/{case.pk}/turns/", htmx),
        "progress poll, final": (f"/runs/{run.pk}/progress/?known={args.cases}", htmx),
    }
    print(
        f"run of {args.cases} cases × {args.turns} turns built in {build_s:.1f} s "
        f"({'configured DB' if args.use_configured_db else 'temporary SQLite'})\n"
    )
    print(f"{'page':<26} {'median ms':>10} {'max ms':>8} {'KB':>8}  target")
    failed = False
    for name, (url, headers) in pages.items():
        times, size = measure(client, url, headers, args.repeat)
        limit_ms, limit_bytes = TARGETS[name]
        ok = statistics.median(times) <= limit_ms and (limit_bytes is None or size <= limit_bytes)
        failed |= not ok
        target = f"≤ {limit_ms:.0f} ms" + (f", ≤ {limit_bytes // 1024} KB" if limit_bytes else "")
        print(
            f"{name:<26} {statistics.median(times):>10.1f} {max(times):>8.1f} "
            f"{size / 1024:>8.1f}  {target} {'ok' if ok else 'MISSED'}"
        )
    if args.use_configured_db:
        run.delete()
        project.delete()
    scratch.cleanup()
    return 1 if failed else 0


def measure(
    client: object, url: str, headers: dict[str, str], repeat: int
) -> tuple[list[float], int]:
    from django.test import Client

    assert isinstance(client, Client)
    response = client.get(url, headers=headers)  # warm-up (template compilation, caches)
    assert response.status_code in (200, 286), (url, response.status_code)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url, headers=headers)
        times.append((time.perf_counter() - started) * 1000)
    return times, len(response.content)


if __name__ == "__main__":
    raise SystemExit(main())
