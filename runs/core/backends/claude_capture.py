"""What the Claude Code CLI sends its model, exactly: a loopback proxy between the CLI and the
Anthropic API that keeps each ``/v1/messages`` request body and response.

The CLI builds its requests itself (its own system prompt parts, tool list, cache markers and
parameters) and the SDK shows none of them, so the only place a request can be read as sent is
on the wire. One proxy serves the process: a ``ThreadingHTTPServer`` on 127.0.0.1 in daemon
threads, so it does not depend on the event loop a session happens to run on (a worker keeps
sessions past a case's loop). Each session gets a channel; its CLI's ``ANTHROPIC_BASE_URL`` is
``http://127.0.0.1:<port>/c/<channel>``, and the proxy forwards ``/c/<channel>/<path>`` to the
channel's upstream (the model's endpoint, ``ANTHROPIC_BASE_URL`` of the environment, or the API)
as it came, streaming the answer back as it arrives. A ``/v1/messages`` exchange is kept on the
channel: the request's JSON and the response (a streamed one assembled into the message it
streams), with the message id the session matches it to its model call by.

``HOLODECK_CAPTURE_REQUESTS=0`` turns it off: the CLI then talks to its endpoint directly and
the model calls of a Claude turn keep no request.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

CAPTURE_ENV = "HOLODECK_CAPTURE_REQUESTS"
# Set in a proxied CLI's environment: the endpoint its requests are forwarded to.
UPSTREAM_ENV = "HOLODECK_ANTHROPIC_UPSTREAM"
DEFAULT_UPSTREAM = "https://api.anthropic.com"
# Headers that belong to one hop, never forwarded (and the body's size, which httpx sets).
_HOP = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "upgrade",
        "content-length",
        "accept-encoding",
        "content-encoding",
    }
)
_KEPT_PER_CHANNEL = 200
READ_TIMEOUT_S = 600.0


def capture_enabled(environ: dict[str, str] | None = None) -> bool:
    value = (environ if environ is not None else os.environ).get(CAPTURE_ENV, "1").strip()
    return value.lower() not in ("0", "false", "no", "off")


@dataclass
class Exchange:
    """One model request as the CLI sent it, and the message it got back."""

    request: dict[str, Any]
    response: dict[str, Any] | None = None
    message_id: str | None = None
    status: int | None = None


@dataclass
class Channel:
    upstream: str
    exchanges: list[Exchange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, exchange: Exchange) -> None:
        with self.lock:
            self.exchanges.append(exchange)
            del self.exchanges[:-_KEPT_PER_CHANNEL]

    def take(self, message_id: str | None) -> Exchange | None:
        """The exchange whose response is message ``message_id`` (removed from the channel)."""
        if message_id is None:
            return None
        with self.lock:
            for position, exchange in enumerate(self.exchanges):
                if exchange.message_id == message_id:
                    return self.exchanges.pop(position)
        return None

    def clear(self) -> None:
        with self.lock:
            self.exchanges.clear()


class CaptureProxy:
    """The process's proxy (:func:`capture_proxy`); channels by id."""

    def __init__(self) -> None:
        self.channels: dict[str, Channel] = {}
        # A stream may pause between events for long, but not forever: a thread whose upstream
        # went silent for READ_TIMEOUT_S ends (the CLI has its own, shorter, API_TIMEOUT_MS).
        self._client = httpx.Client(
            timeout=httpx.Timeout(READ_TIMEOUT_S, connect=10.0), trust_env=True
        )
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, name="claude-capture", daemon=True
        ).start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def open(self, upstream: str | None) -> tuple[str, Channel]:
        """A new channel to ``upstream``: (the base URL to give the CLI, the channel)."""
        name = secrets.token_hex(8)
        channel = Channel((upstream or DEFAULT_UPSTREAM).rstrip("/"))
        self.channels[name] = channel
        return f"http://127.0.0.1:{self.port}/c/{name}", channel

    def close(self, base_url: str) -> None:
        self.channels.pop(base_url.rsplit("/", 1)[-1], None)

    def forward(self, handler: BaseHTTPRequestHandler) -> None:
        _, _, rest = handler.path.partition("/c/")
        name, _, path = rest.partition("/")
        channel = self.channels.get(name)
        if channel is None:
            _refuse(handler, 404, f"no capture channel {name!r}")
            return
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length) if length else b""
        exchange = _exchange_of(handler.command, path, body)
        if exchange is not None:
            channel.add(exchange)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
        url = f"{channel.upstream}/{path}"
        try:
            with self._client.stream(handler.command, url, headers=headers, content=body) as up:
                _relay(handler, up, exchange)
        except httpx.HTTPError as exc:
            _refuse(handler, 502, f"the capture proxy could not reach {channel.upstream}: {exc}")
        except (BrokenPipeError, ConnectionResetError):
            return  # the CLI stopped listening (its own timeout, an interrupted turn)


def _exchange_of(method: str, path: str, body: bytes) -> Exchange | None:
    """An exchange to keep: a POST to ``v1/messages`` (not its ``count_tokens``) with JSON."""
    if method != "POST" or path.split("?", 1)[0].rstrip("/") != "v1/messages":
        return None
    try:
        request = json.loads(body or b"{}")
    except ValueError:
        return None
    return Exchange(request) if isinstance(request, dict) else None


def _relay(
    handler: BaseHTTPRequestHandler, upstream: httpx.Response, exchange: Exchange | None
) -> None:
    """Send the upstream's answer back as it arrives, reading the message it carries."""
    handler.send_response(upstream.status_code)
    for key, value in upstream.headers.items():
        if key.lower() not in _HOP:
            handler.send_header(key, value)
    handler.send_header("Connection", "close")
    handler.end_headers()
    streamed = "text/event-stream" in upstream.headers.get("content-type", "")
    reader = StreamedMessage() if streamed else None
    if exchange is not None and reader is not None:
        exchange.response = reader.message  # filled in place as the stream arrives
    kept = bytearray()
    for chunk in upstream.iter_bytes():
        if exchange is not None:
            if reader is not None:
                reader.feed(chunk)
                exchange.response = reader.message
                exchange.message_id = exchange.message_id or reader.message_id
            else:
                kept.extend(chunk)
        handler.wfile.write(chunk)
        handler.wfile.flush()
    if exchange is not None:
        exchange.status = upstream.status_code
        exchange.response = reader.message if reader is not None else _json_or_text(bytes(kept))
        exchange.message_id = exchange.message_id or (exchange.response or {}).get("id")


def _json_or_text(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except ValueError:
        return {"text": body.decode(errors="replace")}
    return value if isinstance(value, dict) else {"value": value}


def _refuse(handler: BaseHTTPRequestHandler, status: int, message: str) -> None:
    payload = json.dumps({"type": "error", "error": {"type": "proxy_error", "message": message}})
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.wfile.write(payload.encode())


class StreamedMessage:
    """A Messages API SSE stream, assembled into the message it streams (as the API would have
    answered without streaming): ``message_start``'s message, each content block with its
    deltas applied, ``message_delta``'s stop reason and usage."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        self.message_id: str | None = None
        self._buffer = b""
        self._partial_json: dict[int, str] = {}

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        while b"\n\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n\n", 1)
            for data in _data_lines(raw):
                self._event(data)

    def _event(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if kind == "message_start":
            self.message = dict(data.get("message") or {})
            self.message.setdefault("content", [])
            self.message_id = self.message.get("id")
        elif kind == "content_block_start":
            self._blocks().append(dict(data.get("content_block") or {}))
        elif kind == "content_block_delta":
            self._delta(int(data.get("index") or 0), data.get("delta") or {})
        elif kind == "content_block_stop":
            self._finish_block(int(data.get("index") or 0))
        elif kind == "message_delta":
            self.message.update(data.get("delta") or {})
            usage = {**(self.message.get("usage") or {}), **(data.get("usage") or {})}
            self.message["usage"] = usage
        elif kind == "error":
            self.message["error"] = data.get("error")

    def _blocks(self) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = self.message.setdefault("content", [])
        return blocks

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        blocks = self._blocks()
        if index >= len(blocks):
            return
        block = blocks[index]
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + str(delta.get("text", ""))
        elif kind == "input_json_delta":
            self._partial_json[index] = self._partial_json.get(index, "") + str(
                delta.get("partial_json", "")
            )
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = str(delta.get("signature", ""))

    def _finish_block(self, index: int) -> None:
        text = self._partial_json.pop(index, None)
        blocks = self._blocks()
        if text is None or index >= len(blocks):
            return
        try:
            blocks[index]["input"] = json.loads(text) if text.strip() else {}
        except ValueError:
            blocks[index]["input"] = text


def _data_lines(raw: bytes) -> Iterator[dict[str, Any]]:
    for line in raw.decode(errors="replace").splitlines():
        if not line.startswith("data:"):
            continue
        try:
            data = json.loads(line[5:].strip())
        except ValueError:
            continue
        if isinstance(data, dict):
            yield data


def _handler(proxy: CaptureProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one exchange per connection: the answer ends at close

        def do_POST(self) -> None:
            proxy.forward(self)

        def do_GET(self) -> None:
            proxy.forward(self)

        def do_HEAD(self) -> None:
            proxy.forward(self)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


_PROXY: CaptureProxy | None = None
_LOCK = threading.Lock()


def capture_proxy() -> CaptureProxy:
    """The process's proxy, started on first use."""
    global _PROXY
    with _LOCK:
        if _PROXY is None:
            _PROXY = CaptureProxy()
        return _PROXY
