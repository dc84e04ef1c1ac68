"""Opening a test case's agent session, and opening the next cases' sessions ahead of time.

A Claude session is a Claude Code CLI process: about half a second of CPU before it can take
its first message, most of a short case's time. For a backend that declares such a start
(``costly_start = True``), :class:`SessionStarts` opens the sessions of the next cases of a run,
in run order, while the current cases run, so a case finds its session ready or partly started:

- each session is opened for one case and handed to that case only: never shared, never reused;
- at most ``ahead`` sessions are opened beyond the last case that took its own;
- a session its case never takes (the case crashed, the run was cancelled or ended) is closed;
- opening is bounded by the agent's ``llm_timeout``, as when a case opens its own, and a failure
  is handed to its case, which records it as its first turn's error.

``session_start_ms`` is the session's own start (the wall time of ``create_session``), whoever
waited for it; the case's time includes only the part of it the case waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from graders.result import error_text
from runs.core.backends.base import AgentBackend, AgentSession

SESSION_CLOSE_TIMEOUT = 30.0

# index of a test case -> its session (the backend's create_session for that case)
Opener = Callable[[int], Awaitable[AgentSession]]


@dataclass(frozen=True)
class OpenedSession:
    """A case's session, or why it could not be opened; how long opening took (``start_ms``)
    and how much of that its case waited for (``waited_ms``: all of it when the case opened
    its own, the rest of it when the session was opened ahead)."""

    session: AgentSession | None
    error: str | None
    start_ms: int
    waited_ms: int


async def open_session(opener: Opener, index: int, timeout: float) -> OpenedSession:
    """Open case ``index``'s session within ``timeout``; a failure is kept, not raised."""
    started = time.perf_counter()
    session: AgentSession | None = None
    error: str | None = None
    try:
        session = await asyncio.wait_for(opener(index), timeout=timeout)
    except TimeoutError:
        error = "session could not be opened: timed out"
    except Exception as exc:
        error = f"session could not be opened: {error_text(exc)}"
    took = elapsed_ms(started)
    return OpenedSession(session, error, start_ms=took, waited_ms=took)


async def close_session(session: AgentSession) -> None:
    """Close a session; closing must never hide a case's outcome, nor hang the run."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(session.close(), timeout=SESSION_CLOSE_TIMEOUT)


def costly_start(backend: AgentBackend) -> bool:
    """Whether the backend's sessions are worth opening ahead (``costly_start = True``)."""
    return bool(getattr(backend, "costly_start", False))


def reuses_sessions(backend: AgentBackend) -> bool:
    """Whether, within :func:`session_scope`, the backend serves a later case with an earlier
    case's process (``cases_per_process`` over 1). The engine then opens one session ahead:
    after the first cases, the next case's process is an earlier one, cleared meanwhile."""
    return int(getattr(backend, "cases_per_process", 1)) > 1


def session_scope(backend: AgentBackend) -> contextlib.AbstractAsyncContextManager[None]:
    """The backend's scope for one run's sessions (``session_scope()``, where it has one: the
    Claude backend keeps a case's process for a later case within it), else nothing."""
    scope = getattr(backend, "session_scope", None)
    return scope() if scope is not None else contextlib.nullcontext()


def sessions_ahead(parallel: int, cpus: int | None = None) -> int:
    """How many sessions to open beyond the last case that took its own: one more than the
    cases running at once, at most one per CPU.

    Starting a Claude session is CPU work (its CLI loading), so opening more at once than there
    are CPUs only slows each of them; with two CPUs two ahead measured as fast as one at
    parallel 1 and faster than four or five at parallel 4 (docs/backends.md)."""
    return max(1, min(parallel + 1, cpus or os.cpu_count() or 1))


class SessionStarts:
    """The sessions of a run's cases, opened ahead of them in run order (see the module doc)."""

    def __init__(
        self,
        opener: Opener,
        order: Sequence[int],
        *,
        ahead: int,
        timeout: float,
        is_cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        self._opener = opener
        self._order = list(order)
        self._position = {index: position for position, index in enumerate(self._order)}
        self._ahead = max(0, ahead)
        self._timeout = timeout
        self._is_cancelled = is_cancelled
        # Opening (or opened) and not yet handed to their case.
        self._opening: dict[int, asyncio.Task[OpenedSession]] = {}
        self._started: set[int] = set()  # every case whose session was ever started here
        self._closed = False

    @property
    def started(self) -> list[int]:
        """The cases whose sessions were started, in the order they were started."""
        return [index for index in self._order if index in self._started]

    async def take(self, index: int) -> OpenedSession:
        """Case ``index``'s own session: the one opened ahead for it (waiting for the rest of
        its start), else one opened now. The next cases' sessions start opening meanwhile."""
        waiting = time.perf_counter()
        task = self._opening.get(index) or self._start(index)
        self._open_ahead(after=index)
        # Shielded: a case cancelled while it waits leaves the session here, for close().
        opened = await asyncio.shield(task)
        self._opening.pop(index, None)
        return replace(opened, waited_ms=min(opened.start_ms, elapsed_ms(waiting)))

    async def discard(self, index: int) -> None:
        """Close case ``index``'s session if the case never took it."""
        task = self._opening.pop(index, None)
        if task is not None:
            await _close_opened(task)

    async def close(self) -> None:
        """The run ended: open nothing more, close every session no case took."""
        self._closed = True
        tasks, self._opening = list(self._opening.values()), {}
        await asyncio.gather(*(_close_opened(task) for task in tasks))

    def _start(self, index: int) -> asyncio.Task[OpenedSession]:
        task = asyncio.create_task(open_session(self._opener, index, self._timeout))
        self._opening[index] = task
        self._started.add(index)
        return task

    def _open_ahead(self, *, after: int) -> None:
        if self._closed or self._is_cancelled():
            return
        position = self._position.get(after, -1)
        for index in self._order[position + 1 : position + 1 + self._ahead]:
            if index not in self._started:
                self._start(index)


async def _close_opened(task: asyncio.Task[OpenedSession]) -> None:
    """Stop an opening that is under way (the backend closes what it started), or close the
    session it opened."""
    if not task.done():
        task.cancel()
        await asyncio.wait([task])  # our own cancellation still propagates
    if task.cancelled() or task.exception() is not None:
        return
    opened = task.result()
    if opened.session is not None:
        await close_session(opened.session)


def elapsed_ms(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)
