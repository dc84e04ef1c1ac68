"""A Claude replay's external MCP servers, served in process so the recording can answer them.

The Claude Code CLI calls an external MCP server itself: nothing of ours sits between a call and
its server. For a replay whose policy answers from the recording (``recorded-only``,
``recorded-then-live``), each external server is replaced, for that session, by an in-process
SDK MCP server of the same name offering the same tools (names, descriptions, input schemas, as
the real server lists them over an MCP client connection), so the model sees the same tools
under the same names (``mcp__<server>__<tool>``). A call is answered by the session's
:class:`CaseReplay`: the recorded result, the refusal, or (``recorded-then-live``) the real
server's answer through the same connection. ``live`` replays keep the servers as they are.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from claude_agent_sdk import SdkMcpTool, create_sdk_mcp_server

from runs.core.backends.mcp_client import McpConnection
from runs.core.backends.replay import CaseReplay, Refused, Replayed

if TYPE_CHECKING:
    from pathlib import Path

    from runs.core.agentconfig.tool_config import McpTool

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def _canonical(args: Any) -> str:
    return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


class ReplayedServers:
    """The external MCP servers of one Claude session that replays a case."""

    def __init__(self, tools: list[McpTool], replay: CaseReplay, base_dir: Path) -> None:
        self._tools = tools
        self._base_dir = base_dir
        self._replay = replay
        self._connections: list[McpConnection] = []
        self._answered: list[tuple[str, str]] = []  # (tool name, args) the recording answered

    @classmethod
    def of(
        cls, tools: list[McpTool], replay: CaseReplay | None, base_dir: Path
    ) -> ReplayedServers | None:
        """The servers to serve in process, when the replay answers calls from its recording
        and the agent has MCP tools; else None (the CLI calls the servers itself)."""
        if replay is None or replay.policy == "live" or not tools:
            return None
        return cls(tools, replay, base_dir)

    async def open(self) -> dict[str, Any]:
        """Connect to each real server, list its tools; the SDK servers to use instead."""
        servers: dict[str, Any] = {}
        for tool in self._tools:
            # A stdio server starts in the agent directory, as the CLI starts it.
            connection = McpConnection(tool, cwd=self._base_dir)
            self._connections.append(connection)
            await connection.start()
            listed = await connection.list_tools()
            servers[tool.name] = create_sdk_mcp_server(
                tool.name, tools=[self._sdk_tool(tool.name, each, connection) for each in listed]
            )
        return servers

    def answered(self, name: str, args: Any) -> bool:
        """Whether the recording answered this call (each answer counted once)."""
        key = (name, _canonical(args))
        if key in self._answered:
            self._answered.remove(key)
            return True
        return False

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self._connections), return_exceptions=True)
        self._connections.clear()

    def _sdk_tool(self, server: str, listed: Any, connection: McpConnection) -> SdkMcpTool[Any]:
        name = f"mcp__{server}__{listed.name}"

        async def handler(args: dict[str, Any]) -> dict[str, Any]:
            answer = self._replay.answer(name, args)
            if isinstance(answer, Replayed):
                self._answered.append((name, _canonical(args)))
                result, error = answer.result, answer.error
            elif isinstance(answer, Refused):
                result, error = None, answer.error
            else:
                result, error = await connection.call(listed.name, dict(args))
            if error is not None:
                return {"content": [{"type": "text", "text": error}], "is_error": True}
            return {"content": [{"type": "text", "text": _text(result)}]}

        return SdkMcpTool(
            name=listed.name,
            description=listed.description or "",
            input_schema=listed.inputSchema or {"type": "object"},
            handler=handler,
        )
