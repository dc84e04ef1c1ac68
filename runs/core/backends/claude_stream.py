"""A Claude turn's transcript read off the SDK's message stream (partial messages on).

Each API call's ``message_start``/``message_delta`` events are a ``model_call`` with its usage
and stop reason, timed from the CLI's ``requesting`` status; its text blocks are ``assistant``
events; each ``tool_use`` is a ``tool_call`` completed by its ``tool_result`` (a function tool's
with the value its callable returned); a CLI ``api_retry`` system message is a ``retry``.
"""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from runs.core.backends.claude_capture import Channel, Exchange
from runs.core.wire.models import ToolInvocation
from runs.core.wire.requests import RESPONSE_CAP, RequestLog, capped_json
from runs.core.wire.transcripts import TurnTrace


class StreamTrace:
    """A turn's transcript read off the SDK's message stream (see the module's docstring).
    ``calls`` is the turn's list of recorded tool calls: a function tool's result is taken
    from there, as its callable returned it (the stream only carries the text the model read)."""

    def __init__(
        self,
        calls: list[ToolInvocation],
        replayed: set[int] | None = None,
        *,
        capture: Channel | None = None,
        requests: RequestLog | None = None,
    ) -> None:
        self.trace = TurnTrace()
        self._calls = calls
        self._replayed = replayed if replayed is not None else set()
        # The proxy's channel of this session (runs.core.backends.claude_capture): each call's
        # request as sent, found by its message id; its response is read when the turn ends.
        self._capture = capture
        self._requests = requests or RequestLog()
        self._captured: list[tuple[int | None, Exchange]] = []
        self._used: set[int] = set()
        self._step_start = 0.0  # when the model was last sent something: the query, results
        self._message_id: str | None = None
        self._call_event: int | None = None
        self._attempt = 1
        self._tools: dict[str, tuple[int | None, float]] = {}  # tool_use id -> event, start

    def stream(self, msg: StreamEvent) -> None:
        """An API call's own events: ``message_start`` opens its model_call (model, input and
        cached tokens), ``message_delta`` completes it (output tokens, stop reason, time)."""
        if msg.parent_tool_use_id is not None:
            return
        event = msg.event
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self._open_call(message.get("id"), message.get("model"), message.get("usage"))
        elif kind == "message_delta":
            usage = event.get("usage") or {}
            update: dict[str, Any] = {
                "duration_ms": round(self.trace.now_ms() - self._step_start, 3)
            }
            if "output_tokens" in usage:
                update["output_tokens"] = int(usage["output_tokens"] or 0)
            stop = (event.get("delta") or {}).get("stop_reason")
            if stop:
                update["stop_reason"] = stop
            self.trace.update(self._call_event, **update)

    def assistant(self, msg: AssistantMessage) -> None:
        """A content block of an API call: its text or tool use (the call itself comes from
        its stream events; without them, from this message)."""
        now = self.trace.now_ms()
        if msg.message_id is None or msg.message_id != self._message_id:
            self._open_call(msg.message_id, msg.model, msg.usage)
            self.trace.update(self._call_event, stop_reason=msg.stop_reason)
        for block in msg.content:
            if isinstance(block, TextBlock) and block.text:
                self.trace.add("assistant", text=block.text)
            elif isinstance(block, ToolUseBlock):
                event = self.trace.add(
                    "tool_call", id=block.id, name=block.name, args=block.input or {}, start_ms=now
                )
                self._tools[block.id] = (event, now)

    def _open_call(self, message_id: str | None, model: str | None, usage: Any) -> None:
        self._message_id = message_id
        exchange = self._capture.take(message_id) if self._capture is not None else None
        sent: dict[str, Any] = {}
        if exchange is not None:
            sent["request"] = self._requests.request(exchange.request, fmt="anthropic")
            sent["messages"] = len(exchange.request.get("messages") or [])
        self._call_event = self.trace.add(
            "model_call",
            model=model,
            start_ms=self._step_start,
            duration_ms=round(self.trace.now_ms() - self._step_start, 3),
            **call_usage(usage if isinstance(usage, dict) else None),
            stop_reason=None,
            attempt=self._attempt,
            **sent,
        )
        if exchange is not None:
            self._captured.append((self._call_event, exchange))
        self._attempt = 1

    def finished(self) -> list[dict[str, Any]]:
        """The turn's events, each captured call with the response it received."""
        for event, exchange in self._captured:
            if exchange.response is not None:
                self.trace.update(event, response=capped_json(exchange.response, RESPONSE_CAP))
        self._captured.clear()
        return self.trace.finished()

    def tool_results(self, msg: UserMessage) -> None:
        if isinstance(msg.content, str):
            return
        now = self.trace.now_ms()
        for block in msg.content:
            if not isinstance(block, ToolResultBlock) or block.tool_use_id not in self._tools:
                continue
            event, started = self._tools.pop(block.tool_use_id)
            text = tool_result_text(block.content)
            fields: dict[str, Any] = {
                "result": None if block.is_error else text,
                "error": text if block.is_error else None,
                "duration_ms": round(now - started, 3),
            }
            if event is not None and (slot := self._function_call(event)) is not None:
                call = self._calls[slot]
                fields = {
                    "result": call.result,
                    "error": call.error,
                    "duration_ms": call.duration_ms,
                }
                if slot in self._replayed:
                    fields["replayed"] = True
            self.trace.update(event, **fields)
        self._step_start = now

    def system(self, msg: SystemMessage) -> None:
        """``status: requesting`` starts an API call; an ``api_retry`` tells of a failed one."""
        data = msg.data
        if msg.subtype == "status" and data.get("status") == "requesting":
            self._step_start = self.trace.now_ms()
        elif "retry" in msg.subtype:
            error = data.get("error") or data.get("message") or msg.subtype
            self.trace.add("retry", error=str(error), start_ms=self.trace.now_ms())
            self._attempt += 1

    def _function_call(self, event: int) -> int | None:
        """The slot of this tool_use's recorded call (same name and args, first not yet
        taken)."""
        name, args = self.trace.events[event].get("name"), self.trace.events[event].get("args")
        for slot, call in enumerate(self._calls):
            if slot not in self._used and call.name == name and call.args == args:
                self._used.add(slot)
                return slot
        return None


def call_usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    """An Anthropic message's usage as a model_call's token fields ({} when it has none)."""
    if not usage:
        return {}
    return {
        "input_tokens": int(usage.get("input_tokens") or 0),
        "output_tokens": int(usage.get("output_tokens") or 0),
        "cached_tokens": int(usage.get("cache_read_input_tokens") or 0),
    }


def tool_result_text(content: str | list[dict[str, Any]] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(str(c.get("text", "")) for c in content if c.get("type") == "text")
