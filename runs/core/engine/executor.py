"""The async executor: one backend session per test case, turns in order, every turn graded.

The rules (DESIGN.md §5) in one place:
- one session per case, closed on every outcome; a single-turn case is a one-turn session;
  a backend whose sessions start slowly gets the next cases' sessions opened ahead
  (``runs.core.engine.sessions``), each still for its own case only;
- ``llm_timeout`` bounds every send; a failed or timed-out turn is recorded and the next runs;
- two consecutive session errors make the session unrecoverable: the rest are ``skipped``;
- a ``fail_on_error`` metric that could not grade fails its case and skips the rest;
- tool assertions see only the calls of their turn; metrics: turn > case > agent;
- retrieval context: the turn's own, else what ``is_retrieval`` tools returned so far;
- ``parallel_test_cases`` bounds concurrent cases; results keep the input order.
"""

from __future__ import annotations

import asyncio
import json
import platform
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from graders.matchers import json_safe, matcher_to_config
from graders.result import error_text
from runs.core.backends.base import AgentBackend, AgentSession, TurnOutput, backend_for
from runs.core.engine.events import CaseEvent, EventCallback, emit
from runs.core.engine.files import FileProcessor
from runs.core.engine.grading import TurnGrades, grade_turn, graded_turn
from runs.core.engine.metrics import MetricRunner, TurnFacts, turn_metrics
from runs.core.engine.sessions import (
    OpenedSession,
    SessionStarts,
    close_session,
    costly_start,
    elapsed_ms,
    open_session,
    reuses_sessions,
    session_scope,
    sessions_ahead,
)
from runs.core.verdicts.numbers import repetition_name
from runs.core.wire.build import rollup_turns, single_turn_result, summarize, summary_of_results
from runs.core.wire.models import (
    ProcessedFileInput,
    TestReport,
    TestResult,
    ToolInvocation,
    TurnResult,
)
from runs.core.wire.repetitions import repetition_summaries
from runs.core.wire.times import grading_ms
from runs.core.wire.transcripts import turn_events

if TYPE_CHECKING:
    from runs.core.agentconfig.loader import LoadedAgent
    from runs.core.agentconfig.test_cases import ExpectedTool, TestCase, Turn

ENGINE_VERSION = "holodeck-web 0.1.0"
MAX_CONSECUTIVE_SESSION_ERRORS = 2


def utc_now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class SessionState:
    """What one session has accumulated so far."""

    consecutive_errors: int = 0
    stop_reason: str | None = None
    retrieval_context: list[str] = field(default_factory=list)
    # Whether a turn's transcript holds the session's system prompt yet (its first sent turn).
    system_recorded: bool = False

    def session_outcome(self, *, failed: bool) -> None:
        """Two consecutive session errors make the session unrecoverable."""
        self.consecutive_errors = self.consecutive_errors + 1 if failed else 0
        if self.consecutive_errors >= MAX_CONSECUTIVE_SESSION_ERRORS and self.stop_reason is None:
            self.stop_reason = (
                f"session unrecoverable after {MAX_CONSECUTIVE_SESSION_ERRORS} consecutive errors"
            )

    def session_error(self) -> None:
        self.session_outcome(failed=True)


class Engine:
    def __init__(
        self,
        agent: LoadedAgent,
        *,
        backend: AgentBackend | None = None,
        on_event: EventCallback | None = None,
        judge: Any = None,
        is_cancelled: Callable[[], bool] | None = None,
    ) -> None:
        self.agent = agent
        self.backend = backend or backend_for(agent)
        self.on_event = on_event
        self.metrics = MetricRunner(agent, judge=judge)
        self.files = FileProcessor(agent.base_dir, agent.config.execution)
        self.is_cancelled = is_cancelled or (lambda: False)
        self.retrieval_tools = [
            tool.name for tool in agent.config.tools if getattr(tool, "is_retrieval", False)
        ]

    # --- a whole run -------------------------------------------------------------------------

    async def run(
        self,
        *,
        parallel: int | None = None,
        case_indices: Sequence[int] | None = None,
        repeats: int = 1,
    ) -> TestReport:
        """Run the cases (``case_indices``, else all), each ``repeats`` times as independent
        sessions; the results in case order, a case's repetitions together."""
        cases = self.agent.config.test_cases
        indices = list(range(len(cases))) if case_indices is None else list(case_indices)
        # What runs: (case index, repetition), each on a session of its own.
        units = [(index, repetition) for index in indices for repetition in range(repeats)]
        width = max(1, parallel or self.agent.parallel_test_cases)
        limit = asyncio.Semaphore(width)
        starts = self._session_starts(units, width) if costly_start(self.backend) else None
        started = time.perf_counter()

        async def bounded(unit: int) -> TestResult:
            index, repetition = units[unit]
            async with limit:
                try:
                    return await self.run_case(
                        index, starts=starts, repetition=repetition, slot=unit
                    )
                except Exception as exc:  # one broken case never sinks the others
                    return self._crashed_case(index, exc)
                finally:
                    if starts is not None:  # a session opened for a case that crashed
                        await starts.discard(unit)

        async with session_scope(self.backend):
            try:
                results = await asyncio.gather(*(bounded(unit) for unit in range(len(units))))
            finally:
                if starts is not None:
                    await starts.close()
        if repeats == 1:
            return self.report(list(results), elapsed_ms(started))
        summaries = repetition_summaries(
            (
                (index, cases[index].name, result)
                for result, (index, _) in zip(results, units, strict=True)
            ),
            repeats,
        )
        named = [
            repetition_named(result, index, repetition, repeats)
            for result, (index, repetition) in zip(results, units, strict=True)
        ]
        report = self.report(named, elapsed_ms(started))
        return report.model_copy(update={"repetitions": summaries})

    def _session_starts(self, units: Sequence[tuple[int, int]], parallel: int) -> SessionStarts:
        """Sessions opened ahead of their cases, for a backend whose sessions start slowly
        (keyed by the position of each case's repetition in ``units``)."""
        return SessionStarts(
            lambda unit: self._create_session(units[unit][0]),
            range(len(units)),
            ahead=1 if reuses_sessions(self.backend) else sessions_ahead(parallel),
            timeout=self.agent.config.execution.llm_timeout,
            is_cancelled=self.is_cancelled,
        )

    def report(self, results: list[TestResult], total_ms: int) -> TestReport:
        return TestReport(
            agent_name=self.agent.config.name,
            agent_config_path=str(self.agent.path),
            results=results,
            summary=summarize(results, total_ms),
            run_summary=summary_of_results(results),
            timestamp=utc_now(),
            holodeck_version=ENGINE_VERSION,
            environment={"python": platform.python_version(), "engine": ENGINE_VERSION},
        )

    # --- one test case -----------------------------------------------------------------------

    async def run_case(
        self,
        index: int,
        *,
        starts: SessionStarts | None = None,
        repetition: int = 0,
        slot: int | None = None,
    ) -> TestResult:
        """Run one case (its ``repetition``) on its own session: taken from ``starts`` (opened
        ahead, under the key ``slot``, else ``index``) when given, else opened here."""
        case = self.agent.config.test_cases[index]
        turns = case.as_turns()
        event = partial(
            CaseEvent,
            case_index=index,
            case_name=case.name,
            total_turns=len(turns),
            repetition=repetition,
        )
        await emit(self.on_event, event("case_started"))
        state = SessionState()
        results: list[TurnResult] = []
        files: list[ProcessedFileInput] = []
        session: AgentSession | None = None
        open_error: str | None = None
        opened: OpenedSession | None = None
        try:
            if not self.is_cancelled():  # a cancelled run's cases start no session
                opened = await self._open(index if slot is None else slot, starts, index)
                session, open_error = opened.session, opened.error
            for turn_index, turn in enumerate(turns):
                if self.is_cancelled() and state.stop_reason is None:
                    state.stop_reason = "run cancelled"
                if open_error is not None:
                    # The failure is this turn's error; the rest cannot run without a session.
                    turn_result = self._failed_turn(turn, turn_index, open_error)
                    open_error, state.stop_reason = None, "no agent session"
                elif session is None or state.stop_reason is not None:
                    turn_result = self._skipped_turn(turn, turn_index, state.stop_reason or "")
                else:
                    turn_result, processed = await self._run_turn_safely(
                        session, case, turn, turn_index, state
                    )
                    files.extend(processed)
                results.append(turn_result)
                await emit(self.on_event, event("turn_finished", turn=turn_result))
        finally:
            if session is not None:
                await close_session(session)
        result = self._timed(self._case_result(case, results, files), results, opened)
        await emit(self.on_event, event("case_finished", result=result, turns=tuple(results)))
        return result

    @staticmethod
    def _timed(
        result: TestResult, turns: Sequence[TurnResult], opened: OpenedSession | None
    ) -> TestResult:
        """The case's time is its turns' sends, their grading (runs.core.wire.times) and the part
        of its session's start it waited for: the parts add up to it."""
        update: dict[str, Any] = {
            "execution_time_ms": result.execution_time_ms + sum(grading_ms(t) for t in turns)
        }
        if opened is not None:
            update["session_start_ms"] = opened.start_ms
            update["execution_time_ms"] += opened.waited_ms
        return result.model_copy(update=update)

    async def _open(self, key: int, starts: SessionStarts | None, index: int) -> OpenedSession:
        if starts is not None:
            return await starts.take(key)
        timeout = self.agent.config.execution.llm_timeout
        return await open_session(self._create_session, index, timeout)

    def _create_session(self, index: int) -> Awaitable[AgentSession]:
        case = self.agent.config.test_cases[index]
        return self.backend.create_session(case_name=case.name, case_index=index)

    def _crashed_case(self, index: int, exc: Exception) -> TestResult:
        case = self.agent.config.test_cases[index]
        return TestResult(
            test_name=case.name,
            test_input="\n---\n".join(turn.input for turn in case.as_turns()),
            passed=False,
            execution_time_ms=0,
            errors=[f"execution error: {error_text(exc)}"],
            timestamp=utc_now(),
            outcome="error",  # it produced no answer to grade, as the recorder stores it
        )

    def _case_result(
        self, case: TestCase, turns: list[TurnResult], files: list[ProcessedFileInput]
    ) -> TestResult:
        if case.is_multi_turn:
            return rollup_turns(
                turns, test_name=case.name, timestamp=utc_now(), processed_files=files
            )
        return single_turn_result(turns[0], case.name, utc_now(), files)

    # --- one turn ----------------------------------------------------------------------------

    async def _run_turn_safely(
        self,
        session: AgentSession,
        case: TestCase,
        turn: Turn,
        turn_index: int,
        state: SessionState,
    ) -> tuple[TurnResult, list[ProcessedFileInput]]:
        """A turn whose own bookkeeping fails (an odd tool result, a grader-side bug) is
        recorded as that turn's error; it never takes the case, or the run, down."""
        try:
            return await self._run_turn(session, case, turn, turn_index, state)
        except Exception as exc:
            state.session_error()
            return self._failed_turn(turn, turn_index, f"engine error: {error_text(exc)}"), []

    async def _run_turn(
        self,
        session: AgentSession,
        case: TestCase,
        turn: Turn,
        turn_index: int,
        state: SessionState,
    ) -> tuple[TurnResult, list[ProcessedFileInput]]:
        processed = await self.files.process(turn.files or [])
        message = compose_message(turn.input, processed)
        started = time.perf_counter()
        output = await self._send(session, message)
        sent_ms = elapsed_ms(started)
        errors = [
            f"file {p.original.get('path') or p.original.get('url')}: {p.error}"
            for p in processed
            if p.error
        ]
        if output.is_error:
            errors.append(output.error or "agent error")
        state.session_outcome(failed=output.is_error)
        self._collect_retrieval(output.tool_calls, state)

        grades = await self._grade(case, turn, turn_index, output, state)
        if grades.stop_reason is not None and state.stop_reason is None:
            state.stop_reason = grades.stop_reason
        answered = TurnResult(
            turn_index=turn_index,
            input=turn.input,
            response=output.response,
            ground_truth=turn.ground_truth,
            expected_tools=serialize_expected(turn.expected_tools),
            tool_calls=[call.name for call in output.tool_calls],
            tool_invocations=list(output.tool_calls),
            passed=False,
            execution_time_ms=sent_ms,
            token_usage=output.usage,
            errors=errors,
            transcript=self._transcript(session, message, output, state),
        )
        result = graded_turn(answered, grades)
        return result, processed

    def _transcript(
        self, session: AgentSession, message: str, output: TurnOutput, state: SessionState
    ) -> list[dict[str, Any]]:
        """The turn's transcript: the session's system prompt (its first sent turn), the
        message as sent, what the backend captured, and its failure when it failed."""
        system: str | None = None
        if not state.system_recorded:
            state.system_recorded = True
            system = getattr(session, "system_prompt", self.agent.instructions)
        events = turn_events(
            user_text=message,
            backend_events=output.transcript,
            system_text=system,
            system_source=self.agent.instructions_source
            or self.agent.config.instructions.file
            or "agent.yaml",
        )
        if output.is_error and not any(event["type"] == "error" for event in events):
            events.append({"type": "error", "text": output.error or "agent error"})
        return events

    async def _send(self, session: AgentSession, message: str) -> TurnOutput:
        timeout = self.agent.config.execution.llm_timeout
        try:
            return await asyncio.wait_for(session.send(message), timeout=timeout)
        except TimeoutError:
            # What the turn did before it was stopped, where the session can tell.
            partial = getattr(session, "partial_transcript", None)
            return TurnOutput(
                None,
                is_error=True,
                error=f"Agent invocation timeout after {timeout:g}s",
                transcript=partial() if callable(partial) else None,
            )
        except Exception as exc:  # a crashing backend is recorded on this turn; the run goes on
            return TurnOutput(None, is_error=True, error=f"Agent error: {error_text(exc)}")

    async def _grade(
        self, case: TestCase, turn: Turn, turn_index: int, output: TurnOutput, state: SessionState
    ) -> TurnGrades:
        """Tool assertions always; metrics only when the agent answered (the public grading API)."""
        metrics = turn_metrics(self.agent.config, case, turn)
        facts = TurnFacts(
            case_name=case.name,
            turn_index=turn_index,
            input=turn.input,
            response=output.response or "",
            ground_truth=turn.ground_truth,
            retrieval_context=turn.retrieval_context or (list(state.retrieval_context) or None),
            tool_invocations=[call.model_dump() for call in output.tool_calls],
            turn_config=turn.turn_config,
        )
        return await grade_turn(
            facts,
            metrics=[] if output.is_error else metrics,
            expected_tools=turn.tool_expectations(),
            runner=self.metrics,
        )

    def _collect_retrieval(self, calls: list[ToolInvocation], state: SessionState) -> None:
        if not self.retrieval_tools:
            return
        for call in calls:
            if call.error is None and any(
                is_tool_of(call.name, name) for name in self.retrieval_tools
            ):
                state.retrieval_context.append(as_text(call.result))

    def _failed_turn(self, turn: Turn, turn_index: int, error: str) -> TurnResult:
        return _unsent_turn(turn, turn_index, error, skipped=False)

    def _skipped_turn(self, turn: Turn, turn_index: int, reason: str) -> TurnResult:
        return _unsent_turn(turn, turn_index, f"skipped: {reason}", skipped=True)


def repetition_named(result: TestResult, index: int, repetition: int, repeats: int) -> TestResult:
    """The result of one repetition, named for result files (``repetition_name``)."""
    name = repetition_name(result.test_name, index=index, repetition=repetition, repeats=repeats)
    return result.model_copy(update={"test_name": name})


def _unsent_turn(turn: Turn, turn_index: int, error: str, *, skipped: bool) -> TurnResult:
    """A turn that never reached the agent: failed (error) or skipped (reason)."""
    return TurnResult(
        turn_index=turn_index,
        input=turn.input,
        ground_truth=turn.ground_truth,
        expected_tools=serialize_expected(turn.expected_tools),
        passed=False,
        execution_time_ms=0,
        errors=[error],
        skipped=skipped,
    )


def compose_message(text: str, files: Sequence[ProcessedFileInput]) -> str:
    """The turn input plus the Markdown of its files (sent with this turn only)."""
    blocks = [text]
    for processed in files:
        if processed.error or not processed.markdown_content:
            continue
        name = processed.original.get("path") or processed.original.get("url")
        blocks.append(f"--- file: {name} ---\n{processed.markdown_content}")
    return "\n\n".join(blocks)


def serialize_expected(
    expected: Sequence[str | ExpectedTool] | None,
) -> list[str | dict[str, Any]] | None:
    if expected is None:
        return None
    out: list[str | dict[str, Any]] = []
    for item in expected:
        if isinstance(item, str):
            out.append(item)
            continue
        entry: dict[str, Any] = {"name": item.name, "count": item.count}
        if item.args:
            entry["args"] = {key: matcher_to_config(value) for key, value in item.args.items()}
        out.append(entry)
    return out


def is_tool_of(call_name: str, tool_name: str) -> bool:
    """Whether a recorded call belongs to a configured tool (or MCP server) of that name, as
    backends report it: ``name``, ``mcp__name__tool``, ``name-tool`` or ``plugin-name``."""
    return (
        call_name == tool_name
        or call_name.startswith((f"mcp__{tool_name}__", f"{tool_name}-"))
        or call_name.endswith((f"__{tool_name}", f"-{tool_name}"))
    )


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(json_safe(value))
