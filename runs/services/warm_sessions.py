"""The agent sessions a worker process keeps between the case tasks of a run.

A case task used to run its case on an event loop of its own (``asyncio.run``), so nothing
that lives on a loop could outlive the case: each case started a Claude Code CLI (about 0.3 s
of CPU), where the command line keeps one per run. In a worker process the cases run on one
event loop instead, in a thread that lives as long as the process (:class:`SessionLoop`), and
the backend keeps a finished case's process for the run's next case on this process, under the
same rules as the command line's (``runs.core.backends.claude_reuse``: handed on only after
``/clear`` answered under a new session id, ``--bare``, never with an MCP or built-in tool):

- kept per run: a run never takes another run's processes, so an edited agent (a new snapshot)
  always starts fresh ones;
- at most ``HOLODECK_WORKER_SESSIONS`` processes per worker process (the least recently used
  run's are stopped first; 0: keep none, a process per case as before);
- stopped when the run ends or is cancelled (the task that settles it, else the check below
  within ``CHECK_SECONDS``), after ``HOLODECK_WORKER_SESSION_IDLE_SECONDS`` unused, and on the
  worker process's shutdown;
- a worker process that is killed leaves none behind: a kept process waits on its stdin, which
  closes with the worker process, and exits at once (one in the middle of a turn exits when the
  turn ends); its case runs again elsewhere, as before (``runs.services.recovery``).

Only a Celery worker keeps sessions (``sessions_enable``, from its ``worker_init`` signal): an
eager task and ``manage.py run_agent`` run as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection

from runs.models import Run

log = logging.getLogger(__name__)

# How often, while sessions are kept, the keeper looks for idle ones and ended runs.
CHECK_SECONDS = 2.0
# How long closing the kept sessions may take on the worker process's shutdown.
SHUTDOWN_SECONDS = 15.0


class SessionLoop:
    """One event loop per process, in a daemon thread of its own, started on first use (and
    again in a forked child, which inherits the object but not the thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def running(self) -> asyncio.AbstractEventLoop | None:
        """This process's loop, when it has one."""
        with self._lock:
            return self._loop if self._alive() else None

    def _alive(self) -> bool:
        """Whether the loop's thread runs in this process (with the lock held)."""
        thread = self._thread
        return thread is not None and thread.is_alive() and self._pid == os.getpid()

    def run[T](self, coroutine: Awaitable[T]) -> T:
        """Run ``coroutine`` on the loop and wait for it; if the caller is interrupted, the
        coroutine is cancelled."""
        future: Future[T] = asyncio.run_coroutine_threadsafe(_awaited(coroutine), self._get())
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def stop(self) -> None:
        loop = self.running()
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        with self._lock:
            self._loop, self._thread = None, None

    def _get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or not self._alive():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_serve, args=(loop,), name="holodeck-sessions", daemon=True
                )
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()


async def _awaited[T](coroutine: Awaitable[T]) -> T:
    return await coroutine


@dataclass
class _KeptSessions:
    """A backend's sessions kept for one run, and when a case of that run last used them."""

    backend: Any
    run_id: int
    used_at: float
    busy: int = 0


class WarmSessions:
    """This process's kept sessions. Their state is touched on the loop's thread only."""

    def __init__(self) -> None:
        self.loop = SessionLoop()
        self.enabled = False
        self._kept: dict[tuple[int, int], _KeptSessions] = {}
        self._checker: asyncio.Task[None] | None = None

    def case_run[T](self, backend: Any, run_id: int, case: Callable[[], Awaitable[T]]) -> T:
        """Run a case of ``run_id`` (``case()``, the coroutine that runs it) with ``backend``:
        in a worker, on this process's loop, taking a session kept from the run's earlier case
        and keeping its own for the next; else on a loop of its own, as before."""
        if not self.enabled or not _keeps_sessions(backend):
            return asyncio.run(_awaited(case()))
        return self.loop.run(self._case(backend, run_id, case))

    def run_ended(self, run_id: int) -> None:
        """Stop the sessions kept for ``run_id`` (it ended, or was cancelled)."""
        if self.loop.running() is not None:
            self.loop.run(self._close(lambda kept: kept.run_id == run_id))

    def close_all(self) -> None:
        """Stop every kept session and the loop (the worker process's shutdown)."""
        if self.loop.running() is None:
            return
        log.info("stopping the agent sessions kept for runs %s", sorted(self.kept()) or "none")
        try:
            self.loop.run(asyncio.wait_for(self._close_all(), SHUTDOWN_SECONDS))
        except Exception:
            log.exception("stopping the kept agent sessions failed")
        finally:
            self.loop.stop()

    def kept(self) -> dict[int, int]:
        """Run id -> the sessions kept for it now (tests, the worker's log)."""
        counts: dict[int, int] = {}
        for kept in list(self._kept.values()):
            counts[kept.run_id] = counts.get(kept.run_id, 0) + _sessions_of(kept)
        return counts

    async def _case[T](self, backend: Any, run_id: int, case: Callable[[], Awaitable[T]]) -> T:
        key = (id(backend), run_id)
        kept = self._kept.setdefault(key, _KeptSessions(backend, run_id, time.monotonic()))
        kept.busy += 1
        try:
            async with backend.session_scope(key=run_id):
                return await case()
        finally:
            kept.busy -= 1
            kept.used_at = time.monotonic()
            await self._bound()
            self._check_later()

    async def _bound(self) -> None:
        """At most ``HOLODECK_WORKER_SESSIONS`` kept: the least recently used runs' go first."""
        limit = settings.HOLODECK_WORKER_SESSIONS
        idle = sorted((k for k in self._kept.values() if not k.busy), key=lambda k: k.used_at)
        while idle and sum(_sessions_of(k) for k in self._kept.values()) > limit:
            oldest = idle.pop(0)
            await self._close(_this(oldest))

    async def _close_all(self) -> None:
        if self._checker is not None:
            self._checker.cancel()
        await self._close(lambda _: True)

    async def _close(self, which: Callable[[_KeptSessions], bool]) -> None:
        chosen = [(key, kept) for key, kept in self._kept.items() if which(kept)]
        for key, _ in chosen:
            del self._kept[key]
        results = await asyncio.gather(
            *(kept.backend.sessions_close(kept.run_id) for _, kept in chosen),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, Exception):
                log.warning("stopping a kept agent session failed: %s", result)

    def _check_later(self) -> None:
        if self._kept and (self._checker is None or self._checker.done()):
            self._checker = asyncio.create_task(self._check_forever())

    async def _check_forever(self) -> None:
        """While sessions are kept: stop those unused for the idle time, and those of runs
        that ended (cancelled from the dashboard while no case of theirs ran here)."""
        while self._kept:
            await asyncio.sleep(CHECK_SECONDS)
            await self._close(_idle(time.monotonic()))
            runs = {kept.run_id for kept in self._kept.values() if not kept.busy}
            if runs:
                with contextlib.suppress(Exception):  # a database hiccup: the next check
                    active = await sync_to_async(_active_runs, thread_sensitive=False)(runs)
                    await self._close(_ended(active))


def _this(chosen: _KeptSessions) -> Callable[[_KeptSessions], bool]:
    return lambda kept: kept is chosen


def _idle(now: float) -> Callable[[_KeptSessions], bool]:
    idle_for = settings.HOLODECK_WORKER_SESSION_IDLE_SECONDS
    return lambda kept: not kept.busy and now - kept.used_at >= idle_for


def _ended(active: set[int]) -> Callable[[_KeptSessions], bool]:
    return lambda kept: not kept.busy and kept.run_id not in active


def _active_runs(run_ids: set[int]) -> set[int]:
    try:
        return set(
            Run.objects.filter(pk__in=run_ids, status__in=Run.ACTIVE).values_list("pk", flat=True)
        )
    finally:
        connection.close()  # a thread of the loop's executor: keep no connection open


def _keeps_sessions(backend: Any) -> bool:
    return (
        settings.HOLODECK_WORKER_SESSIONS > 0
        and hasattr(backend, "sessions_close")
        and hasattr(backend, "session_scope")
    )


def _sessions_of(kept: _KeptSessions) -> int:
    return int(kept.backend.sessions_kept(kept.run_id))


WARM = WarmSessions()


def sessions_enable() -> None:
    """This process is a worker's: its case tasks keep sessions (``worker_init``)."""
    WARM.enabled = True


def run_sessions_close(run_id: int) -> None:
    WARM.run_ended(run_id)


def sessions_close_all() -> None:
    WARM.close_all()
