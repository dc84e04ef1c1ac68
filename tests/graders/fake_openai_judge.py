"""A fake OpenAI-compatible ``POST /v1/chat/completions`` on 127.0.0.1, over real HTTP.

deepeval's ``OpenAIModel`` sends two kinds of request for a judge:

- structured output (``client.beta.chat.completions.parse``) with
  ``response_format = {"type": "json_schema", "json_schema": {"name": "<Schema>", ...}}``;
- G-Eval's score request with ``logprobs: true, top_logprobs: 20`` and no response format,
  whose token log-probabilities weight the final score.

The server routes each request by the schema name (``"Steps"``, ``"Verdicts"``...) or
``"logprobs"``, answers with ``Reply.content`` (and log-probs when given) plus a fixed ``usage``
(or none, with ``report_usage=False``), and records every request body so tests can assert what
the judge really sent. ``metric_routes(metric)`` answers every prompt of one metric (G-Eval and
the five RAG metrics) with JSON in the shape deepeval's schemas expect. A ``Reply.delay_s`` sleep
ends early when the server shuts down, so a "hung" judge never outlives its test.
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


def relevant_unless(word: str, statement: str) -> Callable[[dict[str, Any]], Reply]:
    """Contextual relevancy asks once per retrieval node: a node mentioning ``word`` is noise."""

    def verdicts(body: dict[str, Any]) -> Reply:
        relevant = word not in json.dumps(body["messages"])
        verdict: dict[str, Any] = {"statement": statement, "verdict": "yes" if relevant else "no"}
        if not relevant:
            verdict["reason"] = f"The node is about {word}, not the question."
        return json_reply({"verdicts": [verdict]})

    return verdicts


def metric_routes(metric: str) -> dict[str, Route]:
    """Valid answers to every request deepeval's metric makes, keyed by ``route_of``.

    The reason of each metric is ``"<metric> reason"``. With the tests' case (two retrieval
    nodes, the second about potassium) the scores are: geval 0.84 (log-prob weighted 8/9),
    faithfulness 1/2, answer_relevancy 2/3, contextual_relevancy 1/2, contextual_precision 1,
    contextual_recall 1/2.
    """
    reason = json_reply({"reason": f"{metric} reason"})
    yes_no = {
        "verdicts": [{"verdict": "yes", "reason": "in node 1"}, {"verdict": "no", "reason": "-"}]
    }
    routes: dict[str, dict[str, Route]] = {
        "geval": {
            "Steps": json_reply({"steps": ["Check the capital.", "Check the population."]}),
            "logprobs": scored_reply("geval reason", 8, {8: 0.6, 9: 0.4}),
        },
        "faithfulness": {
            "Truths": json_reply({"truths": ["Paris is the capital of France."]}),
            "Claims": json_reply({"claims": ["Paris is the capital.", "Two million live there."]}),
            "Verdicts": json_reply(
                {"verdicts": [{"verdict": "yes"}, {"verdict": "no", "reason": "No figure."}]}
            ),
            "FaithfulnessScoreReason": reason,
        },
        "answer_relevancy": {
            "Statements": json_reply({"statements": ["Paris is the capital.", "2M", "Hi!"]}),
            "Verdicts": json_reply(
                {
                    "verdicts": [
                        {"verdict": "yes"},
                        {"verdict": "yes"},
                        {"verdict": "no", "reason": "Small talk."},
                    ]
                }
            ),
            "AnswerRelevancyScoreReason": reason,
        },
        "contextual_relevancy": {
            "ContextualRelevancyVerdicts": relevant_unless("potassium", "Paris is the capital."),
            "ContextualRelevancyScoreReason": reason,
        },
        "contextual_precision": {
            # Verdicts per retrieval node, in rank order: the relevant node ranks first.
            "Verdicts": json_reply(yes_no),
            "ContextualPrecisionScoreReason": reason,
        },
        "contextual_recall": {
            # Verdicts per sentence of the expected output: one of two is attributable.
            "Verdicts": json_reply(yes_no),
            "ContextualRecallScoreReason": reason,
        },
    }
    return dict(routes[metric])


@dataclass
class FakeOpenAIJudge:
    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    port: int = 0
    # False: answer without ``usage`` (it is optional in the OpenAI API).
    report_usage: bool = True
    # Responses actually written back (a request still sleeping has none).
    replies: int = 0
    # Set on shutdown: cuts every pending ``delay_s`` short.
    released: threading.Event = field(default_factory=threading.Event)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def request_count(self) -> int:
        return len(self.requests)

    def routes_called(self) -> list[str]:
        return [route_of(body) for body in self.requests]

    def reply_for(self, body: dict[str, Any]) -> Reply:
        route = self.routes.get(route_of(body))
        if route is None:
            return Reply(f"no route for {route_of(body)}")
        if callable(route):
            route = route(body)
        return Reply(route) if isinstance(route, str) else route


def _completion(body: dict[str, Any], reply: Reply, *, usage: bool) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": reply.content, "refusal": None},
        "logprobs": None,
    }
    if reply.logprobs is not None:
        choice["logprobs"] = {"content": [_token(t, c) for t, c in reply.logprobs], "refusal": None}
    completion: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "unknown"),
        "choices": [choice],
    }
    if usage:
        completion["usage"] = {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": COMPLETION_TOKENS,
            "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
        }
    return completion


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
            if reply.delay_s and fake.released.wait(reply.delay_s):
                return  # shut down while "thinking": the client gave up long ago
            self._send(200, _completion(body, reply, usage=fake.report_usage))
            fake.replies += 1

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
        fake.released.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
