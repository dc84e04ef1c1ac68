"""A model call's full request, as the transcript shows it behind "show the full request":
every message in order, the tools offered with their schemas, the parameters, the response;
copyable as JSON. And what changed in the request between two runs' calls (the side by side)."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from runs.selectors.model_requests import ModelRequest, model_request_get
from runs.shared.transcript_events import shown
from runs.web.params import int_param

MAX_TURN = 10_000
MAX_CALL = 10_000


@dataclass(frozen=True)
class MessageView:
    position: int
    role: str
    text: str


@dataclass(frozen=True)
class ToolView:
    name: str
    description: str
    schema: str


@dataclass(frozen=True)
class RequestView:
    request: ModelRequest
    system: str | None  # a top-level system prompt (Anthropic's); OpenAI's is a message
    messages: list[MessageView]
    tools: list[ToolView]
    params: list[tuple[str, str]]
    response: str | None


@login_required
@require_GET
def model_call_request(request: HttpRequest, run_id: int, case_id: int) -> HttpResponse:
    """``?turn=N&call=K``: model call K (from 0) of the case's turn N, its request as sent."""
    turn = int_param(request, "turn", maximum=MAX_TURN)
    call = int_param(request, "call", maximum=MAX_CALL)
    if turn is None or call is None:
        raise BadRequest("?turn= and ?call= are the turn's index and the model call's, from 0")
    found = model_request_get(run_id=run_id, case_id=case_id, index=turn, call=call)
    return render(request, "runs/_model_request.html", {"req": request_view(found)})


def request_view(found: ModelRequest) -> RequestView:
    body = found.body
    system = body.get("system")
    response = found.response
    return RequestView(
        request=found,
        system=system_text(system) if system is not None else None,
        messages=[_message(n, m) for n, m in enumerate(body.get("messages") or [])],
        tools=[_tool(t) for t in body.get("tools") or [] if isinstance(t, dict)],
        params=[(k, shown(v)) for k, v in body.items() if k not in ("messages", "system", "tools")],
        response=None if response is None else shown(response),
    )


def _message(position: int, message: Any) -> MessageView:
    if not isinstance(message, dict):
        return MessageView(position, "?", shown(message))
    content = message.get("content")
    rest = {k: v for k, v in message.items() if k != "role"}
    text = content if isinstance(content, str) and len(rest) == 1 else shown(rest)
    return MessageView(position, str(message.get("role") or "?"), text)


def _tool(tool: dict[str, Any]) -> ToolView:
    """An OpenAI function tool, an Anthropic tool, or a scripted model's MCP server."""
    function = tool.get("function") if isinstance(tool.get("function"), dict) else None
    spec = function or tool
    name = spec.get("name") or (f"MCP server {tool['server']}" if "server" in tool else "?")
    schema = spec.get("parameters", spec.get("input_schema"))
    return ToolView(str(name), str(spec.get("description") or ""), shown(schema or {}))


def system_text(system: Any) -> str:
    """A system prompt as text: a string, or the text of each block, a blank line between."""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        texts = [b.get("text", "") for b in system if isinstance(b, dict)]
        return "\n\n".join(t for t in texts if t)
    return shown(system)


# --- two runs' requests ------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestDiff:
    """What the right run's first model call of a turn was sent differently from the left's."""

    prompt_lines: list[tuple[str, str]]  # ("+"/"-"/" ", line) of the system prompts' diff
    prompt_added: int
    prompt_removed: int
    tools_added: list[str]
    tools_removed: list[str]
    tools_changed: list[str]
    params: list[tuple[str, str, str]]  # (name, left, right)
    messages: tuple[int, int]

    @property
    def same(self) -> bool:
        return not (
            self.prompt_added
            or self.prompt_removed
            or self.tools_added
            or self.tools_removed
            or self.tools_changed
            or self.params
        )


def prompt_of(body: dict[str, Any]) -> str:
    """The system prompt a request sent (Anthropic's ``system``, OpenAI's first message)."""
    if body.get("system") is not None:
        return system_text(body["system"])
    messages = body.get("messages") or []
    first = messages[0] if messages and isinstance(messages[0], dict) else {}
    if first.get("role") in ("system", "developer"):
        content = first.get("content")
        return content if isinstance(content, str) else system_text(content)
    return ""


def _tools_by_name(body: dict[str, Any]) -> dict[str, str]:
    out = {}
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            out[_tool(tool).name] = json.dumps(tool, sort_keys=True)
    return out


def request_diff(left: dict[str, Any], right: dict[str, Any]) -> RequestDiff:
    a_lines, b_lines = prompt_of(left).splitlines(), prompt_of(right).splitlines()
    lines = [
        (line[0], line[2:])
        for line in difflib.ndiff(a_lines, b_lines)
        if line[:1] in ("+", "-", " ")
    ]
    a_tools, b_tools = _tools_by_name(left), _tools_by_name(right)
    keys = sorted((set(left) | set(right)) - {"messages", "system", "tools"})
    params = [
        (key, shown(left.get(key)), shown(right.get(key)))
        for key in keys
        if left.get(key) != right.get(key)
    ]
    return RequestDiff(
        prompt_lines=lines if any(op != " " for op, _ in lines) else [],
        prompt_added=sum(op == "+" for op, _ in lines),
        prompt_removed=sum(op == "-" for op, _ in lines),
        tools_added=sorted(set(b_tools) - set(a_tools)),
        tools_removed=sorted(set(a_tools) - set(b_tools)),
        tools_changed=sorted(n for n in set(a_tools) & set(b_tools) if a_tools[n] != b_tools[n]),
        params=params,
        messages=(len(left.get("messages") or []), len(right.get("messages") or [])),
    )
