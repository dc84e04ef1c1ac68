"""Structured logs (holodeck_web/logs.py, holodeck_web/middleware.py, runs/core/logcontext.py): with
LOG_FORMAT=json every line is one JSON object; a request's lines carry its request id (the one
its response names), a case's lines its run's and its own ids; a bad LOG_FORMAT stops start-up.

The in-process tests read the lines through a handler built as LOGGING builds the console one
(the json formatter, the context filter); one test starts ``manage.py`` for real with
LOG_FORMAT=json and reads every line it logged.
"""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from holodeck_web.logs import JsonFormatter, LogContextFilter
from runs.models import CaseRow, Run
from runs.services import execution, launch
from tests.web.services_helpers import (
    EXAMPLES,
    REPO,
    embedded_env,
    example_project,
    with_migrated_database,
)
from tests.web.test_settings import load_settings, manage_check

Lines = Callable[[], list[dict[str, Any]]]
HEX_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
def json_lines() -> Iterator[Lines]:
    """The JSON lines logged during the test (at INFO and above), each parsed; a line that is
    not one JSON object fails the test."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(LogContextFilter())
    # LOGGING gives Django's loggers the console handler without propagating to the root's.
    loggers = [logging.getLogger(), logging.getLogger("django")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)

    def lines() -> list[dict[str, Any]]:
        return [json.loads(line) for line in stream.getvalue().splitlines()]

    try:
        yield lines
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


def access_lines(lines: Lines) -> list[dict[str, Any]]:
    return [line for line in lines() if line["logger"] == "holodeck_web.access"]


# --- requests -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_each_request_logs_one_json_access_line_with_the_id_its_response_names(
    client: Client, json_lines: Lines
) -> None:
    response = client.get("/login/?next=/runs/&token=hush-hush-secret")

    (line,) = access_lines(json_lines)
    request_id = response.headers["X-Request-ID"]
    assert HEX_ID.fullmatch(request_id)
    assert line["request_id"] == request_id
    assert line["level"] == "INFO"
    assert line["time"].endswith("Z")
    assert (line["method"], line["path"], line["status"], line["user_id"]) == (
        "GET",
        "/login/",
        200,
        None,
    )
    assert isinstance(line["duration_ms"], int | float)
    assert "hush-hush-secret" not in json.dumps(json_lines())  # never the query string


@pytest.mark.django_db
def test_the_access_line_names_the_signed_in_user(viewer_client: Client, json_lines: Lines) -> None:
    viewer_client.get("/")
    (line,) = access_lines(json_lines)
    assert line["user_id"] is not None


@pytest.mark.django_db
@pytest.mark.parametrize(
    "incoming, kept",
    [
        ("req-42.abc_DEF", True),
        ("x" * 100, True),
        ("x" * 101, False),
        ("has space", False),
        ("new\nline", False),
        ("<script>", False),
        ("", False),
    ],
)
def test_a_safe_incoming_request_id_is_kept_and_any_other_replaced(
    client: Client, json_lines: Lines, incoming: str, kept: bool
) -> None:
    response = client.get("/login/", headers={"X-Request-ID": incoming})

    request_id = response.headers["X-Request-ID"]
    if kept:
        assert request_id == incoming
    else:
        assert HEX_ID.fullmatch(request_id)
    assert [line["request_id"] for line in access_lines(json_lines)] == [request_id]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path, headers, status",
    [
        ("/no/such/page/", {}, 404),
        ("/api/v1/runs", {"Authorization": "Bearer no-such-token"}, 401),
    ],
)
def test_djangos_own_line_of_a_refused_request_carries_its_request_id(
    client: Client, json_lines: Lines, path: str, headers: dict[str, str], status: int
) -> None:
    response = client.get(path, headers=headers)

    assert response.status_code == status
    django_lines = [line for line in json_lines() if line["logger"] == "django.request"]
    assert django_lines, json_lines()
    assert {line["request_id"] for line in django_lines} == {response.headers["X-Request-ID"]}
    assert all(line["status_code"] == status for line in django_lines)
    assert "no-such-token" not in json.dumps(json_lines())


# --- cases in the workers -------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_cases_lines_carry_its_runs_and_its_own_ids(
    tmp_path: Path, eager_celery: None, json_lines: Lines
) -> None:
    run = launch.run_create(project=example_project(tmp_path))  # run here, as a worker would

    cases = {case.pk: case.index for case in CaseRow.objects.filter(run=run)}
    assert len(cases) == 3
    case_lines = [line for line in json_lines() if line.get("case_id") is not None]
    for case_id, index in cases.items():
        mine = [line for line in case_lines if line["case_id"] == case_id]
        assert [line["message"] for line in mine] == [
            f"case {index} of run {run.pk} started (attempt 1)",
            f"case {index} of run {run.pk} ended",
        ]
        assert all(line["run_id"] == run.pk and line["case_index"] == index for line in mine)
    run_lines = [line for line in json_lines() if line.get("run_id") == run.pk]
    assert all(line.get("case_id") in cases for line in run_lines if "case_id" in line)


@pytest.mark.django_db(transaction=True)
def test_a_crashed_cases_line_carries_the_exception_and_the_ids(
    tmp_path: Path, eager_celery: None, json_lines: Lines, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(agent: object, run: object = None) -> object:
        raise RuntimeError("the backend would not build")

    execution.run_agents_forget()
    monkeypatch.setattr(execution, "agent_backend", broken)
    run = launch.run_create(project=example_project(tmp_path))
    execution.run_agents_forget()

    crashed = [line for line in json_lines() if "crashed" in line["message"]]
    assert len(crashed) == 3
    case_ids = set(CaseRow.objects.filter(run=run).values_list("pk", flat=True))
    assert {line["case_id"] for line in crashed} == case_ids
    assert all(line["run_id"] == run.pk and line["level"] == "ERROR" for line in crashed)
    assert all("RuntimeError: the backend would not build" in line["exception"] for line in crashed)
    assert Run.objects.get(pk=run.pk).status != Run.Status.RUNNING


def test_the_turn_a_case_is_on_is_bound_from_the_engines_progress() -> None:
    import asyncio

    from runs.core.engine.events import CaseEvent, emit
    from runs.core.logcontext import log_context, log_context_ids
    from runs.core.wire import models as wire

    seen: list[object] = []

    def listener(event: CaseEvent) -> None:
        seen.append(log_context_ids().get("turn"))

    def turn(index: int) -> wire.TurnResult:
        return wire.TurnResult(
            turn_index=index, input="q", response="a", passed=True, execution_time_ms=1
        )

    async def case() -> list[object]:
        on_event = execution._turn_bound(listener)
        during: list[object] = []
        await emit(on_event, CaseEvent("case_started", 0, "c", 2))
        during.append(log_context_ids().get("turn"))
        await emit(on_event, CaseEvent("turn_finished", 0, "c", 2, turn=turn(0)))
        during.append(log_context_ids().get("turn"))
        await emit(on_event, CaseEvent("turn_finished", 0, "c", 2, turn=turn(1)))
        during.append(log_context_ids().get("turn"))
        return during

    with log_context(run_id=1, turn=None):
        assert asyncio.run(case()) == [0, 1, None]
        assert log_context_ids() == {"run_id": 1}  # the case's task kept its turn to itself
    assert seen == [0, 0, 1]  # what the recorder's own lines of each event carry


# --- a real process -------------------------------------------------------------------------

LAUNCH = """
from pathlib import Path
from runs.services.launch import run_create
from runs.services.projects import project_register
run = run_create(project=project_register(agent_path=Path({path!r})))
print(run.pk)
"""


@pytest.mark.process
def test_manage_py_with_log_format_json_writes_only_json_lines(
    tmp_path: Path, migrated_sqlite: Path
) -> None:
    import shutil

    agent_dir = tmp_path / "convfinqa"
    shutil.copytree(EXAMPLES / "convfinqa", agent_dir, ignore=shutil.ignore_patterns("results"))
    env = embedded_env(with_migrated_database(tmp_path / "data", migrated_sqlite))
    env.update(
        LOG_FORMAT="json",
        LOG_LEVEL="INFO",
        HOLODECK_CELERY_EAGER="true",  # the run's cases run in the command, as in a worker
    )

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    done = manage("shell", "-c", LAUNCH.format(path=str(agent_dir / "agent.yaml")))

    run_id = int(done.stdout.strip().splitlines()[-1])
    lines = [json.loads(line) for line in done.stderr.splitlines()]  # each line parses
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    case_lines = [line for line in lines if line.get("case_id") is not None]
    assert len(case_lines) >= 6, lines  # three cases, started and ended
    assert {line["run_id"] for line in case_lines} == {run_id}


WORKER_OPTIONS = (
    *("--loglevel", "INFO", "--concurrency", "1", "-n", "holodeck-log-test@%h"),
    *("--without-gossip", "--without-mingle", "--without-heartbeat"),
)


@pytest.mark.process
def test_a_celery_worker_with_log_format_json_writes_json_lines_with_the_case_ids(
    tmp_path: Path, migrated_sqlite: Path
) -> None:
    import shutil
    import time

    agent_dir = tmp_path / "convfinqa"
    shutil.copytree(EXAMPLES / "convfinqa", agent_dir, ignore=shutil.ignore_patterns("results"))
    env = embedded_env(with_migrated_database(tmp_path / "data", migrated_sqlite))
    env.update(LOG_FORMAT="json", PYTHONUNBUFFERED="1")
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:  # the embedded broker: SQLite and a folder, nothing else
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "holodeck_web", "worker", *WORKER_OPTIONS],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    agent_yaml = agent_dir / "agent.yaml"
    try:
        launched = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", LAUNCH.format(path=str(agent_yaml))],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert launched.returncode == 0, launched.stderr[-3000:]
        run_id = int(launched.stdout.strip().splitlines()[-1])
        deadline = time.monotonic() + 120
        while log.read_text().count(f" of run {run_id} ended") < 3:
            assert time.monotonic() < deadline, log.read_text()[-4000:]
            assert worker.poll() is None, log.read_text()[-4000:]
            time.sleep(0.2)
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    # Celery prints this one line itself on SIGTERM, outside logging.
    text = log.read_text().replace("\nworker: Warm shutdown (MainProcess)\n", "\n")
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    messages = [line["message"] for line in lines]
    assert any(m.startswith("Task runs.tasks.execute_case[") for m in messages)  # Celery's own
    ended = [line for line in lines if line["message"].endswith(f"of run {run_id} ended")]
    assert len(ended) == 3 and all(line["run_id"] == run_id for line in ended)
    assert len({line["case_id"] for line in ended}) == 3


# --- the setting ----------------------------------------------------------------------------


def test_log_format_picks_the_formatter_of_the_console_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_settings(tmp_path, monkeypatch)["LOGGING"]["handlers"]["console"]["formatter"] == (
        "text"
    )
    loaded = load_settings(tmp_path, monkeypatch, LOG_FORMAT="JSON")
    assert loaded["LOGGING"]["handlers"]["console"]["formatter"] == "json"


def test_a_bad_log_format_stops_start_up_with_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ImproperlyConfigured, match="LOG_FORMAT='bogus' must be one of TEXT, JSON"):
        load_settings(tmp_path, monkeypatch, LOG_FORMAT="bogus")
    done = manage_check(tmp_path, LOG_FORMAT="bogus")
    assert done.returncode == 2
    assert done.stderr == "configuration error: LOG_FORMAT='bogus' must be one of TEXT, JSON\n"
