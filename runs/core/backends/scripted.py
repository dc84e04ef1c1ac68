"""The scripted provider: replays a transcript, executing the agent's real tools.

It is what ``dev.py run``, the examples, the benchmarks and most tests use: deterministic, offline,
and still exercising the real tool code, the engine and the graders. A transcript is YAML/JSON::

    cases:
      "<test case name, or #index>":
        - tool_calls:                       # turn 0: calls made before answering
            - {name: subtract, args: {a: 206588, b: 181001}}
          response: "25587"
        - response: "14.1%"                 # turn 1
        - error: "model overloaded"         # turn 2: the model call fails (a session error)
        - delay_ms: 5000                    # turn 3: a slow model (for timeout tests)
          response: "late"

A tool call names a function tool, or a tool of an MCP server as ``mcp__<server>__<tool>`` (or
``<server>.<tool>``); MCP servers are connected on first use and closed with the session.

Without ``model.transcript`` the transcript is built from the test cases themselves
(:func:`build_transcript`): each turn calls its expected tools with their expected args and
answers its ground truth, so a large suite runs offline. ``model.latency_ms`` adds a fixed delay
to every simulated model call (one per tool round, one for the answer), for benchmarks.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from graders.matchers import FuzzyMatcher, LiteralMatcher
from runs.core.agentconfig.test_cases import case_label
from runs.core.backends.base import BackendError, TurnOutput, captured_call
from runs.core.backends.function_tools import (
    call_function_tool,
    error_text,
    function_description,
    function_tool_schema,
)
from runs.core.backends.mcp_client import McpConnection
from runs.core.backends.replay import CaseReplay, Refused, Replayed, ToolReplay, replay_begin_turn
from runs.core.wire.models import TokenUsage, ToolInvocation
from runs.core.wire.requests import RequestLog
from runs.core.wire.transcripts import TurnTrace

if TYPE_CHECKING:
    from collections.abc import Callable

    from runs.core.agentconfig.loader import LoadedAgent
    from runs.core.agentconfig.test_cases import TestCase
    from runs.core.agentconfig.tool_config import McpTool

Transcript = dict[str, list[dict[str, Any]]]


def case_key(case: TestCase, index: int) -> str:
    return case_label(case.name, index)


def build_transcript(test_cases: list[TestCase]) -> Transcript:
    """A transcript that answers every turn's ground truth and calls its expected tools.

    Literal and fuzzy arg matchers give the value to send; regex matchers cannot be inverted,
    so such args are left out (the real tool then reports the missing argument).
    """
    cases: Transcript = {}
    for index, case in enumerate(test_cases):
        turns = []
        for turn in case.as_turns():
            calls: list[dict[str, Any]] = []
            for expected in turn.tool_expectations():
                args: dict[str, Any] = {}
                for arg, matcher in (expected.args or {}).items():
                    if isinstance(matcher, LiteralMatcher):
                        args[arg] = matcher.value
                    elif isinstance(matcher, FuzzyMatcher):
                        args[arg] = matcher.pattern
                calls.extend({"name": expected.name, "args": args} for _ in range(expected.count))
            turns.append({"tool_calls": calls, "response": turn.ground_truth or ""})
        cases[case_key(case, index)] = turns
    return cases


def load_transcript(path: Path) -> Transcript:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BackendError(f"cannot read scripted transcript {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("cases"), dict):
        raise BackendError(f"scripted transcript {path} must be a mapping with a 'cases' mapping")
    return {str(name): list(turns or []) for name, turns in data["cases"].items()}


class ScriptedBackend:
    def __init__(
        self,
        agent: LoadedAgent,
        transcript: Transcript | None = None,
        *,
        replay: ToolReplay | None = None,
    ) -> None:
        self.agent = agent
        self.replay = replay
        model = agent.config.model
        if transcript is not None:
            self.transcript = transcript
        elif model.transcript:
            self.transcript = load_transcript(agent.base_dir / model.transcript)
        else:
            self.transcript = build_transcript(agent.config.test_cases)
        self.latency_s = (model.latency_ms or 0) / 1000
        self.model_name = model.name
        self.tools: dict[str, Callable[..., Any]] = {
            tool.name: tool.callable for tool in agent.config.tools if tool.type == "function"
        }
        self.mcp_servers: dict[str, McpTool] = {
            tool.name: tool for tool in agent.config.tools if tool.type == "mcp"
        }
        self.request_params = scripted_params(agent)
        self.tools_offered = scripted_tools(agent)

    async def create_session(self, *, case_name: str | None, case_index: int) -> ScriptedSession:
        key = case_label(case_name, case_index)
        turns = self.transcript.get(key)
        if turns is None:
            turns = self.transcript.get(f"#{case_index}")
        replay = self.replay.for_case(case_index) if self.replay is not None else None
        return ScriptedSession(self, key, turns, replay=replay)


class ScriptedSession:
    def __init__(
        self,
        backend: ScriptedBackend,
        key: str,
        turns: list[dict[str, Any]] | None,
        *,
        replay: CaseReplay | None = None,
    ):
        self.backend = backend
        self.replay = replay
        self.key = key
        self.turns = turns
        self.turn_index = 0
        self.closed = False
        self.history: list[str] = []
        self.mcp: dict[str, McpConnection] = {}
        # The conversation as the scripted model is sent it (OpenAI's message shape), and the
        # log its requests are kept in (runs.core.wire.requests).
        instructions = backend.agent.instructions
        self.messages: list[dict[str, Any]] = (
            [{"role": "system", "content": instructions}] if instructions else []
        )
        self.requests = RequestLog()

    async def send(self, message: str) -> TurnOutput:
        if self.closed:
            raise BackendError("session is closed")
        index = self.turn_index
        self.turn_index += 1
        self.history.append(message)
        self.messages.append({"role": "user", "content": message})
        replay_begin_turn(self.replay)
        if self.turns is None:
            return TurnOutput(None, is_error=True, error=f"transcript has no case {self.key!r}")
        if index >= len(self.turns):
            return TurnOutput(
                None, is_error=True, error=f"transcript of {self.key!r} has no turn {index}"
            )
        step = self.turns[index] or {}
        return await self._play(step, message)

    async def _play(self, step: dict[str, Any], message: str) -> TurnOutput:
        """Play one scripted turn: a model call that asks for the step's tools (when it has
        any), the tools run for real, then the model call that answers. Its transcript holds
        those calls; the turn's tokens are counted once, input on the first call and output on
        the last."""
        trace = TurnTrace()
        calls = step.get("tool_calls") or []
        records = []
        prompt = max(1, len(message) // 4)
        if calls:
            await self._model_call(trace, input_tokens=prompt, stop_reason="tool_calls")
            prompt = 0
            asked = len(self.messages)
            self.messages.append(_assistant_calls(calls, asked))
            for slot, call in enumerate(calls):
                record = await self._call_tool(call, trace)
                records.append(record)
                self.messages.append(_tool_message(record, _call_id(asked, slot)))
        error = step.get("error")
        response = step.get("response")
        text = response if isinstance(response, str) or response is None else json.dumps(response)
        output_tokens = 0 if error else len(text or "") // 4
        await self._model_call(
            trace,
            step.get("delay_ms"),
            input_tokens=prompt,
            output_tokens=output_tokens,
            stop_reason="error" if error else "stop",
        )
        if error:
            trace.add("error", text=str(error))
            return TurnOutput(
                None, records, is_error=True, error=str(error), transcript=trace.finished()
            )
        if text is not None:
            trace.add("assistant", text=text)
            self.messages.append({"role": "assistant", "content": text})
        usage = TokenUsage.counted(max(1, len(message) // 4), output_tokens)
        return TurnOutput(text, records, usage, transcript=trace.finished())

    async def _model_call(
        self,
        trace: TurnTrace,
        delay_ms: float | None = None,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        stop_reason: str,
    ) -> None:
        start = trace.now_ms()
        body = {**self.backend.request_params, "messages": list(self.messages)}
        if self.backend.tools_offered:
            body["tools"] = self.backend.tools_offered
        request = self.requests.request(body, fmt="scripted")
        delay = self.backend.latency_s + (delay_ms or 0) / 1000
        if delay > 0:
            await asyncio.sleep(delay)
        trace.add(
            "model_call",
            model=self.backend.model_name,
            start_ms=start,
            duration_ms=round(trace.now_ms() - start, 3),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=0,
            stop_reason=stop_reason,
            attempt=1,
            messages=len(body["messages"]),
            request=request,
        )

    async def _call_tool(self, call: dict[str, Any], trace: TurnTrace) -> ToolInvocation:
        record, replayed = await self._run_tool(call)
        duration = record.duration_ms or 0.0
        trace.add(
            "tool_call",
            id=f"call_{len(trace.events)}",
            name=record.name,
            args=record.args,
            result=record.result,
            error=record.error,
            start_ms=round(trace.now_ms() - duration, 3),
            duration_ms=duration,
            **({"replayed": True} if replayed else {}),
        )
        return record

    async def _run_tool(self, call: dict[str, Any]) -> tuple[ToolInvocation, bool]:
        """The call's record, and whether the replay's recording answered it."""
        name = str(call.get("name", ""))
        args = dict(call.get("args") or {})
        if (target := self._mcp_target(name)) is not None:
            name = f"mcp__{target[0]}__{target[1]}"  # the name Claude's SDK would report
        answer = self.replay.answer(name, args) if self.replay is not None else None
        if isinstance(answer, Replayed):
            return captured_call(name, args, result=answer.result, error=answer.error), True
        if isinstance(answer, Refused):
            return captured_call(name, args, error=answer.error), False
        return await self._run_live(name, args, target), False

    async def _run_live(
        self, name: str, args: dict[str, Any], target: tuple[str, str] | None
    ) -> ToolInvocation:
        started = time.perf_counter()
        fn = self.backend.tools.get(name)
        if fn is not None:
            result, error = await call_function_tool(fn, args)
        elif target is not None:
            server, tool_name = target
            try:
                connection = await self._connect(server)
                result, error = await connection.call(tool_name, args)
            except Exception as exc:
                result, error = None, error_text(exc)
        else:
            return captured_call(name, args, error=f"unknown tool {name!r}")
        duration_ms = (time.perf_counter() - started) * 1000
        return captured_call(name, args, result=result, error=error, duration_ms=duration_ms)

    def _mcp_target(self, name: str) -> tuple[str, str] | None:
        """``mcp__server__tool`` or ``server.tool`` names a tool of a configured MCP server."""
        if name.startswith("mcp__"):
            server, _, tool_name = name[5:].partition("__")
        else:
            server, _, tool_name = name.partition(".")
        if server in self.backend.mcp_servers and tool_name:
            return server, tool_name
        return None

    async def _connect(self, server: str) -> McpConnection:
        if server not in self.mcp:
            connection = McpConnection(self.backend.mcp_servers[server])
            # Registered before it starts: if the turn is cancelled (llm_timeout) while the
            # server starts, close() still stops it.
            self.mcp[server] = connection
            try:
                await connection.start()
            except Exception:
                del self.mcp[server]  # start() has closed it already
                raise
        return self.mcp[server]

    async def close(self) -> None:
        self.closed = True
        for connection in self.mcp.values():
            await connection.close()
        self.mcp.clear()


def scripted_params(agent: LoadedAgent) -> dict[str, Any]:
    """What a scripted model call is sent besides the conversation: the model and the sampling
    options its config sets."""
    model = agent.config.model
    params: dict[str, Any] = {"model": model.name}
    for name in ("temperature", "max_tokens", "top_p"):
        value = getattr(model, name, None)
        if value is not None:
            params[name] = value
    return params


def scripted_tools(agent: LoadedAgent) -> list[dict[str, Any]]:
    """The tools a scripted model is offered, as OpenAI function tools (an MCP server, whose
    tools are listed only when it is connected, by its name)."""
    offered: list[dict[str, Any]] = []
    for tool in agent.config.tools:
        if tool.type == "function":
            fn = tool.callable
            function = {
                "name": tool.name,
                "description": function_description(fn, tool.description),
                "parameters": function_tool_schema(fn),
            }
            offered.append({"type": "function", "function": function})
        else:
            offered.append({"type": "mcp", "server": tool.name})
    return offered


def _call_id(position: int, slot: int) -> str:
    return f"call_{position}_{slot}"


def _assistant_calls(calls: list[dict[str, Any]], position: int) -> dict[str, Any]:
    """The assistant message asking for the step's tool calls (ids from its place)."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": _call_id(position, slot),
                "type": "function",
                "function": {
                    "name": str(call.get("name", "")),
                    "arguments": json.dumps(call.get("args") or {}, sort_keys=True),
                },
            }
            for slot, call in enumerate(calls)
        ],
    }


def _tool_message(record: ToolInvocation, call_id: str) -> dict[str, Any]:
    content = record.error if record.error is not None else record.result
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "content": content if isinstance(content, str) else json.dumps(content, default=str),
    }
