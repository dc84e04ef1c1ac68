"""``manage.py serve`` serves the dashboard under gunicorn and supervises its worker: a real
serve process on SQLite and the embedded broker, its children found through /proc."""

from __future__ import annotations

import http.cookies
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from runs.management.commands.serve import (
    describe_exit,
    restart_delay,
    web_command,
    worker_command,
)
from tests.web.services_helpers import REPO, embedded_env, with_migrated_database

pytestmark = pytest.mark.process

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="serve's children die with it on Linux only"
)


def test_a_worker_that_keeps_dying_is_restarted_after_1_2_4_seconds_up_to_30() -> None:
    assert [restart_delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_an_exit_is_described_by_its_code_or_its_signal() -> None:
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-signal.SIGKILL) == "was killed by SIGKILL"


def test_the_worker_command_runs_this_projects_celery_app() -> None:
    assert worker_command(3)[1:] == [
        "-m", "celery", "-A", "holodeck_web", "worker",
        "--loglevel", "WARNING", "--concurrency", "3",
    ]  # fmt: skip


def test_the_web_server_is_gunicorn_with_the_projects_config_and_runserver_only_for_dev() -> None:
    assert web_command("0.0.0.0:8000")[1:] == [
        "-m", "gunicorn", "--config", "python:holodeck_web.gunicorn_conf",
        "--bind", "0.0.0.0:8000", "holodeck_web.wsgi:application",
    ]  # fmt: skip
    assert web_command("127.0.0.1:8000", dev=True)[1:] == [
        "manage.py",
        "runserver",
        "127.0.0.1:8000",
        "--noreload",
    ]


def test_a_malformed_web_server_variable_stops_serve_with_one_line_naming_it(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "HOLODECK_DATA_DIR": str(tmp_path), "HOLODECK_WEB_THREADS": "four"}
    done = subprocess.run(
        [sys.executable, "manage.py", "serve", "--no-worker", "--addr", f"127.0.0.1:{free_port()}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == "configuration error: HOLODECK_WEB_THREADS='four' is not an integer\n"


def test_gunicorn_started_on_its_own_with_a_malformed_variable_says_one_line_naming_it(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "HOLODECK_DATA_DIR": str(tmp_path), "HOLODECK_WEB_WORKERS": "0"}
    done = subprocess.run(
        web_command(f"127.0.0.1:{free_port()}"),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == "Error: HOLODECK_WEB_WORKERS='0' must be >= 1"


# -- a real serve ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Bindable the way gunicorn binds it (SO_REUSEADDR, so TIME_WAIT does not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a live process; None when it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    state, ppid = stat.rpartition(")")[2].split()[:2]
    return None if state in "ZX" else (state, int(ppid))


def children_of(pid: int) -> dict[int, str]:
    """pid -> command line of the live children of ``pid``."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := proc_stat(int(entry))) and stat[1] == pid:
            try:
                found[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes().decode()
            except (FileNotFoundError, ProcessLookupError):
                continue
    return found


def descendants_of(pid: int) -> set[int]:
    children = set(children_of(pid))
    return children.union(*(descendants_of(child) for child in children))


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill a test's server process and everything it started (its leftovers too)."""
    family = descendants_of(proc.pid)
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for pid in family:
        if proc_stat(pid):
            os.kill(pid, signal.SIGKILL)


def worker_pid(serve: subprocess.Popen[bytes]) -> int | None:
    workers = [pid for pid, cmd in children_of(serve.pid).items() if "celery" in cmd]
    return workers[0] if len(workers) == 1 else None


def ready_worker_pid(serve: subprocess.Popen[bytes]) -> int | None:
    """The worker's pid once it has started its pool process."""
    pid = worker_pid(serve)
    return pid if pid and children_of(pid) else None


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_for[T](what: str, check: Callable[[], T], timeout: float, log: Path) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting until {what}\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="module")
def serve_env(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite: Path) -> dict[str, str]:
    """SQLite and the embedded broker in a fresh data folder with a migrated database."""
    data = with_migrated_database(tmp_path_factory.mktemp("serve-data"), migrated_sqlite)
    return {**embedded_env(data), "PYTHONUNBUFFERED": "1"}


Serve = tuple[subprocess.Popen[bytes], int, Path]


@contextmanager
def running_serve(env: dict[str, str], log_path: Path) -> Iterator[Serve]:
    """A running ``manage.py serve`` whose login page answers and whose worker runs its pool:
    (process, port, log file); killed with all it started on the way out."""
    port = free_port()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--addr", f"127.0.0.1:{port}", "--workers", "1"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as in a terminal
        )
        try:
            wait_for(
                "the login page answers",
                lambda: answers(f"http://127.0.0.1:{port}/login/"),
                60,
                log_path,
            )
            wait_for("the worker runs its pool", lambda: ready_worker_pid(proc), 30, log_path)
            yield proc, port, log_path
        finally:
            kill_tree(proc)


@pytest.fixture
def serve(serve_env: dict[str, str], tmp_path: Path) -> Iterator[Serve]:
    """A serve of the test's own, for a test that ends it."""
    with running_serve(serve_env, tmp_path / "serve.log") as started:
        yield started


@linux_only
def test_serve_killed_with_sigkill_takes_its_children_with_it_and_frees_the_port(
    serve: Serve,
) -> None:
    proc, port, log = serve
    family = descendants_of(proc.pid)  # the web server, the worker and its pool process
    assert len(family) >= 3, children_of(proc.pid)
    started = time.monotonic()
    proc.kill()
    proc.wait()

    wait_for("the port is free", lambda: port_is_free(port), 10, log)
    # A worker finishes a warm shutdown first (about 5-7 s when idle, measured).
    wait_for("every child is gone", lambda: not any(map(proc_stat, family)), 30, log)
    print(f"children gone {time.monotonic() - started:.1f} s after SIGKILL of serve")


@linux_only
def test_serve_stops_the_worker_and_exits_non_zero_when_the_web_server_dies(
    serve: Serve,
) -> None:
    proc, _, log = serve
    family = descendants_of(proc.pid)
    web = next(pid for pid, cmd in children_of(proc.pid).items() if "gunicorn" in cmd)
    os.kill(web, signal.SIGKILL)

    assert proc.wait(timeout=40) == 1
    assert "serve: the web server was killed by SIGKILL; stopping the worker and exiting" in (
        log.read_text()
    )
    # gunicorn's own processes see their master gone within a second and exit.
    wait_for("every child is gone", lambda: not any(map(proc_stat, family)), 10, log)


def assert_stopped_cleanly(serve: Serve, family: set[int], name: str) -> None:
    """serve ended with status 0 on the signal ``name``: gunicorn's graceful shutdown, its
    children gone, its port free."""
    proc, port, log = serve
    assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert f"serve: stopped on {name}" in text
    # gunicorn got SIGTERM, its graceful shutdown, even on Ctrl-C (SIGINT is its quick one).
    assert "Handling signal: term" in text and "Handling signal: int" not in text
    assert "Shutting down: Master" in text
    assert not any(map(proc_stat, family))
    assert port_is_free(port)


@linux_only
def test_serve_stops_both_children_cleanly_on_ctrl_c(serve: Serve) -> None:
    proc, _, _ = serve
    family = descendants_of(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole process group
    assert_stopped_cleanly(serve, family, "SIGINT")


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, dict(response.headers), response.read()


def send_login_headers(port: int) -> tuple[socket.socket, bytes]:
    """A login POST whose headers and first body bytes are sent, the rest held back: the
    request is in flight, its view waiting on the body (CsrfViewMiddleware reads it to check
    the token, so a CSRF cookie comes first). Returns the socket and the unsent bytes."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=10) as response:
        cookies = http.cookies.SimpleCookie(response.headers["Set-Cookie"])
    token = cookies["csrftoken"].value
    fields = {"csrfmiddlewaretoken": token, "username": "nobody", "password": "wrong"}
    body = urllib.parse.urlencode(fields).encode()
    head = (
        f"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: csrftoken={token}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(head.encode() + body[:10])
    return sock, body[10:]


def read_response(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


# SIGTERM with a request in flight, then the same clean stop as on Ctrl-C: one serve for both
# (each serve costs 4-6 s to start and 5-8 s to stop).
@linux_only
def test_sigterm_to_serve_lets_a_request_in_flight_finish_and_stops_both_children_cleanly(
    serve: Serve,
) -> None:
    proc, port, log = serve
    family = descendants_of(proc.pid)
    sock, rest = send_login_headers(port)
    with sock:
        time.sleep(1)  # the request reaches a gunicorn thread, which waits for the body
        os.kill(proc.pid, signal.SIGTERM)
        wait_for(
            "gunicorn begins its graceful shutdown",
            lambda: "Handling signal: term" in log.read_text(),
            20,
            log,
        )
        assert proc.poll() is None  # still waiting for the request
        sock.sendall(rest)
        response = read_response(sock)

    assert response.startswith(b"HTTP/1.1 200 "), response[:300]
    assert b'name="password"' in response  # the login page again: a wrong password
    assert_stopped_cleanly(serve, family, "SIGTERM")


# --- one serve for the tests that leave it serving (last: it stops with the module) ---------


@pytest.fixture(scope="module")
def lasting_serve(
    serve_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Serve]:
    """One serve for the tests that leave it serving (each serve costs 4-6 s to start and 5-8 s
    to stop): its pages and static files, and a worker killed under it."""
    log = tmp_path_factory.mktemp("lasting-serve") / "serve.log"
    with running_serve(serve_env, log) as started:
        yield started


@linux_only
def test_serve_answers_with_gunicorn_and_whitenoise_serves_the_static_files(
    lasting_serve: Serve,
) -> None:
    _, port, log = lasting_serve
    status, headers, _ = get(f"http://127.0.0.1:{port}/login/")
    assert status == 200 and headers["Server"] == "gunicorn"

    # Collected nowhere (no collectstatic here): WhiteNoise serves the source folder's file,
    # with its own headers (Django's development static view sends neither).
    status, headers, body = get(f"http://127.0.0.1:{port}/static/css/app.css")
    assert status == 200 and headers["Server"] == "gunicorn"
    assert body == (REPO / "static" / "css" / "app.css").read_bytes()
    assert headers["Access-Control-Allow-Origin"] == "*"
    assert headers["Cache-Control"] == "max-age=60, public"
    # The access line (the project's middleware, not gunicorn's) goes to stderr.
    assert "GET /static/css/app.css 200" in log.read_text()


@linux_only
def test_serve_restarts_a_killed_worker_and_keeps_serving_pages(lasting_serve: Serve) -> None:
    proc, port, log = lasting_serve
    first = worker_pid(proc)
    assert first is not None
    os.kill(first, signal.SIGKILL)

    second = wait_for(
        "a new worker runs", lambda: (pid := worker_pid(proc)) != first and pid, 30, log
    )
    assert proc.poll() is None
    assert answers(f"http://127.0.0.1:{port}/login/")
    lines = [line for line in log.read_text().splitlines() if line.startswith("serve:")]
    assert f"serve: the worker (pid {first}) was killed by SIGKILL; restarting it in 1 s" in lines
    assert f"serve: restarted the worker (pid {second})" in lines
