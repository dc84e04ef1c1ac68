"""Claude Code processes kept from one test case for the next, within one run.

A Claude session is a CLI process: about 0.3 s of CPU to start, most of a short case's cost. Inside
:meth:`ClaudeAgentBackend.session_scope` (one ``Engine.run``: one event loop; or, in a worker,
one case task's scope keyed by its run id, whose processes outlive it: runs.services.
warm_sessions) a case's process is not stopped when the case ends; it starts a new, empty
conversation (the CLI's ``/clear``) and the run's next case takes it:

- a process serves one case at a time and every case starts on an empty conversation (a new CLI
  session id; none of the earlier cases' messages are sent again);
- it is kept only when its last turn ended cleanly (a turn stopped at ``llm_timeout``, or a CLI
  that failed, closes it) and when ``/clear`` answers within ``CLEAR_TIMEOUT_S`` under a new
  CLI session id (``ClaudeAgentSession.clear``);
- it serves at most ``cases_per_process`` cases (``HOLODECK_CLAUDE_CASES_PER_PROCESS``, 25 by
  default; 1: a new process per case), then stops;
- only an agent whose process holds nothing but its conversation between turns reuses it
  (``claude_agent_sdk.reuse_allowed``): no MCP tool (a stdio server is the CLI's child, an HTTP
  server's MCP session is the process's), no built-in tool, and the CLI in ``--bare`` mode;
- when the run ends every kept process is stopped (a worker also stops them on cancel, when idle
  and on its shutdown).

The one trace of reuse the model sees: the CLI records the ``/clear`` it ran in the new
conversation (a caveat and the command, three short text blocks before the case's first
message), as Claude Code does after any ``/clear``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Protocol

CLEAR_TIMEOUT_S = 10.0
DEFAULT_CASES_PER_PROCESS = 25
CASES_PER_PROCESS_ENV = "HOLODECK_CLAUDE_CASES_PER_PROCESS"


class Reusable(Protocol):
    """What the pool asks of a session."""

    cases_served: int

    def reusable(self) -> bool: ...

    async def clear(self) -> bool: ...

    async def shutdown(self) -> None: ...


def cases_per_process_setting(environ: dict[str, str] | None = None) -> int:
    """``HOLODECK_CLAUDE_CASES_PER_PROCESS`` (at least 1), else the default; a value that is
    not a whole number is refused with the variable's name."""
    raw = (environ if environ is not None else os.environ).get(CASES_PER_PROCESS_ENV, "").strip()
    if not raw:
        return DEFAULT_CASES_PER_PROCESS
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{CASES_PER_PROCESS_ENV}={raw!r} is not a whole number") from None
    if value < 1:
        raise ValueError(f"{CASES_PER_PROCESS_ENV}={raw!r} must be 1 or more")
    return value


class SessionPool[S: Reusable]:
    """The processes of one run between their cases: cleared ones ready for the next case, and
    the ones being cleared."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._idle: list[S] = []
        self._clearing: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def size(self) -> int:
        """The processes kept: ready, or being cleared."""
        return len(self._idle) + len(self._clearing)

    async def take(self) -> S | None:
        """A cleared process for the next case: one ready, else the next one whose ``/clear``
        finishes; None when there is none (the case starts a new process)."""
        while not self._closed:
            if self._idle:
                return self._idle.pop(0)
            if not self._clearing:
                return None
            await asyncio.wait(set(self._clearing), return_when=asyncio.FIRST_COMPLETED)
        return None

    def give_back(self, session: S) -> bool:
        """Keep ``session`` for a later case (True), clearing it meanwhile; False when it must
        be stopped instead (the pool is closed, the session is spent or not reusable)."""
        if self._closed or session.cases_served >= self._limit or not session.reusable():
            return False
        task = asyncio.create_task(self._clear(session))
        self._clearing.add(task)
        task.add_done_callback(self._clearing.discard)
        return True

    async def close(self) -> None:
        """The run ended: stop every kept process, and each one still being cleared."""
        self._closed = True
        try:
            await asyncio.gather(*self._clearing, return_exceptions=True)
        finally:  # also when the run's end is itself cancelled: no process is left running
            idle, self._idle = self._idle, []
            await asyncio.shield(
                asyncio.gather(*(session.shutdown() for session in idle), return_exceptions=True)
            )

    async def _clear(self, session: S) -> None:
        cleared = False
        try:
            cleared = await asyncio.wait_for(session.clear(), CLEAR_TIMEOUT_S)
        except Exception:
            cleared = False
        finally:
            if cleared and not self._closed:
                self._idle.append(session)
            else:
                with contextlib.suppress(Exception):
                    await session.shutdown()
