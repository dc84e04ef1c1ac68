"""The code-grader harness: run a user's Python grader on one turn and turn its answer into a Grade.

A code grader is ``def grade(ctx: GraderContext) -> GraderResult | bool | float`` (or ``async
def``), referenced from agent.yaml as ``grader: "module.path:callable"``. Graders are trusted
code: they run in the worker process, unsandboxed, like the agent's own function tools.

Return values (DESIGN.md §6, seed 001):

- ``True`` / ``False`` -> score 1.0 / 0.0, passed as given;
- a number in 0..1 -> the score; passed = score >= threshold, else score >= 0.5;
- ``GraderResult`` -> its score; its ``passed`` when set, else the same rule; its ``reason``;
  its ``details`` (a dict that ``json.dumps`` accepts strictly) go to ``Grade.details``.

Anything else -- another type, a score outside 0..1 or NaN, details that are not JSON, an
exception (``ExcType: message``), a timeout -- is "could not grade" (``Grade.error``), never a
low score. (With ``fail_on_error`` the engine then fails the whole test case and skips its
remaining turns.)

Under an event loop (``run_code_grader``) each call runs in a daemon thread of its own, so a slow
grader cannot block the loop; idle threads are reused from call to call, never a busy one. A
thread cannot be killed: on timeout the engine moves on and the thread finishes (or hangs) in the
background; being a daemon it never holds up the process's exit. From synchronous code
(``run_code_grader_sync``) a grader without a timeout runs in the calling thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import dataclasses
import inspect
import json
import math
import numbers
import os
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from graders.result import Grade

DEFAULT_PASS_SCORE = 0.5


@dataclass(frozen=True)
class GraderContext:
    """What a code grader sees of one turn. Read-only: collections are copied into tuples.

    ``tool_invocations`` are dicts with ``name``, ``args``, ``result`` and ``error``;
    ``agent_response`` is "" when the agent gave no response.
    """

    turn_input: str
    agent_response: str
    ground_truth: str | None = None
    tool_invocations: Sequence[Mapping[str, Any]] = ()
    retrieval_context: Sequence[str] | None = None
    turn_index: int = 0
    test_case_name: str | None = None
    turn_config: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Graders run in another thread; give them copies so they cannot change the run's state.
        set_ = object.__setattr__
        set_(self, "agent_response", self.agent_response or "")
        set_(self, "tool_invocations", tuple(_as_dict(t) for t in self.tool_invocations))
        if self.retrieval_context is not None:
            set_(self, "retrieval_context", tuple(self.retrieval_context))
        set_(self, "turn_config", copy.deepcopy(dict(self.turn_config or {})))


def _as_dict(invocation: Any) -> dict[str, Any]:
    # Accept the backends' record dataclasses as well as plain dicts.
    if dataclasses.is_dataclass(invocation) and not isinstance(invocation, type):
        return dataclasses.asdict(invocation)
    return dict(invocation)


@dataclass(frozen=True)
class GraderResult:
    """The full answer of a code grader."""

    score: float
    passed: bool | None = None
    reason: str | None = None
    details: dict[str, Any] | None = None


GraderFn = Callable[[GraderContext], Any]


class GraderOutputError(ValueError):
    """The grader returned something the harness cannot record."""


async def run_code_grader(
    fn: GraderFn,
    ctx: GraderContext,
    *,
    name: str,
    threshold: float | None = None,
    timeout_s: float | None = None,
) -> Grade:
    """Run one (sync or async) grader on one turn. Never raises for the grader's faults."""
    start = time.perf_counter()
    try:
        raw = await _call_in_thread(fn, ctx, name=name, timeout_s=timeout_s)
    except (TimeoutError, _GraderRaised) as exc:
        return _failed(_fault_text(exc, timeout_s), threshold, start)
    return _graded(raw, threshold, start)


def run_code_grader_sync(
    fn: GraderFn,
    ctx: GraderContext,
    *,
    name: str,
    threshold: float | None = None,
    timeout_s: float | None = None,
) -> Grade:
    """``run_code_grader`` from synchronous code, with the same grades.

    Without a timeout (and with no event loop running in this thread) the grader runs right
    here: there is no loop to keep free, and the caller waits for it either way. With one, it
    runs in a worker thread and the caller waits at most ``timeout_s``.
    """
    start = time.perf_counter()
    try:
        if timeout_s is None and asyncio._get_running_loop() is None:
            raw = _call_here(fn, ctx)
        else:
            raw = _call_in_thread_sync(fn, ctx, name=name, timeout_s=timeout_s)
    except (TimeoutError, _GraderRaised) as exc:
        return _failed(_fault_text(exc, timeout_s), threshold, start)
    return _graded(raw, threshold, start)


def _elapsed_ms(start: float) -> int:
    return round((time.perf_counter() - start) * 1000)


def _failed(message: str, threshold: float | None, start: float) -> Grade:
    return Grade.could_not_grade(
        message, threshold=threshold, evaluation_time_ms=_elapsed_ms(start)
    )


def _fault_text(exc: TimeoutError | _GraderRaised, timeout_s: float | None) -> str:
    """Why a grader gave no answer: it ran out of time, or raised (named with its type)."""
    if isinstance(exc, _GraderRaised):
        return f"{type(exc.original).__name__}: {exc.original}"
    return f"timed out after {timeout_s:g}s"


def _graded(raw: Any, threshold: float | None, start: float) -> Grade:
    """The grader's answer as a Grade (or "could not grade" when it cannot be recorded)."""
    try:
        result = normalize_grader_output(raw)
    except GraderOutputError as exc:
        return _failed(str(exc), threshold, start)
    passed = result.passed
    if passed is None:
        bar = threshold if threshold is not None else DEFAULT_PASS_SCORE
        passed = result.score >= bar
    return Grade(
        score=result.score,
        passed=passed,
        threshold=threshold,
        reason=result.reason,
        details=result.details,
        evaluation_time_ms=_elapsed_ms(start),
    )


def normalize_grader_output(raw: Any) -> GraderResult:
    """bool / number / GraderResult -> a validated GraderResult. Raises GraderOutputError."""
    if isinstance(raw, bool):
        return GraderResult(score=1.0 if raw else 0.0, passed=raw)
    if isinstance(raw, numbers.Real):
        return GraderResult(score=_valid_score(raw))
    if isinstance(raw, GraderResult):
        return GraderResult(
            score=_valid_score(raw.score),
            passed=_valid_passed(raw.passed),
            reason=None if raw.reason is None else str(raw.reason),
            details=_valid_details(raw.details),
        )
    raise GraderOutputError(
        f"unsupported return type {type(raw).__name__}; "
        "return a bool, a number in 0..1 or a GraderResult"
    )


def _valid_score(score: Any) -> float:
    if isinstance(score, bool):
        return 1.0 if score else 0.0
    if not isinstance(score, numbers.Real):
        raise GraderOutputError(f"score must be a number, got {type(score).__name__}")
    value = float(score)
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise GraderOutputError(f"score {value!r} is outside 0..1")
    return value


def _valid_passed(passed: Any) -> bool | None:
    if passed is None or isinstance(passed, bool):
        return passed
    raise GraderOutputError(f"passed must be a bool or None, got {type(passed).__name__}")


def _valid_details(details: Any) -> dict[str, Any] | None:
    if details is None:
        return None
    if not isinstance(details, dict):
        raise GraderOutputError(f"details must be a dict, got {type(details).__name__}")
    try:
        # Round-trip: stores a plain-JSON copy the grader can no longer mutate.
        text = json.dumps(details, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise GraderOutputError(f"details are not JSON-safe: {exc}") from None
    loaded: dict[str, Any] = json.loads(text)
    return loaded


# --- the worker thread ---------------------------------------------------------------------


class _GraderRaised(Exception):
    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


async def _call_in_thread(
    fn: GraderFn, ctx: GraderContext, *, name: str, timeout_s: float | None
) -> Any:
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[tuple[bool, Any]] = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if not outcome.done():  # a timed-out wait has already cancelled it
            outcome.set_result((ok, value))

    def work() -> None:
        report = _run_reporting(context, fn, ctx)
        # RuntimeError: the loop is gone, so nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, *report)

    _WORKERS.run(work, name=f"code-grader:{name}")
    ok, value = await asyncio.wait_for(outcome, timeout_s)
    if not ok:
        raise _GraderRaised(value)
    return value


def _call_in_thread_sync(
    fn: GraderFn, ctx: GraderContext, *, name: str, timeout_s: float | None
) -> Any:
    context = contextvars.copy_context()
    outcome: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
    _WORKERS.run(lambda: outcome.put(_run_reporting(context, fn, ctx)), name=f"code-grader:{name}")
    try:
        ok, value = outcome.get(timeout=timeout_s)
    except queue.Empty:
        raise TimeoutError from None
    if not ok:
        raise _GraderRaised(value)
    return value


def _call_here(fn: GraderFn, ctx: GraderContext) -> Any:
    """In the calling thread, in a copy of its context (as a worker thread would be)."""
    try:
        return contextvars.copy_context().run(_invoke, fn, ctx)
    except KeyboardInterrupt:  # the user pressed Ctrl-C: not the grader's answer
        raise
    except BaseException as exc:  # a grader's SystemExit must not end the caller
        raise _GraderRaised(exc) from None


def _run_reporting(context: contextvars.Context, fn: GraderFn, ctx: GraderContext) -> Any:
    try:
        return (True, context.run(_invoke, fn, ctx))
    except BaseException as exc:  # a grader's SystemExit must not kill the worker
        return (False, exc)


def _invoke(fn: GraderFn, ctx: GraderContext) -> Any:
    value = fn(ctx)
    if inspect.isawaitable(value):
        # An async grader gets its own event loop in its own thread.
        return asyncio.run(_await(value))
    return value


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


class _Workers:
    """Daemon threads reused from one grader call to the next (starting a thread costs more
    than most graders). A call gets an idle thread or a new one, never a busy one: a grader
    that overruns its timeout keeps its thread until it returns and delays no other call, as
    with a thread per call. At most ``max_idle`` threads wait for work, each for ``idle_s``."""

    def __init__(self, *, max_idle: int = 8, idle_s: float = 60.0) -> None:
        self.max_idle = max_idle
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[tuple[Callable[[], None], str]]] = []

    def run(self, job: Callable[[], None], *, name: str) -> None:
        """Start ``job`` (which must not raise) in a thread named ``name``."""
        with self._lock:
            jobs = self._idle.pop() if self._idle else None
        if jobs is None:
            jobs = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(jobs,), name=name, daemon=True).start()
        jobs.put((job, name))

    def _serve(self, jobs: queue.SimpleQueue[tuple[Callable[[], None], str]]) -> None:
        thread = threading.current_thread()
        while True:
            try:
                job, thread.name = jobs.get(timeout=self.idle_s)
            except queue.Empty:
                if self._retire(jobs):
                    return
                continue  # taken just now: its job is on the way
            job()
            del job
            if not self._rest(jobs):
                return

    def _rest(self, jobs: queue.SimpleQueue[tuple[Callable[[], None], str]]) -> bool:
        with self._lock:
            if len(self._idle) >= self.max_idle:
                return False
            self._idle.append(jobs)
            return True

    @property
    def idle_threads(self) -> int:
        return len(self._idle)

    def forget(self) -> None:
        """In a forked child: the parent's threads do not exist here."""
        self._lock = threading.Lock()
        self._idle = []

    def _retire(self, jobs: queue.SimpleQueue[tuple[Callable[[], None], str]]) -> bool:
        with self._lock:
            if jobs not in self._idle:
                return False
            self._idle.remove(jobs)
            return True


_WORKERS = _Workers()
os.register_at_fork(after_in_child=_WORKERS.forget)


__all__ = [
    "DEFAULT_PASS_SCORE",
    "GraderContext",
    "GraderFn",
    "GraderOutputError",
    "GraderResult",
    "normalize_grader_output",
    "run_code_grader",
    "run_code_grader_sync",
]
