"""A fake OpenAI-compatible ``POST /v1/chat/completions`` on 127.0.0.1, over real HTTP.

deepeval's ``OpenAIModel`` sends two kinds of request for a judge:

- structured output (``client.beta.chat.completions.parse``) with
  ``response_format = {"type": "json_schema", "json_schema": {"name": "<Schema>", ...}}``;
- G-Eval's score request with ``logprobs: true, top_logprobs: 20`` and no response format,
  whose token log-probabilities weight the final score.

The server routes each request by the schema name (``"Steps"``, ``"Verdicts"``...) or
``"logprobs"``, answers with ``Reply.content`` (and log-probs when given) plus a fixed ``usage``,
and records every request body so tests can assert what the judge really sent.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROMPT_TOKENS = 120
COMPLETION_TOKENS = 30


@dataclass
class Reply:
    content: str
    # (token, [(candidate token, linear probability), ...]) in order; None = no logprobs.
    logprobs: list[tuple[str, list[tuple[str, float]]]] | None = None
    delay_s: float = 0.0


Route = Reply | str | Callable[[dict[str, Any]], "Reply | str"]


def route_of(body: dict[str, Any]) -> str:
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return str(response_format["json_schema"]["name"])
    if body.get("logprobs"):
        return "logprobs"
    return "text"


def json_reply(payload: dict[str, Any]) -> Reply:
    return Reply(json.dumps(payload))


def scored_reply(reason: str, score: int, weights: dict[int, float]) -> Reply:
    """A G-Eval score answer whose score token carries the given candidate probabilities."""
    prefix = json.dumps({"reason": reason})[:-1] + ', "score": '
    candidates = [(str(value), probability) for value, probability in weights.items()]
    tokens = [(prefix, [(prefix, 1.0)]), (str(score), candidates), ("}", [("}", 1.0)])]
    return Reply(prefix + str(score) + "}", logprobs=tokens)


@dataclass
class FakeOpenAIJudge:
    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def routes_called(self) -> list[str]:
        return [route_of(body) for body in self.requests]

    def reply_for(self, body: dict[str, Any]) -> Reply:
        route = self.routes.get(route_of(body))
        if route is None:
            return Reply(f"no route for {route_of(body)}")
        if callable(route):
            route = route(body)
        return Reply(route) if isinstance(route, str) else route


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": reply.content, "refusal": None},
        "logprobs": None,
    }
    if reply.logprobs is not None:
        choice["logprobs"] = {"content": [_token(t, c) for t, c in reply.logprobs], "refusal": None}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "unknown"),
        "choices": [choice],
        "usage": {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": COMPLETION_TOKENS,
            "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
        },
    }


def _token(token: str, candidates: list[tuple[str, float]]) -> dict[str, Any]:
    top = [{"token": t, "logprob": math.log(p), "bytes": None} for t, p in candidates]
    return {"token": token, "logprob": top[0]["logprob"], "bytes": None, "top_logprobs": top}


def _handler(fake: FakeOpenAIJudge) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no such path {self.path}"}})
                return
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            fake.requests.append(body)
            fake.headers.append({k.lower(): v for k, v in self.headers.items()})
            reply = fake.reply_for(body)
            if reply.delay_s:
                time.sleep(reply.delay_s)
            self._send(200, _completion(body, reply))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timed-out judge call)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


@contextmanager
def running_fake_openai_judge() -> Iterator[FakeOpenAIJudge]:
    fake = FakeOpenAIJudge()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    fake.port = server.server_address[1]
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
