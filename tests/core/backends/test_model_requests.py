"""Each model call keeps the request as sent, through the real SDK code paths against the fake
servers: put back together from the case's transcripts, every call's request equals the body
the fake server received (all earlier messages, the tools offered, the parameters)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runs.core.backends.base import backend_for
from runs.core.wire.requests import RequestBook
from tests.core.backends.agent_files import needs_claude_cli, run_bounded, write_agent
from tests.core.backends.fake_llm_servers import FakeAnthropic, FakeOpenAI

TURNS = [f"please subtract 181001 from 206588 (turn {n})" for n in range(1, 5)]
CLAUDE_MODEL = "claude-sonnet-4-5"


async def four_turns(agent: Any) -> list[list[dict[str, Any]]]:
    """Each turn's transcript events of one case of four turns."""
    session = await backend_for(agent).create_session(case_name="case", case_index=0)
    try:
        outputs = [await session.send(message) for message in TURNS]
    finally:
        await session.close()
    for output in outputs:
        assert not output.is_error, output.error
        assert len(output.tool_calls) == 1
    return [output.transcript or [] for output in outputs]


def stored_requests(turns: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every model call's request, rebuilt from the case's transcripts as the dashboard does:
    a call's parts from the turns up to its own."""
    rebuilt = []
    for index, events in enumerate(turns):
        book = RequestBook(event for turn in turns[: index + 1] for event in turn)
        for event in events:
            if event["type"] == "model_call":
                rebuilt.append(book.body(event["request"]))
    return rebuilt


def test_every_semantic_kernel_model_call_keeps_the_request_the_server_received(
    tmp_path: Path,
) -> None:
    fake = FakeOpenAI().start()
    try:
        agent = write_agent(
            tmp_path / "agent",
            provider="openai",
            model="gpt-4o-mini",
            endpoint=f"{fake.url}/v1",
        )
        turns = run_bounded(four_turns(agent))
        received = [exchange.body for exchange in fake.requests_to("/chat/completions")]
    finally:
        fake.stop()

    stored = stored_requests(turns)
    assert len(stored) == len(received) == 8  # a tool call, then the answer, per turn
    assert stored == received
    fourth = stored[-1]
    # The system prompt, 4 messages of each earlier turn, then this turn's question, tool call
    # and tool result.
    assert len(fourth["messages"]) == 1 + 3 * 4 + 3
    assert [t["function"]["name"] for t in fourth["tools"]] == ["tools-subtract"]
    assert fourth["temperature"] == 0  # the agent.yaml's


@needs_claude_cli
def test_every_claude_model_call_keeps_the_request_the_cli_sent(tmp_path: Path) -> None:
    fake = FakeAnthropic().start()
    try:
        agent = write_agent(
            tmp_path / "agent", provider="anthropic", model=CLAUDE_MODEL, endpoint=fake.url
        )
        turns = run_bounded(four_turns(agent))
        received = [exchange.body for exchange in fake.model_requests(CLAUDE_MODEL)]
    finally:
        fake.stop()

    stored = stored_requests(turns)
    assert len(stored) == len(received) == 8
    assert stored == received
    fourth = stored[-1]
    assert "mcp__tools__subtract" in [tool["name"] for tool in fourth["tools"]]
    assert fourth["system"] and fourth["model"] == CLAUDE_MODEL
    calls = [e for turn in turns for e in turn if e["type"] == "model_call"]
    assert all(call["response"]["content"] for call in calls)  # the streamed message, assembled
    assert calls[-1]["response"]["content"][0]["text"] == "The difference is 25587."


def test_a_later_call_stores_only_the_parts_no_earlier_call_sent(tmp_path: Path) -> None:
    fake = FakeOpenAI().start()
    try:
        agent = write_agent(
            tmp_path / "agent", provider="openai", model="gpt-4o-mini", endpoint=f"{fake.url}/v1"
        )
        turns = run_bounded(four_turns(agent))
    finally:
        fake.stop()

    calls = [e for turn in turns for e in turn if e["type"] == "model_call"]
    new_parts = [len(call["request"].get("parts") or {}) for call in calls]
    # The first call sends the system prompt, the user message and the tools; every later call
    # adds what the conversation grew by: the tool call and its result, then the answer and the
    # next user message.
    assert new_parts == [3, 2, 2, 2, 2, 2, 2, 2]
    # Each call names the one before and adds one run of new parts.
    assert all(len(call["request"]["messages"]["add"]) == 1 for call in calls)
    assert [call["request"]["messages"].get("keep") for call in calls] == [
        None,
        2,
        4,
        6,
        8,
        10,
        12,
        14,
    ]


def test_a_cases_stored_requests_grow_linearly_with_its_turns(tmp_path: Path) -> None:
    fake = FakeOpenAI().start()
    try:
        agent = write_agent(
            tmp_path / "agent", provider="openai", model="gpt-4o-mini", endpoint=f"{fake.url}/v1"
        )

        async def converse() -> list[Any]:
            session = await backend_for(agent).create_session(case_name="c", case_index=0)
            try:
                return [await session.send(TURNS[0]) for _ in range(20)]
            finally:
                await session.close()

        outputs = run_bounded(converse())
    finally:
        fake.stop()

    sizes = [len(json.dumps(o.transcript)) for o in outputs]
    # Every turn after the first stores about as much as the second, the 20th as the 3rd:
    # nothing grows with the conversation's length, while what was sent did.
    assert max(sizes[2:]) <= sizes[1] * 1.1
    received = [len(json.dumps(e.body)) for e in fake.requests_to("/chat/completions")]
    assert received[-1] > 4 * received[3]
