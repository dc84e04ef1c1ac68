"""From the Run button to the first turn on the run page, in a real browser, and where the time
goes.

    .venv/bin/python benchmarks/first_turn_bench.py --hd-venv .peer-venv [--launches 5]
        [--services embedded|configured] [--workers 2]

The dashboard (``manage.py serve``, a fresh data folder; with ``--services configured`` a fresh
PostgreSQL database on DATABASE_URL and a queue of its own on REDIS_URL) serves HoloDeck's own
agent (``../shared/peer-bench``: the real Claude Code CLI against its fake Anthropic server, 20
ConvFinQA dialogues). Headless Chromium logs in, and for each launch opens the project's launch
form and clicks Run (parallel 1); the clock starts at the click and stops when the run page's
progress box counts a turn done. Each launch is a new run of the same project on the same
running worker, idle: the previous run is cancelled and its case stopped first (the first launch
also unpacks the snapshot and loads the agent on the worker).

Printed per launch, in seconds: from the click, the run page loaded (the launch request answered
and the redirect followed), the run claimed by ``start_run`` and its first case claimed by
``execute_case`` (the two queue hand-offs); then how long the case's agent session took to open
(``session_start_ms``) and its first turn (its ``execution_time_ms``); "the rest" is what is left
of the time from the claim to the turn on screen (loading the agent, writing the turn, the
page's next poll); and the turn on screen, from the click. Timestamps are the database's
(``timezone.now()`` on this machine) and this script's wall clock.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dashboard_peer_bench as bench

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
]
TIMELINE = """
import json
from runs.models import CaseRow, Run, TurnRow
run = Run.objects.get(pk={run})
case = CaseRow.objects.filter(run=run, started_at__isnull=False).order_by("started_at").first()
turn = TurnRow.objects.filter(case=case).order_by("index").first()
print("TIMELINE " + json.dumps({{
    "created": run.created_at.timestamp(),
    "started": run.started_at.timestamp(),
    "claimed": case.started_at.timestamp(),
    "session_ms": case.session_start_ms,
    "turn_ms": turn.execution_time_ms if turn else None,
}}))
"""
STEPS = (
    "page",
    "start_run",
    "case claimed",
    "session open",
    "first turn",
    "the rest",
    "on screen",
)


def main() -> None:
    args = parse_args()
    peer_bench = Path(args.peer_bench).resolve()
    hd_venv = Path(args.hd_venv).resolve()
    print(
        f"first_turn_bench: {bench.git_head()}, services {args.services}, {args.workers} worker "
        f"processes, {os.cpu_count()} CPUs, load {Path('/proc/loadavg').read_text().split()[:3]}"
    )
    with tempfile.TemporaryDirectory(prefix="firstturn-") as tmp:
        rows = launches(peer_bench, hd_venv, Path(tmp), args)
    print(" | ".join(["launch", *STEPS]))
    for number, row in enumerate(rows, 1):
        print(" | ".join([str(number), *(f"{row[step]:.2f}" for step in STEPS)]))
    later = rows[1:] or rows
    medians = {step: statistics.median(r[step] for r in later) for step in STEPS}
    print(" | ".join(["median of 2+", *(f"{medians[step]:.2f}" for step in STEPS)]))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hd-venv", required=True, help="a virtualenv with holodeck-ai==0.7.1")
    parser.add_argument("--peer-bench", default=str(bench.REPO.parent / "shared" / "peer-bench"))
    parser.add_argument("--launches", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--services", choices=("embedded", "configured"), default="embedded")
    parser.add_argument("--cases", type=int, default=20, help="ConvFinQA dialogues")
    return parser.parse_args()


def launches(
    peer_bench: Path, hd_venv: Path, work: Path, args: argparse.Namespace
) -> list[dict[str, float]]:
    peer_dir = work / "peer"
    peer_dir.mkdir()
    bench.subprocess.run(
        [
            str(hd_venv / "bin" / "python"),
            str(peer_bench / "make_test_cases.py"),
            str(peer_dir / "test_cases.yaml"),
            "--n",
            str(args.cases),
        ],
        check=True,
        capture_output=True,
    )
    agent_dir = work / "dash" / "agent"
    agent_dir.mkdir(parents=True)
    bench.shutil.copy(peer_bench / "agent.yaml", agent_dir / "agent.yaml")
    bench.shutil.copytree(peer_bench / "tools", agent_dir / "tools")
    bench.shutil.copy(peer_dir / "test_cases.yaml", agent_dir / "test_cases.yaml")
    fake, url = bench.fake_server(peer_bench, hd_venv, agent_dir, work / "dash")
    database = bench.fresh_database() if args.services == "configured" else None
    try:
        env = bench.dashboard_env(work / "dash", url, args, database)
        bench.manage(env, "migrate", "--no-input", "-v", "0")
        setup = bench.manage(
            env, "shell", "-c", bench.SETUP.format(agent=str(agent_dir / "agent.yaml"))
        )
        ids = json.loads(setup.split("SETUP ", 1)[1].splitlines()[0])
        port = bench.free_port()
        with bench.serving(env, port, args.workers, work / "dash"):
            bench.wait_for_worker(env)
            base = f"http://127.0.0.1:{port}"
            bench.wait_for_web(base, ids["token"])
            return browse(base, env, ids, args.launches)
    finally:
        fake.terminate()
        fake.wait(timeout=10)
        if database is not None:
            bench.drop_database(database)


def browse(
    base: str, env: dict[str, str], ids: dict[str, object], count: int
) -> list[dict[str, float]]:
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page()
        page.goto(f"{base}/login/")
        page.fill("input[name=username]", "bench")
        page.fill("input[name=password]", "bench-password")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        for _ in range(count):
            row, run_id = launch_once(page, base, env, int(str(ids["project"])))
            rows.append(row)
            # Each launch on an idle worker: the run is cancelled and its cases stopped.
            token = str(ids["token"])
            bench.api(base, token, f"/api/v1/runs/{run_id}/cancel", {})
            while bench.api(base, token, f"/api/v1/runs/{run_id}/progress")["cases"]["pending"]:
                time.sleep(0.1)
            time.sleep(1)
        browser.close()
    return rows


def launch_once(
    page: object, base: str, env: dict[str, str], project: int
) -> tuple[dict[str, float], int]:
    page.goto(f"{base}/projects/{project}/launch/")  # type: ignore[attr-defined]
    page.fill("input[name=parallel]", "1")  # type: ignore[attr-defined]
    clicked = time.time()
    page.click("form.launch-form button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_url("**/runs/*/")  # type: ignore[attr-defined]
    loaded = time.time()
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => /^[1-9]/.test(document.querySelector('[data-progress=turns]').innerText)",
        timeout=60_000,
        polling=10,
    )
    shown = time.time()
    run_id = int(page.url.rstrip("/").rsplit("/", 1)[1])  # type: ignore[attr-defined]
    out = bench.manage(env, "shell", "-c", TIMELINE.format(run=run_id))
    times = json.loads(out.split("TIMELINE ", 1)[1].splitlines()[0])
    session = (times["session_ms"] or 0) / 1000
    turn = (times["turn_ms"] or 0) / 1000
    return {
        "page": loaded - clicked,
        "start_run": times["started"] - clicked,
        "case claimed": times["claimed"] - clicked,
        "session open": session,
        "first turn": turn,
        "the rest": shown - times["claimed"] - session - turn,
        "on screen": shown - clicked,
    }, run_id


if __name__ == "__main__":
    main()
