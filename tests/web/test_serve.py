"""``manage.py serve`` supervises its worker: a real serve process on SQLite and the embedded
broker, its children found through /proc."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runs.management.commands.serve import describe_exit, restart_delay, worker_command
from tests.web.services_helpers import REPO

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


# -- a real serve ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Bindable the way runserver binds it (SO_REUSEADDR, so TIME_WAIT does not count)."""
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
def serve_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """SQLite and the embedded broker in a fresh data folder, migrated once for the module."""
    data = tmp_path_factory.mktemp("serve-data")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"REDIS_URL", "CELERY_BROKER_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(HOLODECK_DATA_DIR=str(data), PYTHONUNBUFFERED="1")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True, timeout=120
    )
    return env


@pytest.fixture
def serve(
    serve_env: dict[str, str], tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """A running ``manage.py serve`` whose login page answers: (process, port, log file)."""
    port, log_path = free_port(), tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--addr", f"127.0.0.1:{port}", "--workers", "1"],
            cwd=REPO,
            env=serve_env,
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
            family = descendants_of(proc.pid)
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for pid in family:
                if proc_stat(pid):
                    os.kill(pid, signal.SIGKILL)


@linux_only
def test_serve_restarts_a_killed_worker_and_keeps_serving_pages(
    serve: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    proc, port, log = serve
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


@linux_only
def test_serve_killed_with_sigkill_takes_its_children_with_it_and_frees_the_port(
    serve: tuple[subprocess.Popen[bytes], int, Path],
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
    serve: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    proc, _, log = serve
    family = descendants_of(proc.pid)
    web = next(pid for pid, cmd in children_of(proc.pid).items() if "runserver" in cmd)
    os.kill(web, signal.SIGKILL)

    assert proc.wait(timeout=40) == 1
    assert "serve: the web server was killed by SIGKILL; stopping the worker and exiting" in (
        log.read_text()
    )
    assert not any(map(proc_stat, family))


@linux_only
@pytest.mark.parametrize(
    ("send", "name"),
    [(os.kill, "SIGTERM"), (os.killpg, "SIGINT")],
    ids=["sigterm-to-serve", "ctrl-c-to-the-process-group"],
)
def test_serve_stops_both_children_cleanly_on_sigterm_or_ctrl_c(
    serve: tuple[subprocess.Popen[bytes], int, Path],
    send: Callable[[int, int], None],
    name: str,
) -> None:
    proc, _, log = serve
    family = descendants_of(proc.pid)
    send(proc.pid, signal.Signals[name])

    assert proc.wait(timeout=40) == 0, log.read_text()[-3000:]
    assert f"serve: stopped on {name}" in log.read_text()
    assert not any(map(proc_stat, family))
