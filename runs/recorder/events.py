"""The engine's events -> writes: ``CaseRecorder``, the event callback of the cases a process
runs (a Celery task's, or the CLI's)."""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection

from runs.core.wire import models as wire
from runs.models import CaseRow, Run
from runs.recorder.cases import case_claim, case_finish, turns_append

CaseKey = tuple[int, int]  # (case index, repetition)


class CaseRecorder:
    """The engine's event callback for cases this process runs.

    ``per_turn`` (the dashboard's task): each finished turn is written while its case runs
    (``turns_append``), within ``write_within`` seconds of finishing; the turns of a case that
    finish closer together than that are written together, and those still unwritten when the
    case finishes are written with its result. So a case of fast turns is one transaction,
    while a slow turn is visible a fraction of a second after it finished (the run page polls
    every second), and a worker that dies loses no more than a case it runs again anyway. Each
    write also tells whether the run was cancelled (``watch_cancel``: then ``is_cancelled``
    says so). Otherwise (the CLI) a case's turns are written with its result.
    """

    def __init__(
        self,
        *,
        per_turn: bool,
        watch_cancel: bool = False,
        claim_in: Run | None = None,
        write_within: float = 0.0,
        first_at_once: bool = False,
    ) -> None:
        self.per_turn = per_turn
        # The first turn written at once, not within ``write_within``: the run's first turn,
        # which a reviewer who just launched the run waits for on an empty page.
        self.first_at_once = first_at_once
        self.claim_in = claim_in  # claim each case of this run as the engine starts it (CLI)
        self.watch_cancel = watch_cancel
        self.write_within = write_within
        self.cancelled = False
        # Keyed by (case index, repetition): a case's repetitions are rows of their own.
        self.attempts: dict[CaseKey, tuple[CaseRow, int]] = {}  # -> (row, attempt)
        self.finished: dict[CaseKey, bool] = {}  # -> settled by this attempt
        # Per case: its finished turns not written yet, the timer that will write them, the
        # write under way, and what a write in the background raised (for the case).
        self.unwritten: dict[CaseKey, list[wire.TurnResult]] = {}
        self.timers: dict[CaseKey, asyncio.TimerHandle] = {}
        self.writes: dict[CaseKey, asyncio.Task[None]] = {}
        self.failures: dict[CaseKey, Exception] = {}

    def track(self, case: CaseRow, attempt: int) -> None:
        self.attempts[(case.index, case.repetition)] = (case, attempt)

    async def __call__(self, event: Any) -> None:
        index = (event.case_index, event.repetition)
        if event.kind == "case_started" and self.claim_in is not None:
            await _async(self._claim)(index)
        owned = self.attempts.get(index)
        if owned is None:
            return
        self._raise_failure(index)
        case, attempt = owned
        if event.kind == "turn_finished" and event.turn is not None and self.per_turn:
            self.unwritten.setdefault(index, []).append(event.turn)
            if self.write_within > 0 and not self.first_at_once:
                self._write_later(index)
            else:
                self.first_at_once = False
                await self._write(index)
        elif event.kind == "case_finished" and event.result is not None:
            await self._writes_stop(index)
            unwritten = self.unwritten.pop(index, []) if self.per_turn else list(event.turns)
            self.finished[index] = await _async(case_finish)(
                case,
                attempt,
                event.result,
                event.turns,
                cancelled=self.cancelled,
                unwritten=unwritten,
            )

    def is_cancelled(self) -> bool:
        return self.cancelled

    async def flush(self) -> None:
        """Write the finished turns of every case not written yet (the engine stopped before
        their cases finished: it crashed on them)."""
        for index in list(self.attempts):
            await self._writes_stop(index)
            if self.unwritten.get(index):
                await self._write(index)

    def unsettled(self) -> list[tuple[CaseRow, int]]:
        """Cases claimed here that the engine never finished (it crashed on them)."""
        return [owned for index, owned in self.attempts.items() if index not in self.finished]

    def _claim(self, key: CaseKey) -> None:
        assert self.claim_in is not None
        case = CaseRow.objects.get(run=self.claim_in, index=key[0], repetition=key[1])
        attempt = case_claim(case)
        if attempt is not None:
            self.track(case, attempt)

    async def _write(self, index: CaseKey) -> None:
        """Write the case's finished turns not written yet."""
        turns = self.unwritten.pop(index, [])
        if not turns:
            return
        case, attempt = self.attempts[index]
        cancelled = await _async(turns_append)(case, attempt, turns)
        if self.watch_cancel:
            self.cancelled = self.cancelled or cancelled

    def _write_later(self, index: CaseKey) -> None:
        """Have the case's unwritten turns written ``write_within`` seconds from now, unless a
        write is due or under way (a write under way arranges the next one when it ends)."""
        if index in self.timers or index in self.writes:
            return
        loop = asyncio.get_running_loop()
        self.timers[index] = loop.call_later(self.write_within, self._write_start, index)

    def _write_start(self, index: CaseKey) -> None:
        del self.timers[index]
        self.writes[index] = asyncio.ensure_future(self._write_in_background(index))

    async def _write_in_background(self, index: CaseKey) -> None:
        try:
            await self._write(index)
        except Exception as exc:  # the case's next event raises it (CaseSuperseded, ...)
            self.failures[index] = exc
        finally:
            del self.writes[index]
        if index not in self.failures and self.unwritten.get(index):
            self._write_later(index)  # turns that finished during the write

    async def _writes_stop(self, index: CaseKey) -> None:
        """No write of the case's turns due or under way once this returns: a due one is
        called off (the caller writes its turns), one under way is waited for."""
        while True:
            timer = self.timers.pop(index, None)
            if timer is not None:
                timer.cancel()
            write = self.writes.get(index)
            if write is None:
                break
            await asyncio.wait([write])
        self._raise_failure(index)

    def _raise_failure(self, index: CaseKey) -> None:
        failure = self.failures.pop(index, None)
        if failure is not None:
            raise failure


def _async(fn: Any) -> Any:
    return sync_to_async(fn, thread_sensitive=True)


def close_thread_connection() -> None:
    """Close the database connection of the thread this runs in (the recorder's thread keeps
    one of its own; a long-lived worker must not leak it)."""
    connection.close()
