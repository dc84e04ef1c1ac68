"""The dashboard's path side by side with the HoloDeck CLI (holodeck-ai 0.7.1), in one window.

    benchmarks/dashboard_peer_bench.sh            # the wrapper: makes the peer's venv once
    .venv/bin/python benchmarks/dashboard_peer_bench.py --hd-venv .peer-venv \
        [--cases 20] [--rounds 3] [--parallel 1] [--workers 2] [--services embedded|configured]

Each round runs, one after the other on the same machine:

1. the peer: ``../shared/peer-bench/run_peer.sh`` (``holodeck test`` on HoloDeck's own
   agent.yaml, the first ``--cases`` ConvFinQA dialogues, its fake Anthropic server), timed by
   itself around the command;
2. the dashboard: a fresh data folder (and, with ``--services configured``, a fresh PostgreSQL
   database and a queue of its own on the configured Redis), the same agent.yaml, tools and test
   cases registered as a project, a staff user's API token, ``manage.py serve`` (gunicorn and a
   Celery worker of ``--workers`` processes) waited for until its worker is live; then timed:
   ``POST /api/v1/runs`` with the token, ``/progress`` polled every 20 ms to the run's end, and
   every turn's verdict read through the API (``/export``).

It prints each round's seconds per turn for both, the median ratio, whether every turn got the
same verdict on both sides, and the dashboard's time from the launch request to its first turn
recorded (what the run page's next poll shows; the page polls every
``RUN_PAGE_FIRST_POLL_S`` until a turn is there).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = str(REPO / ".venv" / "bin" / "python")
READY_SECONDS = 90.0
POLL_SECONDS = 0.02
RUN_SECONDS = 900.0

SETUP = """
import json
from django.contrib.auth.models import User
from pathlib import Path
from runs.services.projects import project_register
from runs.services.tokens import token_create
project = project_register(agent_path=Path({agent!r}), name="peer")
user = User.objects.create_user("bench", password="bench-password", is_staff=True)
_, secret = token_create(user=user, name="bench")
print("SETUP " + json.dumps({{"project": project.pk, "token": secret}}))
"""


@dataclass
class Round:
    peer_s: float
    peer_turns: int
    dash_s: float
    dash_turns: int
    first_turn_s: float
    same: int
    compared: int


def main() -> None:
    args = parse_args()
    peer_bench = Path(args.peer_bench).resolve()
    hd_venv = Path(args.hd_venv).resolve()
    rounds: list[Round] = []
    print(
        f"dashboard_peer_bench: {git_head()}, {args.cases} cases, {args.rounds} rounds, "
        f"parallel {args.parallel}, {args.workers} worker processes, services {args.services}, "
        f"{os.cpu_count()} CPUs, load {Path('/proc/loadavg').read_text().split()[:3]}"
    )
    with tempfile.TemporaryDirectory(prefix="dashbench-") as tmp:
        work = Path(args.keep).resolve() if args.keep else Path(tmp)
        for number in range(1, args.rounds + 1):
            peer_dir = work / f"peer{number}"
            peer_s, peer_turns, peer_verdicts = peer_once(peer_bench, hd_venv, peer_dir, args)
            dash = dashboard_once(peer_bench, hd_venv, peer_dir, work / f"dash{number}", args)
            dash_s, first_s, verdicts = dash
            same = sum(peer_verdicts.get(key) == value for key, value in verdicts.items())
            rounds.append(
                Round(peer_s, peer_turns, dash_s, len(verdicts), first_s, same, len(peer_verdicts))
            )
            print(
                f"round {number}: peer {peer_s:.1f}s ({peer_s / peer_turns:.3f} s/turn), "
                f"dashboard {dash_s:.1f}s ({dash_s / max(len(verdicts), 1):.3f} s/turn), "
                f"turns {len(verdicts)}/{peer_turns}, first turn recorded {first_s:.2f}s "
                f"after the launch request",
                flush=True,
            )
    report(rounds)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hd-venv", required=True, help="a virtualenv with holodeck-ai==0.7.1")
    parser.add_argument("--peer-bench", default=str(REPO.parent / "shared" / "peer-bench"))
    parser.add_argument("--cases", type=int, default=20, help="ConvFinQA dialogues")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=1, help="the run's parallel cases")
    parser.add_argument("--workers", type=int, default=2, help="the worker's processes")
    parser.add_argument("--keep", help="a folder to keep each round's files in (logs, data)")
    parser.add_argument(
        "--services",
        choices=("embedded", "configured"),
        default="embedded",
        help="embedded: SQLite and the file-system broker in the fresh data folder; "
        "configured: DATABASE_URL's PostgreSQL (a fresh database) and REDIS_URL",
    )
    return parser.parse_args()


def report(rounds: list[Round]) -> None:
    peer = statistics.median(r.peer_s / r.peer_turns for r in rounds)
    dash = statistics.median(r.dash_s / max(r.dash_turns, 1) for r in rounds)
    first = statistics.median(r.first_turn_s for r in rounds)
    same = sum(r.same for r in rounds)
    compared = sum(r.compared for r in rounds)
    print(f"same verdict {same}/{compared} turns")
    print(f"first turn recorded: median {first:.2f} s after the launch request")
    print(
        f"side by side: dashboard {dash:.3f} s/turn, peer {peer:.3f} s/turn, "
        f"ratio {peer / dash:.2f}x"
    )


# --- the peer --------------------------------------------------------------------------------


def peer_once(
    peer_bench: Path, hd_venv: Path, peer_dir: Path, args: argparse.Namespace
) -> tuple[float, int, dict[tuple[str, int], bool]]:
    env = {**os.environ, "PEER_WORK": str(peer_dir), "HD_VENV": str(hd_venv)}
    env["N_CASES"] = str(args.cases)
    out = subprocess.run(
        ["bash", str(peer_bench / "run_peer.sh")], env=env, capture_output=True, text=True
    )
    found = re.search(r"wall time ([\d.]+)s for (\d+) cases / (\d+) turns", out.stdout)
    if found is None:
        sys.exit(f"the peer did not finish:\n{out.stdout[-1500:]}\n{out.stderr[-1500:]}")
    verdicts = turn_verdicts(json.loads((peer_dir / "report.json").read_text()))
    return float(found.group(1)), int(found.group(3)), verdicts


def turn_verdicts(document: dict) -> dict[tuple[str, int], bool]:
    report_ = document.get("report", document)
    return {
        (result.get("test_name") or result.get("name"), index): bool(turn.get("passed"))
        for result in report_["results"]
        for index, turn in enumerate(result.get("turns") or [])
    }


# --- the dashboard ---------------------------------------------------------------------------


def dashboard_once(
    peer_bench: Path, hd_venv: Path, peer_dir: Path, work: Path, args: argparse.Namespace
) -> tuple[float, float, dict[tuple[str, int], bool]]:
    agent_dir = work / "agent"
    agent_dir.mkdir(parents=True)
    shutil.copy(peer_bench / "agent.yaml", agent_dir / "agent.yaml")
    shutil.copytree(peer_bench / "tools", agent_dir / "tools")
    shutil.copy(peer_dir / "test_cases.yaml", agent_dir / "test_cases.yaml")
    fake, url = fake_server(peer_bench, hd_venv, agent_dir, work)
    database = fresh_database() if args.services == "configured" else None
    try:
        env = dashboard_env(work, url, args, database)
        manage(env, "migrate", "--no-input", "-v", "0")
        setup = manage(env, "shell", "-c", SETUP.format(agent=str(agent_dir / "agent.yaml")))
        ids = json.loads(setup.split("SETUP ", 1)[1].splitlines()[0])
        port = free_port()
        with serving(env, port, args.workers, work):
            base = f"http://127.0.0.1:{port}"
            wait_for_worker(env)
            return timed_run(base, ids["token"], ids["project"], args.parallel)
    finally:
        fake.send_signal(signal.SIGTERM)
        fake.wait(timeout=10)
        if database is not None:
            drop_database(database)


def dashboard_env(
    work: Path, url: str, args: argparse.Namespace, database: str | None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOLODECK_")}
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
        env.pop(name, None)
    if database is not None:
        env["DATABASE_URL"] = database
        env["REDIS_URL"] = os.environ["REDIS_URL"]
        env["HOLODECK_QUEUE"] = f"dashbench-{uuid.uuid4().hex[:8]}"
    (work / "home").mkdir(exist_ok=True)
    env.update(
        HOLODECK_DATA_DIR=str(work / "data"),
        FAKE_ANTHROPIC_URL=url,
        PEER_TEST_CASES="test_cases.yaml",  # relative: resolved in the run's snapshot
        ANTHROPIC_API_KEY="dummy",
        ANTHROPIC_AUTH_TOKEN="dummy",
        HOME=str(work / "home"),
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        CLAUDE_CODE_MAX_RETRIES="1",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        HOLODECK_WORKER_CONCURRENCY=str(args.workers),
    )
    return env


def fake_server(
    peer_bench: Path, hd_venv: Path, agent_dir: Path, work: Path
) -> tuple[subprocess.Popen[bytes], str]:
    out = work / "fake.out"
    env = {
        **os.environ,
        "FAKE_CASES": str(agent_dir / "test_cases.yaml"),
        "FAKE_LOG": str(work / "fake.jsonl"),
        "FAKE_WRONG_EVERY": os.environ.get("FAKE_WRONG_EVERY", "0"),
    }
    with open(out, "wb") as sink:
        proc = subprocess.Popen(
            [str(hd_venv / "bin" / "python"), str(peer_bench / "fake_anthropic.py"), "0"],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ready = re.search(r"^READY (\d+)", out.read_text(), re.M)
        if ready:
            return proc, f"http://127.0.0.1:{ready.group(1)}"
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"the fake Anthropic server did not start:\n{out.read_text()}")


def manage(env: dict[str, str], *argv: str) -> str:
    done = subprocess.run(
        [PY, "manage.py", *argv], cwd=REPO, env=env, capture_output=True, text=True
    )
    if done.returncode:
        sys.exit(f"manage.py {argv[0]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


class serving:
    """``manage.py serve`` for the round, stopped (SIGTERM, then its group killed) on the way
    out."""

    def __init__(self, env: dict[str, str], port: int, workers: int, work: Path) -> None:
        self.command = [PY, "manage.py", "serve", "--addr", f"127.0.0.1:{port}"]
        self.command += ["--workers", str(workers)]
        self.env, self.log = env, work / "serve.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> serving:
        with open(self.log, "wb") as sink:
            self.proc = subprocess.Popen(
                self.command,
                cwd=REPO,
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def __exit__(self, *_: object) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def wait_for_worker(env: dict[str, str]) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        listed = json.loads(manage(env, "workers", "--json"))
        if any(worker.get("live") for worker in listed["workers"]):
            return
        time.sleep(0.5)
    sys.exit("no live worker within the ready budget")


def timed_run(
    base: str, token: str, project: int, parallel: int
) -> tuple[float, float, dict[tuple[str, int], bool]]:
    wait_for_web(base, token)
    started = time.perf_counter()
    run = api(base, token, "/api/v1/runs", {"project": project, "parallel": parallel})
    first: float | None = None
    deadline = time.monotonic() + RUN_SECONDS
    while time.monotonic() < deadline:
        progress = api(base, token, f"/api/v1/runs/{run['id']}/progress")
        if first is None and progress["turns_done"] >= 1:
            first = time.perf_counter() - started
        if not progress["active"]:
            break
        time.sleep(POLL_SECONDS)
    else:
        sys.exit(f"run {run['id']} did not end within {RUN_SECONDS:g} s")
    export = api(base, token, f"/api/v1/runs/{run['id']}/export?format=json")
    elapsed = time.perf_counter() - started
    return elapsed, first if first is not None else elapsed, turn_verdicts(export)


def wait_for_web(base: str, token: str) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        try:
            api(base, token, "/api/v1/runs")
            return
        except OSError:
            time.sleep(0.2)
    sys.exit("the dashboard did not answer within the ready budget")


def api(base: str, token: str, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    method = "GET" if body is None else "POST"
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


# --- services --------------------------------------------------------------------------------


def fresh_database() -> str:
    """A new, empty PostgreSQL database next to DATABASE_URL's, and its URL."""
    import psycopg

    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith("postgres"):
        sys.exit("--services configured needs DATABASE_URL (PostgreSQL) and REDIS_URL")
    name = f"dashbench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return base.rsplit("/", 1)[0] + "/" + name


def drop_database(url: str) -> None:
    import psycopg

    base, name = os.environ["DATABASE_URL"], url.rsplit("/", 1)[1]
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def git_head() -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or "?"


if __name__ == "__main__":
    main()
