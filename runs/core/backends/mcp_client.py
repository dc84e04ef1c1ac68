"""A long-lived MCP client connection owned by one background task.

The MCP client context managers (stdio and streamable HTTP) are anyio task groups: they must be
entered and exited by the same task. The engine sends each turn from its own task (it wraps
``send`` in ``asyncio.wait_for``), so the connection lives in a dedicated task and the turns
call tools through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from mcp import ClientSession

    from runs.core.agentconfig.tool_config import McpTool


class McpConnection:
    def __init__(
        self, tool: McpTool, *, startup_timeout: float = 30.0, cwd: Path | None = None
    ) -> None:
        self.tool = tool
        self.cwd = cwd  # where a stdio server starts (the agent directory; None: here)
        self.startup_timeout = startup_timeout
        self._session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._serve())
        ready = asyncio.create_task(self._ready.wait())
        done, _ = await asyncio.wait(
            {ready, self._task}, timeout=self.startup_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if ready not in done:
            ready.cancel()
            await self.close()
            reason = self._error or TimeoutError(f"no answer in {self.startup_timeout:g}s")
            raise ConnectionError(f"MCP server {self.tool.name!r} did not start: {reason}")

    async def _serve(self) -> None:
        # lazy: the mcp SDK costs ~0.6 s at import; only agents with MCP tools need it
        from mcp.client import session, stdio, streamable_http

        try:
            async with (
                self._transport(stdio, streamable_http) as streams,
                session.ClientSession(streams[0], streams[1]) as client,
            ):
                await client.initialize()
                self._session = client
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:  # reported by start() or by the next call
            self._error = exc
        finally:
            self._session = None

    def _transport(self, stdio: ModuleType, streamable_http: ModuleType) -> Any:
        """The transport's context manager (``mcp.client.stdio`` or ``.streamable_http``)."""
        tool = self.tool
        if tool.transport == "stdio":
            params = stdio.StdioServerParameters(
                command=tool.command or "",
                args=list(tool.args),
                env={**os.environ, **tool.env},
                cwd=self.cwd,
            )
            return stdio.stdio_client(params)
        return streamable_http.streamablehttp_client(tool.url or "", headers=dict(tool.headers))

    async def list_tools(self) -> list[Any]:
        session = self._require()
        return list((await session.list_tools()).tools)

    async def call(self, name: str, args: dict[str, Any]) -> tuple[Any, str | None]:
        """Call a tool: ``(result, None)`` or ``(None, error)`` (tool errors are not raised)."""
        session = self._require()
        result = await session.call_tool(name, args)
        texts = [getattr(block, "text", "") for block in result.content]
        # Text is what a model sees; structured content only when a tool returns no text.
        payload: Any = "\n".join(texts) if any(texts) else result.structuredContent
        if result.isError:
            return None, "\n".join(texts) or "MCP tool error"
        return payload, None

    def _require(self) -> ClientSession:
        if self._session is None:
            raise ConnectionError(f"MCP server {self.tool.name!r} is not connected: {self._error}")
        return self._session

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._task, timeout=10)
