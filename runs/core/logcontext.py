"""The ids a log line carries: the request's in the web process, the run's, case's and turn's
while a worker runs a case.

They live in context variables, so each request (a thread of its own) and each case (an event
loop of its own, whose threads copy its context) sees only its own, and whatever logs meanwhile
(the services, a backend, Celery, Django) is stamped by the handler's filter
(``holodeck_web.logs.LogContextFilter``). Django-free: the services bind them here and the
web layer reads them, keeping the layer rule (holodeck_web -> runs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

LogId = str | int
# In the order a line shows them.
LOG_IDS = ("request_id", "run_id", "case_id", "case_index", "turn")
_VARS: dict[str, ContextVar[LogId | None]] = {
    name: ContextVar(f"holodeck_{name}", default=None) for name in LOG_IDS
}


@contextlib.contextmanager
def log_context(**ids: LogId | None) -> Iterator[None]:
    """Bind ``ids`` (names from LOG_IDS; None unbinds one) for the block, then restore what was
    bound before: a case run inside a run's block leaves the run's ids in place."""
    tokens = [(_VARS[name], _VARS[name].set(value)) for name, value in ids.items()]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def log_context_set(name: str, value: LogId | None) -> None:
    """Bind one id until the enclosing ``log_context`` block ends (the turn a case is on, as the
    engine reports its progress: set where no block can wrap it). Bind it inside a block that
    names it, so that block's end restores it."""
    _VARS[name].set(value)


def log_context_ids() -> dict[str, LogId]:
    """The ids bound here, without the unbound ones."""
    return {name: value for name, var in _VARS.items() if (value := var.get()) is not None}
