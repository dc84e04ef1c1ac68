"""A case's requests kept as parts and deltas (runs.core.wire.requests): rebuilt exactly, each call
storing what it added, however the client re-marks earlier messages."""

from __future__ import annotations

import json
from typing import Any

from runs.core.wire.requests import PART_CAP, RequestBook, RequestLog


def marked(text: str) -> dict[str, Any]:
    """A user message with a cache marker, as Claude Code sends its latest one."""
    block = {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}
    return {"role": "user", "content": [block]}


def conversation(turns: int) -> list[dict[str, Any]]:
    """Requests of a conversation whose client moves a cache marker to the latest message."""
    requests, history = [], []
    for n in range(turns):
        history.append({"role": "user", "content": [{"type": "text", "text": f"question {n}"}]})
        sent = [*history[:-1], marked(f"question {n}")]
        requests.append(
            {"model": "m", "system": "be brief", "tools": [{"name": "t"}], "messages": sent}
        )
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {n}"}]})
    return requests


def test_every_request_is_rebuilt_exactly_from_the_events_that_kept_it() -> None:
    log = RequestLog()
    requests = conversation(12)
    events = [
        {"type": "model_call", "request": log.request(body, fmt="anthropic")} for body in requests
    ]

    book = RequestBook(events)

    assert [book.body(event["request"]) for event in events] == requests


def test_a_moving_cache_marker_costs_each_call_the_same_few_parts() -> None:
    log = RequestLog()
    refs = [log.request(body, fmt="anthropic") for body in conversation(30)]

    added = [len(ref.get("parts") or {}) for ref in refs]
    assert added[0] == 3  # the system prompt, the tools, the question
    # Then the last answer, the question re-sent without its marker, the new marked question.
    assert set(added[2:]) == {3}
    sizes = [len(json.dumps({k: v for k, v in ref.items() if k != "parts"})) for ref in refs]
    assert max(sizes[2:]) - min(sizes[2:]) <= 6  # a few digits more, never a growing list


def test_a_request_whose_earlier_request_was_not_kept_says_so() -> None:
    log = RequestLog()
    first, _, third = (log.request(body, fmt="openai") for body in conversation(3))

    body = RequestBook([{"request": third}]).body(third)

    assert body["messages"] == [{"missing": "an earlier request of the case was not kept"}]
    assert body["system"] == {"missing_part": first["system"]}


def test_a_part_over_the_cap_is_kept_cut_and_says_its_size() -> None:
    log = RequestLog()
    huge = {"role": "tool", "content": "x" * (PART_CAP + 10)}
    ref = log.request({"messages": [huge]}, fmt="openai")

    [part] = ref["parts"].values()
    assert part["truncated"] > PART_CAP and len(part["head"]) == PART_CAP


def test_a_log_reset_for_another_case_numbers_its_requests_from_nothing() -> None:
    log = RequestLog()
    [first, *_] = conversation(3)
    for body in conversation(3):
        log.request(body, fmt="anthropic")

    log.reset()
    again = log.request(first, fmt="anthropic")

    assert again["seq"] == 0 and "keep" not in again["messages"]
    assert RequestBook([{"request": again}]).body(again) == first
