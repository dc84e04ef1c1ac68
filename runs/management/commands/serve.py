"""``manage.py serve``: the dashboard and a Celery worker, supervised together.

The dashboard runs under gunicorn with the project's settings (holodeck_web/gunicorn_conf.py,
the same the Dockerfile and docker-compose.yml use); WhiteNoise serves the static files.
``--dev`` runs Django's development server instead, for development only.

SIGTERM or SIGINT (Ctrl-C) stops both gracefully: gunicorn gets SIGTERM, so the requests in
flight finish (for up to HOLODECK_WEB_GRACEFUL_TIMEOUT seconds), the worker makes a warm
shutdown, and serve exits 0.

A worker that dies is started again (after 1 s, 2 s, 4 s ... up to 30 s while it keeps dying
soon after each start); the web server keeps serving meanwhile. If the web server dies, serve
stops the worker and exits non-zero. The children die with serve even when serve is killed with
SIGKILL (Linux: the kernel sends them SIGTERM), so a new serve finds its port free.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
FIRST_RESTART_DELAY = 1.0
MAX_RESTART_DELAY = 30.0
# A worker that ran this long before dying was healthy: its next restart waits FIRST_... again.
HEALTHY_UPTIME = 60.0
POLL_SECONDS = 0.2
STOP_TIMEOUT = 20.0


def worker_command(concurrency: int, *, loglevel: str = "WARNING") -> list[str]:
    """The command line of a Celery worker for this project (serve, benchmarks, tests)."""
    return [
        sys.executable, "-m", "celery", "-A", "holodeck_web", "worker",
        "--loglevel", loglevel, "--concurrency", str(concurrency),
    ]  # fmt: skip


BROKER_NAMES = {"redis": "Redis", "rediss": "Redis", "amqp": "RabbitMQ", "amqps": "RabbitMQ"}


def broker_name() -> str:
    """What the worker's broker is, for the start-up line (never the URL: it holds a password)."""
    if settings.EMBEDDED_BROKER:
        return "embedded file-system broker"
    scheme = str(settings.BROKER_URL).split("://", 1)[0]
    return BROKER_NAMES.get(scheme, scheme)


def wsgi_app() -> str:
    """gunicorn's name of the project's WSGI callable: ``holodeck_web.wsgi:application``."""
    return ":".join(settings.WSGI_APPLICATION.rsplit(".", 1))


def web_command(addr: str, *, dev: bool = False) -> list[str]:
    """gunicorn with the project's config module; Django's runserver with ``dev``."""
    if dev:
        return [sys.executable, "manage.py", "runserver", addr, "--noreload"]
    return [
        sys.executable, "-m", "gunicorn", "--config", "python:holodeck_web.gunicorn_conf",
        "--bind", addr, wsgi_app(),
    ]  # fmt: skip


def die_with_this_process() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGTERM when this process dies, however it dies
    (``prctl(PR_SET_PDEATHSIG)``; Linux only, else None)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with code {returncode}"


def restart_delay(quick_deaths: int) -> float:
    """Seconds to wait before restarting a worker that died ``quick_deaths`` times in a row
    soon after starting: 1, 2, 4, ... capped at 30."""
    return min(MAX_RESTART_DELAY, FIRST_RESTART_DELAY * 2 ** max(0, quick_deaths - 1))


@dataclass
class Child:
    """One supervised process; it dies with serve (see die_with_this_process). The worker stays
    in serve's process group, so Ctrl-C reaches it too (Celery takes SIGINT as a warm shutdown,
    like SIGTERM). gunicorn gets a group of its own (``own_group``): it takes SIGINT as a quick
    shutdown that drops the requests in flight, so serve stops it with SIGTERM instead."""

    name: str
    command: list[str]
    stop_timeout: float = STOP_TIMEOUT
    own_group: bool = False
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    quick_deaths: int = 0
    restart_at: float | None = field(default=None)

    def start(self) -> int:
        self.proc = subprocess.Popen(
            self.command,
            cwd=settings.BASE_DIR,
            preexec_fn=die_with_this_process(),
            process_group=0 if self.own_group else None,
        )
        self.started_at = time.monotonic()
        self.restart_at = None
        return self.proc.pid

    def exited(self) -> int | None:
        """The return code once the process has ended (None while it runs or before a start)."""
        return None if self.proc is None else self.proc.poll()

    def schedule_restart(self) -> float:
        """Count the death and pick when to restart; returns the delay in seconds."""
        uptime = time.monotonic() - self.started_at
        self.quick_deaths = 1 if uptime >= HEALTHY_UPTIME else self.quick_deaths + 1
        delay = restart_delay(self.quick_deaths)
        self.restart_at = time.monotonic() + delay
        return delay

    def terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    def wait_or_kill(self) -> None:
        """Wait for the process to end after terminate(); SIGKILL it after its stop timeout."""
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def stop_all(children: list[Child]) -> None:
    """Signal every child first, then wait: they shut down side by side."""
    for child in children:
        child.terminate()
    for child in children:
        child.wait_or_kill()


def web_child(addr: str, *, dev: bool) -> Child:
    if dev:
        return Child("web server", web_command(addr, dev=True))
    # gunicorn gives the requests in flight graceful_timeout seconds, then ends its workers.
    return Child(
        "web server",
        web_command(addr),
        stop_timeout=settings.HOLODECK_WEB_GRACEFUL_TIMEOUT + STOP_TIMEOUT,
        own_group=True,
    )


class Command(BaseCommand):
    help = (
        "Start the dashboard and a Celery worker together (the worker uses the broker of "
        "CELERY_BROKER_URL or REDIS_URL when set, else an embedded file-system broker). "
        "The dashboard runs under gunicorn (holodeck_web/gunicorn_conf.py); a worker that dies "
        "is restarted; SIGTERM or Ctrl-C stops both gracefully."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addr", default="127.0.0.1:8000", help="host:port to serve on")
        parser.add_argument(
            "--workers",
            type=int,
            default=settings.CELERY_WORKER_CONCURRENCY,
            help="worker processes (cases run in parallel across them)",
        )
        parser.add_argument("--no-worker", action="store_true", help="serve pages only")
        parser.add_argument(
            "--dev",
            action="store_true",
            help="Django's development server instead of gunicorn (development only)",
        )

    def say(self, line: str) -> None:
        self.stdout.write(f"serve: {line}")
        self.stdout.flush()

    def handle(self, *args: Any, **options: Any) -> None:
        stopping: list[int] = []
        signal.signal(signal.SIGTERM, lambda signum, _: stopping.append(signum))
        signal.signal(signal.SIGINT, lambda signum, _: stopping.append(signum))

        worker = None
        if not options["no_worker"]:
            worker = Child("worker", worker_command(options["workers"]))
            broker = broker_name()
            pid = worker.start()
            processes = options["workers"]
            self.say(f"started a Celery worker (pid {pid}; {broker}, {processes} processes)")
        web = web_child(options["addr"], dev=options["dev"])
        pid = web.start()
        server = (
            "runserver, development only"
            if options["dev"]
            else f"gunicorn, {settings.HOLODECK_WEB_WORKERS} processes x "
            f"{settings.HOLODECK_WEB_THREADS} threads"
        )
        self.say(f"serving the dashboard on http://{options['addr']}/ (pid {pid}; {server})")

        children = [c for c in (worker, web) if c is not None]
        try:
            while not stopping:
                self.check_web(web)
                if worker is not None:
                    self.supervise_worker(worker)
                time.sleep(POLL_SECONDS)
        finally:
            stop_all(children)
        self.say(f"stopped on {signal.Signals(stopping[0]).name}")

    def check_web(self, web: Child) -> None:
        returncode = web.exited()
        if returncode is not None:
            raise CommandError(
                f"serve: the web server {describe_exit(returncode)}; stopping the worker and "
                "exiting",
                returncode=1,
            )

    def supervise_worker(self, worker: Child) -> None:
        assert worker.proc is not None
        returncode = worker.exited()
        if returncode is not None and worker.restart_at is None:
            delay = worker.schedule_restart()
            self.say(
                f"the worker (pid {worker.proc.pid}) {describe_exit(returncode)}; "
                f"restarting it in {delay:g} s"
            )
        elif worker.restart_at is not None and time.monotonic() >= worker.restart_at:
            self.say(f"restarted the worker (pid {worker.start()})")
