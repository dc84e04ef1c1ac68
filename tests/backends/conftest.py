"""Fixtures shared by the backend tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def http_ledger(tmp_path: Path) -> Iterator[str]:
    """The ledger MCP server over streamable HTTP on a free local port."""
    import socket
    import subprocess
    import sys
    import time

    from tests.backends.agent_files import MCP_SERVER_PY

    script = tmp_path / "ledger_http.py"
    script.write_text(MCP_SERVER_PY)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, str(script), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=10)
