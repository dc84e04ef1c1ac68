"""Progress events the engine emits while it runs (CLI progress, DB recorder, tests)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from runs.core.wire.models import TestResult, TurnResult

EventKind = Literal["case_started", "turn_finished", "case_finished"]


@dataclass(frozen=True)
class CaseEvent:
    kind: EventKind
    case_index: int
    case_name: str | None
    total_turns: int
    turn: TurnResult | None = None
    # case_finished only: the rolled-up result and every turn (single-turn cases too).
    result: TestResult | None = None
    turns: tuple[TurnResult, ...] = ()
    # Which run of the case this is, from 0 (``execution.repeats``); 0 without repeats.
    repetition: int = 0


EventCallback = Callable[[CaseEvent], Awaitable[None] | None]


async def emit(callback: EventCallback | None, event: CaseEvent) -> None:
    if callback is None:
        return
    outcome = callback(event)
    if inspect.isawaitable(outcome):
        await outcome
