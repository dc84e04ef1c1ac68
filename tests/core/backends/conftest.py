"""Fixtures shared by the backend tests: MCP servers over streamable HTTP on local ports."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ARCHIVE = Path(__file__).with_name("mcp_archive_server.py")


@contextlib.contextmanager
def mcp_over_http(script: Path) -> Iterator[str]:
    """Run an MCP server script (``script PORT`` serves streamable HTTP) on a free port of
    127.0.0.1 until it accepts connections; yield its ``/mcp`` URL; stop it afterwards."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, str(script), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def http_ledger(tmp_path: Path) -> Iterator[str]:
    """The ledger MCP server of tests.core.backends.agent_files (a ``subtract`` tool)."""
    from tests.core.backends.agent_files import MCP_SERVER_PY

    script = tmp_path / "ledger_http.py"
    script.write_text(MCP_SERVER_PY)
    with mcp_over_http(script) as url:
        yield url


@pytest.fixture
def http_archive() -> Iterator[str]:
    """The filing archive MCP server (tests/core/backends/mcp_archive_server.py)."""
    with mcp_over_http(ARCHIVE) as url:
        yield url
