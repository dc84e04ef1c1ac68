from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser


def worker_command(concurrency: int, *, loglevel: str = "WARNING") -> list[str]:
    """The command line of a Celery worker for this project (serve, benchmarks, tests)."""
    return [
        sys.executable, "-m", "celery", "-A", "holodeck_web", "worker",
        "--loglevel", loglevel, "--concurrency", str(concurrency),
    ]  # fmt: skip


class Command(BaseCommand):
    help = (
        "Start the dashboard and a Celery worker together (the worker uses Redis when "
        "REDIS_URL/CELERY_BROKER_URL is set, else an embedded file-system broker). "
        "Ctrl-C stops both."
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

    def handle(self, *args: Any, **options: Any) -> None:
        procs: list[subprocess.Popen[bytes]] = []
        if not options["no_worker"]:
            broker = "embedded file-system broker" if settings.EMBEDDED_BROKER else "Redis"
            self.stdout.write(
                f"starting a Celery worker ({broker}, {options['workers']} processes)"
            )
            procs.append(subprocess.Popen(worker_command(options["workers"])))
        self.stdout.write(f"serving the dashboard on http://{options['addr']}/")
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "manage.py",
                    "runserver",
                    options["addr"],
                    "--noreload",
                ],
                cwd=settings.BASE_DIR,
            )
        )

        def stop(*_: Any) -> None:
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        try:
            while all(proc.poll() is None for proc in procs):
                time.sleep(0.5)
        finally:
            stop()
            for proc in procs:
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
