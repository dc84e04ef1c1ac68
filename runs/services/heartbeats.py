"""The heartbeats of the cases a worker process runs: one thread per process stamps each running
attempt every HOLODECK_HEARTBEAT_SECONDS, so a long turn is not taken for a dead worker
(runs.services.recovery takes back an attempt whose heartbeat is stale)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator

from django.conf import settings

from runs import recorder
from runs.models import CaseRow

log = logging.getLogger(__name__)


@contextlib.contextmanager
def case_heartbeat(case: CaseRow, attempt: int) -> Iterator[None]:
    """Stamp the attempt's heartbeat every HOLODECK_HEARTBEAT_SECONDS while the case runs, so a
    long turn is not taken for a dead worker (one thread per process stamps every case it runs).
    """
    _HEARTBEATS.add(case, attempt)
    try:
        yield
    finally:
        _HEARTBEATS.remove(case, attempt)


class _Heartbeats:
    """The cases this process is running, and the one thread that keeps their heartbeats."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict[tuple[int, int], CaseRow] = {}
        self.thread: threading.Thread | None = None
        self.pid = 0

    def add(self, case: CaseRow, attempt: int) -> None:
        with self.lock:
            self.running[(case.pk, attempt)] = case
            # A forked pool child inherits the parent's object but not its thread.
            if self.thread is None or not self.thread.is_alive() or self.pid != os.getpid():
                self.pid = os.getpid()
                self.thread = threading.Thread(
                    target=self._beat, name="holodeck-heartbeat", daemon=True
                )
                self.thread.start()

    def remove(self, case: CaseRow, attempt: int) -> None:
        with self.lock:
            self.running.pop((case.pk, attempt), None)

    def _beat(self) -> None:
        try:
            while True:
                time.sleep(settings.HOLODECK_HEARTBEAT_SECONDS)
                with self.lock:
                    running = list(self.running.items())
                for (_, attempt), case in running:
                    try:
                        recorder.case_heartbeat(case, attempt)
                    except Exception:  # a database hiccup: the next beat tries again
                        log.warning("heartbeat of case %s failed", case.pk, exc_info=True)
        finally:
            recorder.close_thread_connection()


_HEARTBEATS = _Heartbeats()
