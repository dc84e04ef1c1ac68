"""A tiny stdio MCP server for tests: a filing archive (a retrieval tool) and a failing tool."""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP

server = FastMCP("archive")

FILINGS = {
    "Double_AAL/2014/page_18.pdf": "net cash from operating activities was 206588 in 2014",
}


@server.tool()
def convfinqa_archive(document: str) -> str:
    """Return the text of a filing page."""
    return FILINGS.get(document, f"no filing named {document}")


@server.tool()
def broken(x: int) -> int:
    """Always fails."""
    raise ValueError("archive offline")


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 1:  # `mcp_archive_server.py PORT`: streamable HTTP on 127.0.0.1:PORT/mcp
        server.settings.host = "127.0.0.1"
        server.settings.port = int(sys.argv[1])
        server.run(transport="streamable-http")
    else:
        server.run()
