"""A worker process keeps a run's Claude Code processes between its case tasks
(runs.services.warm_sessions): real Celery workers on Redis and PostgreSQL, the real bundled CLI
against the fake Anthropic API (whose request log says what each conversation sent).

The run these tests launch has three cases at parallel 2 on a worker of two processes: one
process runs the first case, then the third on the same CLI, while the other holds the second
case's model call at the fake until the test lets it go; so the first process is idle with a
kept CLI while its run is still running."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml

from runs.core.backends.claude_capture import UPSTREAM_ENV
from runs.models import AgentProject, CaseRow, Run
from runs.services import launch
from runs.services.projects import project_register
from tests.core.backends.agent_files import needs_claude_cli, write_agent
from tests.core.backends.fake_llm_servers import Exchange, FakeAnthropic
from tests.web.worker_helpers import Workers, require_redis_and_postgresql, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.process]

MODEL = "claude-sonnet-4-5"
SESSION = "X-Claude-Code-Session-Id"
HOLD = "HOLD"  # a case input holding its first model call until the test releases it
THIRD = "which river runs through Lima"
STARTED = re.compile(r"case (\d+) starts a Claude Code process")
TAKEN = re.compile(r"case (\d+) takes a kept Claude Code process")


class HoldingAnthropic(FakeAnthropic):
    """The fake Anthropic API, holding the first model call whose last user message says HOLD
    until ``release`` is set (at most a minute); every later one is answered at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.holding = threading.Event()
        self._held = False
        self._hold_lock = threading.Lock()

    def handle(self, handler: BaseHTTPRequestHandler, exchange: Exchange) -> None:
        if self._hold_now(exchange):
            self.holding.set()
            self.release.wait(60)
        super().handle(handler, exchange)

    def _hold_now(self, exchange: Exchange) -> bool:
        messages = exchange.body.get("messages") if isinstance(exchange.body, dict) else None
        if not messages or exchange.body.get("model") != MODEL or self._held:
            return False
        if HOLD not in json.dumps(messages[-1]):
            return False
        with self._hold_lock:
            held, self._held = self._held, True
        return not held


@pytest.fixture
def fake() -> Iterator[HoldingAnthropic]:
    server = HoldingAnthropic().start()
    yield server
    server.release.set()
    server.stop()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    require_redis_and_postgresql()
    # The Claude Agent SDK imported before the pool processes start (the default preloads it).
    env = {"HOLODECK_WORKER_PRELOAD": "anthropic", "HOLODECK_SWEEP_SECONDS": "2"}
    with Workers(tmp_path, env) as pool:
        yield pool


def claude_project(tmp_path: Path, fake: FakeAnthropic, inputs: list[str]) -> AgentProject:
    root = tmp_path / "agent"
    write_agent(root, provider="anthropic", model=MODEL, endpoint=fake.url)
    config = yaml.safe_load((root / "agent.yaml").read_text())
    config["test_cases"] = [
        {"name": f"case{i}", "input": text, "ground_truth": "x"} for i, text in enumerate(inputs)
    ]
    (root / "agent.yaml").write_text(yaml.safe_dump(config))
    return project_register(agent_path=root / "agent.yaml")


def cli_processes(fake: FakeAnthropic) -> set[int]:
    """The Claude Code processes talking to this test's fake (by their ANTHROPIC_BASE_URL, or
    the endpoint the request capture proxy forwards them to)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if "claude" not in (entry / "cmdline").read_bytes().decode(errors="replace"):
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        targets = (f"ANTHROPIC_BASE_URL={fake.url}", f"{UPSTREAM_ENV}={fake.url}")
        if any(target.encode() in environ for target in targets):
            found.add(int(entry.name))
    return found


def children(pid: int) -> set[int]:
    listed = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return {int(line) for line in listed.split()}


def worker_log(workers: Workers) -> str:
    return "\n".join(p.read_text(errors="replace") for p in workers.tmp_path.glob("worker-*.log"))


def process_of(case: CaseRow) -> int:
    return int(case.claimed_by.split(":")[1])


def held_case_running(run: Run) -> bool:
    return CaseRow.objects.get(run=run, index=1).status == CaseRow.Status.RUNNING


def conversations(fake: FakeAnthropic) -> dict[str, list[Exchange]]:
    by_session: dict[str, list[Exchange]] = {}
    for exchange in fake.model_requests(MODEL):
        by_session.setdefault(exchange.headers[SESSION], []).append(exchange)
    return by_session


def one_process_idle_with_a_kept_cli(
    tmp_path: Path, fake: HoldingAnthropic, workers: Workers
) -> tuple[Run, int]:
    """The run of the module's doc, up to the point where the first and third cases are done
    and the second is held: the run, and the worker process that ran the first and third."""
    inputs = ["remember the word PINEAPPLE", f"{HOLD} please subtract 181001 from 206588", THIRD]
    project = claude_project(tmp_path, fake, inputs)
    workers.start(concurrency=2)
    run = launch.run_create(project=project, parallel=2)
    cases = CaseRow.objects.filter(run=run)

    def first_and_third_done() -> bool:
        done = {c.index for c in cases.filter(status=CaseRow.Status.DONE)}
        return fake.holding.is_set() and done == {0, 2}

    wait_for(first_and_third_done, 120, workers)
    first, third = cases.get(index=0), cases.get(index=2)
    assert process_of(first) == process_of(third)  # one worker process ran both
    return run, process_of(first)


@needs_claude_cli
def test_a_worker_process_hands_its_cli_to_the_runs_next_case_and_a_cancel_stops_the_kept_one(
    tmp_path: Path, fake: HoldingAnthropic, workers: Workers
) -> None:
    run, process = one_process_idle_with_a_kept_cli(tmp_path, fake, workers)
    log = worker_log(workers)
    assert "imported runs.core.backends.claude_agent_sdk" in log  # preloaded by the main process
    # One CLI per worker process: the third case took the first case's, cleared.
    assert sorted(STARTED.findall(log)) == ["0", "1"] and TAKEN.findall(log) == ["2"], log
    kept = children(process) & cli_processes(fake)
    assert len(kept) == 1  # idle, kept for the run's next case on this process
    sessions = conversations(fake)  # those answered: the first and third cases'
    assert len(sessions) == 2  # a conversation of its own per case
    third = next(e for e in sessions.values() if THIRD in json.dumps(e[0].body["messages"][-1]))
    opening = third[0].body["messages"]
    assert len(opening) == 1 and "PINEAPPLE" not in json.dumps(opening)

    launch.run_cancel(run=run)
    # The idle process's kept CLI stops although no case of the run runs there any more.
    wait_for(lambda: not (children(process) & cli_processes(fake)), 30, workers)
    assert held_case_running(run)  # the second case is still in its turn, on its own CLI
    fake.release.set()
    wait_for(lambda: not held_case_running(run), 60, workers)
    wait_for(lambda: not cli_processes(fake), 30, workers)
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED


@needs_claude_cli
def test_a_worker_shutdown_stops_the_cli_it_keeps_for_a_run_still_running(
    tmp_path: Path, fake: HoldingAnthropic, workers: Workers
) -> None:
    run, process = one_process_idle_with_a_kept_cli(tmp_path, fake, workers)
    assert children(process) & cli_processes(fake)

    worker = workers.procs[0]
    worker.send_signal(signal.SIGTERM)  # a warm shutdown: the held case's task may finish
    wait_for(lambda: not (children(process) & cli_processes(fake)), 30, workers)
    assert Run.objects.get(pk=run.pk).is_active  # stopped by the shutdown, not the run's end
    assert held_case_running(run)
    assert f"stopping the agent sessions kept for runs [{run.pk}]" in worker_log(workers)
    fake.release.set()
    worker.wait(timeout=60)
    wait_for(lambda: not cli_processes(fake), 30, workers)


@needs_claude_cli
def test_a_killed_worker_process_leaves_no_cli_behind_and_its_case_runs_again(
    tmp_path: Path, fake: HoldingAnthropic, workers: Workers
) -> None:
    project = claude_project(tmp_path, fake, ["hello", f"{HOLD} and again"])
    workers.start(concurrency=1)
    run = launch.run_create(project=project, parallel=1)
    wait_for(fake.holding.is_set, 120, workers)  # the second case is in its model call
    held = CaseRow.objects.get(run=run, index=1)
    process = process_of(held)
    assert children(process) & cli_processes(fake)

    os.kill(process, signal.SIGKILL)
    fake.release.set()
    wait_for(lambda: not Run.objects.get(pk=run.pk).is_active, 120, workers)
    held.refresh_from_db()
    assert held.status == CaseRow.Status.DONE and held.attempts >= 2
    wait_for(lambda: not cli_processes(fake), 30, workers)
    assert not children(process)  # the killed process is gone with its CLI


@needs_claude_cli
def test_an_edited_agent_runs_on_fresh_cli_processes(
    tmp_path: Path, fake: HoldingAnthropic, workers: Workers
) -> None:
    project = claude_project(tmp_path, fake, ["one", "two"])
    workers.start(concurrency=1)
    first = launch.run_create(project=project, parallel=1)
    wait_for(lambda: not Run.objects.get(pk=first.pk).is_active, 120, workers)
    wait_for(lambda: not cli_processes(fake), 30, workers)  # the run's end stopped its CLI
    agent = project.agent_path
    agent.write_text(agent.read_text().replace("careful calculator", "patient calculator"))
    second = launch.run_create(project=project, parallel=1)
    wait_for(lambda: not Run.objects.get(pk=second.pk).is_active, 120, workers)

    log = worker_log(workers)
    assert STARTED.findall(log) == ["0", "0"] and TAKEN.findall(log) == ["1", "1"], log
    prompts = [json.dumps(e[0].body.get("system")) for e in conversations(fake).values()]
    assert sum("careful calculator" in p for p in prompts) == 2
    assert sum("patient calculator" in p for p in prompts) == 2
    assert Run.objects.get(pk=second.pk).snapshot_id != Run.objects.get(pk=first.pk).snapshot_id
    # Every CLI stopped with its run: the settling task stops it after the run is marked
    # ended, as after the first run.
    wait_for(lambda: not cli_processes(fake), 30, workers)
