"""Real agent directories (agent.yaml + tools) for the backend tests, read by the spec loader."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from runs.core.agentconfig.loader import LoadedAgent, load_agent
from runs.core.backends.claude_agent_sdk import bundled_cli_path

# For a test of the real Claude Code CLI, which the claude-agent-sdk wheel bundles.
needs_claude_cli = pytest.mark.skipif(
    bundled_cli_path() is None,
    reason="claude-agent-sdk was installed without its bundled Claude Code CLI (_bundled/claude)",
)

INSTRUCTIONS = "You are a careful calculator. Use the tools for arithmetic."

TOOLS_PY = '''
from __future__ import annotations


def subtract(a: float, b: float) -> float:
    """Subtract b from a.

    Args:
        a: The number to subtract from.
        b: The number to subtract.
    """
    return a - b


def broken_subtract(a: float, b: float) -> float:
    """Subtract b from a (but this one is broken)."""
    raise ValueError(f"cannot subtract {b} from {a} today")
'''

MCP_SERVER_PY = '''
from mcp.server.fastmcp import FastMCP

server = FastMCP("ledger")


@server.tool(structured_output=False)
def subtract(a: float, b: float) -> str:
    """Subtract b from a."""
    return f"{a - b:g}"


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 1:  # PORT: streamable HTTP on 127.0.0.1:PORT/mcp
        server.settings.host = "127.0.0.1"
        server.settings.port = int(sys.argv[1])
        server.run(transport="streamable-http")
    else:
        server.run()
'''


def write_agent(
    root: Path,
    *,
    provider: str,
    model: str,
    endpoint: str,
    function: str = "subtract",
    mcp: bool = False,
    mcp_url: str | None = None,
    extra: str = "",
) -> LoadedAgent:
    """Write agent.yaml (one function tool named ``subtract``) and load it with the real loader."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(TOOLS_PY)
    tools = f"""
      - type: function
        name: subtract
        description: Subtract b from a
        file: tools.py
        function: {function}
    """
    if mcp:
        (root / "mcp_server.py").write_text(MCP_SERVER_PY)
        tools = f"""
      - type: mcp
        name: ledger
        description: A ledger MCP server
        transport: stdio
        command: {sys.executable}
        args: [mcp_server.py]
    """
    if mcp_url:
        tools = f"""
      - type: mcp
        name: ledger
        transport: http
        url: {mcp_url}
    """
    yaml = f"""
    name: calculator
    model:
      provider: {provider}
      name: {model}
      temperature: 0
      endpoint: {endpoint}
      api_key: test-key-not-secret
    instructions:
      inline: "{INSTRUCTIONS}"
    tools:{tools}
    execution:
      llm_timeout: 30
    test_cases:
      - name: subtract
        input: please subtract 181001 from 206588
    """
    (root / "agent.yaml").write_text(textwrap.dedent(yaml) + textwrap.dedent(extra))
    return load_agent(root / "agent.yaml", environ={})


def run_bounded[T](coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    """Run one test's async body with a hard time limit (a hung CLI must fail, not stall CI)."""
    return asyncio.run(asyncio.wait_for(coro, timeout))
