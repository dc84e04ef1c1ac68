"""Small fake LLM HTTP servers for the real-backend tests, run on 127.0.0.1 in a thread.

They speak just enough of the OpenAI chat-completions and Anthropic messages wire formats for
the real SDK code paths (semantic-kernel's OpenAI connector, the Claude Code CLI) to complete a
tool round trip: the first answer asks for a tool, the answer after a tool result is text. Every
request is recorded so a test can assert on what the client actually sent.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

SUBTRACT_ARGS = {"a": 206588, "b": 181001}


@dataclass
class Exchange:
    """One request the fake received and the usage it answered with."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    usage: dict[str, int] | None = None


@dataclass
class FakeServer:
    """A ThreadingHTTPServer on a free port; ``handle`` is supplied by the subclass."""

    exchanges: list[Exchange] = field(default_factory=list)
    # Answer the next ``len(failures)`` model requests with these (status, body) errors.
    failures: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    # Wait this many seconds before answering the next ``len(delays)`` model requests.
    delays: list[float] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                fake._dispatch(self, "GET")

            def do_POST(self) -> None:
                fake._dispatch(self, "POST")

            def do_HEAD(self) -> None:
                fake._dispatch(self, "HEAD")

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep pytest output clean

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def requests_to(self, path_fragment: str) -> list[Exchange]:
        with self._lock:
            return [e for e in self.exchanges if path_fragment in e.path]

    def model_requests(self, model: str) -> list[Exchange]:
        """The answered ``/v1/messages`` requests for ``model``: a conversation's (the Claude
        CLI may send side requests for other models)."""
        return [
            e
            for e in self.requests_to("/v1/messages")
            if isinstance(e.body, dict) and e.body.get("model") == model and e.usage is not None
        ]

    def _dispatch(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        exchange = Exchange(method, handler.path, dict(handler.headers.items()), body)
        with self._lock:
            self.exchanges.append(exchange)
            failure = self.failures.pop(0) if self.failures and method == "POST" else None
            delay = self.delays.pop(0) if self.delays and method == "POST" else 0.0
        time.sleep(delay)
        try:
            if failure is not None:
                send_json(handler, *failure)
            else:
                self.handle(handler, exchange)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on this request (a timed-out turn)

    def handle(self, handler: BaseHTTPRequestHandler, exchange: Exchange) -> None:
        raise NotImplementedError


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


# --------------------------------------------------------------------------- OpenAI


class FakeOpenAI(FakeServer):
    """``POST /v1/chat/completions``: a ``subtract`` tool call, then text after the tool result.

    The answer text quotes the tool result, so a test can see the real tool ran. Usage grows
    with the number of messages, so each request of a turn reports a different count.
    """

    def handle(self, handler: BaseHTTPRequestHandler, exchange: Exchange) -> None:
        path = exchange.path.split("?", 1)[0]
        if exchange.method != "POST" or not path.endswith("/chat/completions"):
            send_json(handler, 404, {"error": {"message": f"no route {exchange.path}"}})
            return
        body = exchange.body
        if body.get("stream"):
            send_json(handler, 400, {"error": {"message": "this fake does not stream"}})
            return
        messages = body["messages"]
        usage = {
            "prompt_tokens": 100 + 10 * len(messages),
            "completion_tokens": 5 + len(messages),
            "total_tokens": 105 + 11 * len(messages),
        }
        exchange.usage = usage
        message = self.reply(messages, body.get("tools") or [])
        send_json(
            handler,
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                    }
                ],
                "usage": usage,
            },
        )

    def reply(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """A user message asking to subtract "twice" gets a second tool round in the same turn
        (subtracting 587 from the first result) before the answer."""
        last = messages[-1]
        names = [t["function"]["name"] for t in tools]
        subtract = next((n for n in names if "subtract" in n), None)
        if last["role"] == "tool":
            user = next(m for m in reversed(messages) if m["role"] == "user")
            rounds = sum(1 for m in messages[messages.index(user) :] if m["role"] == "tool")
            if subtract and "twice" in str(user.get("content")) and rounds < 2:
                return _tool_call(subtract, {"a": float(last["content"]), "b": 587})
            return {"role": "assistant", "content": f"The difference is {last['content']}."}
        if subtract is None or "subtract" not in str(last.get("content")):
            return {"role": "assistant", "content": f"You said: {last.get('content')}"}
        return _tool_call(subtract, SUBTRACT_ARGS)


def _tool_call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


# --------------------------------------------------------------------------- Anthropic


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


# The CLI appends <system-reminder> notes to user turns and tool results; answers quote neither.
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


def _clean(text: str) -> str:
    return " ".join(_REMINDER.sub(" ", text).split())


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _latest_text(message: dict[str, Any]) -> str:
    """The newest text of a user message (the CLI merges an interrupted turn's input into it)."""
    texts = [_clean(b.get("text", "")) for b in _blocks(message) if b.get("type") == "text"]
    return next((t for t in reversed(texts) if t), "")


def _tool_result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return _clean(" ".join(str(c.get("text", "")) for c in content if isinstance(c, dict)))
    return _clean(str(content))


class FakeAnthropic(FakeServer):
    """``POST /v1/messages`` (streamed as SSE): ``tool_use`` first, text after a ``tool_result``.

    A user message that mentions "subtract" gets a ``tool_use`` of the offered tool whose name
    contains ``subtract``; once the last user message carries a ``tool_result`` the answer is
    text quoting it. Anything else (the CLI's side requests included) gets an echo.
    """

    def handle(self, handler: BaseHTTPRequestHandler, exchange: Exchange) -> None:
        path = exchange.path.split("?", 1)[0]
        if exchange.method == "POST" and path == "/v1/messages/count_tokens":
            send_json(handler, 200, {"input_tokens": 42})
            return
        if exchange.method != "POST" or path != "/v1/messages":
            send_json(handler, 404, {"type": "error", "error": {"type": "not_found_error"}})
            return
        body = exchange.body
        blocks = self.reply(body["messages"], body.get("tools") or [])
        usage = {
            "input_tokens": 1000 + 100 * len(body["messages"]),
            "output_tokens": 10 + len(body["messages"]),
            "cache_creation_input_tokens": 7,
            "cache_read_input_tokens": 3,
        }
        exchange.usage = usage
        if body.get("stream"):
            self.stream(handler, body["model"], blocks, usage)
        else:
            send_json(handler, 200, self.message(body["model"], blocks, usage))

    def reply(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        last = messages[-1]
        results = [b for b in _blocks(last) if b.get("type") == "tool_result"]
        if results:
            return [
                {"type": "text", "text": f"The difference is {_tool_result_text(results[-1])}."}
            ]
        subtract = next((t["name"] for t in tools if "subtract" in t.get("name", "")), None)
        text = _latest_text(last)
        if subtract is not None and "subtract" in text:
            return [
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:16]}",
                    "name": subtract,
                    "input": SUBTRACT_ARGS,
                }
            ]
        return [{"type": "text", "text": f"You said: {text[-200:]}"}]

    def message(
        self, model: str, blocks: list[dict[str, Any]], usage: dict[str, int]
    ) -> dict[str, Any]:
        tool_use = any(b["type"] == "tool_use" for b in blocks)
        return {
            "id": f"msg_{uuid.uuid4().hex[:16]}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": ("tool_use" if tool_use else "end_turn") if blocks else None,
            "stop_sequence": None,
            "usage": usage,
        }

    def stream(
        self,
        handler: BaseHTTPRequestHandler,
        model: str,
        blocks: list[dict[str, Any]],
        usage: dict[str, int],
    ) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("connection", "close")
        handler.end_headers()
        start = self.message(model, [], {**usage, "output_tokens": 1})
        events = [sse("message_start", {"type": "message_start", "message": start})]
        for index, block in enumerate(blocks):
            events.extend(self._block_events(index, block))
        stop_reason = self.message(model, blocks, usage)["stop_reason"]
        events.append(
            sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            )
        )
        events.append(sse("message_stop", {"type": "message_stop"}))
        for event in events:
            handler.wfile.write(event)
            handler.wfile.flush()
        handler.close_connection = True

    def _block_events(self, index: int, block: dict[str, Any]) -> list[bytes]:
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opening = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        return [
            sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            ),
            sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            ),
            sse("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
