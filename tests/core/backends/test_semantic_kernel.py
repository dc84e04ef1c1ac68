"""The semantic-kernel backend, driven through SK's real OpenAI connector against a local fake."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from runs.core.backends.base import BackendError, TurnOutput, backend_for
from runs.core.backends.semantic_kernel import SemanticKernelBackend, SemanticKernelSession
from runs.core.wire.models import TokenUsage
from runs.core.wire.requests import RequestBook
from tests.core.backends.agent_files import INSTRUCTIONS, run_bounded, write_agent
from tests.core.backends.fake_llm_servers import SUBTRACT_ARGS, FakeOpenAI

PROMPT = "please subtract 181001 from 206588"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


def agent_for(tmp_path: Path, fake: FakeOpenAI, **options: object):  # type: ignore[no-untyped-def]
    return write_agent(
        tmp_path / "agent",
        provider="openai",
        model="gpt-4o-mini",
        endpoint=f"{fake.url}/v1",
        **options,  # type: ignore[arg-type]
    )


async def converse(agent, messages: list[str]):  # type: ignore[no-untyped-def]
    session = await backend_for(agent).create_session(case_name="case", case_index=0)
    try:
        return [await session.send(message) for message in messages]
    finally:
        await session.close()


def test_a_tool_call_round_trip_runs_the_python_tool_and_records_the_call(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    agent = agent_for(tmp_path, fake)

    [output] = run_bounded(converse(agent, [PROMPT]))

    assert not output.is_error, output.error
    assert output.response == "The difference is 25587."  # 206588 - 181001, computed by tools.py
    [call] = output.tool_calls
    assert "subtract" in call.name
    assert call.args == SUBTRACT_ARGS
    assert call.result == 25587
    assert call.error is None
    assert call.duration_ms > 0


def test_the_model_is_offered_the_tool_with_a_json_schema_from_the_signature(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    run_bounded(converse(agent_for(tmp_path, fake), [PROMPT]))

    first = fake.requests_to("/chat/completions")[0].body
    [tool] = first["tools"]
    assert tool["function"]["name"] == "tools-subtract"
    assert tool["function"]["description"] == "Subtract b from a"
    parameters = tool["function"]["parameters"]
    assert parameters["required"] == ["a", "b"]
    assert parameters["properties"]["a"] == {
        "type": "number",
        "description": "The number to subtract from.",
    }
    assert first["messages"][0] == {"role": "system", "content": INSTRUCTIONS}
    assert first["temperature"] == 0


def test_usage_is_summed_over_every_request_of_the_turn(tmp_path: Path, fake: FakeOpenAI) -> None:
    [output] = run_bounded(converse(agent_for(tmp_path, fake), [PROMPT]))

    requests = fake.requests_to("/chat/completions")
    assert len(requests) == 2  # the tool call, then the answer after the tool result
    sent = [r.usage for r in requests if r.usage]
    assert output.usage == TokenUsage.counted(
        sum(u["prompt_tokens"] for u in sent), sum(u["completion_tokens"] for u in sent)
    )
    assert output.usage.prompt_tokens == 120 + 140  # not just the last request's 140


def test_the_history_of_earlier_turns_is_sent_with_the_next_turn(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    first, second = run_bounded(converse(agent_for(tmp_path, fake), [PROMPT, "and now say thanks"]))

    assert second.response == "You said: and now say thanks"
    assert second.tool_calls == []
    last = fake.requests_to("/chat/completions")[-1].body["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert last[1]["content"] == PROMPT
    assert last[3]["content"] == "25587"
    assert last[4]["content"] == first.response
    # Turn 2 is one request, and its usage is its own, not accumulated over the session.
    assert second.usage == TokenUsage(prompt_tokens=160, completion_tokens=11, total_tokens=171)


def test_a_failing_tool_is_recorded_with_its_error_and_the_turn_goes_on(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    agent = agent_for(tmp_path, fake, function="broken_subtract")

    [output] = run_bounded(converse(agent, [PROMPT]))

    assert not output.is_error
    [call] = output.tool_calls
    assert call.error == "ValueError: cannot subtract 181001 from 206588 today"
    assert call.result is None
    tool_message = fake.requests_to("/chat/completions")[1].body["messages"][-1]
    assert "cannot subtract" in tool_message["content"]  # the model is told what went wrong


def test_a_model_http_error_is_returned_as_an_errored_turn_and_the_session_recovers(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    fake.failures.append((400, {"error": {"message": "model is sulking", "type": "invalid"}}))

    failed, recovered = run_bounded(converse(agent_for(tmp_path, fake), [PROMPT, "hello again"]))

    assert failed.is_error
    assert failed.response is None
    assert "model is sulking" in (failed.error or "")
    assert not recovered.is_error
    # The failed turn left nothing half-done in the history.
    last = fake.requests_to("/chat/completions")[-1].body["messages"]
    assert [m["role"] for m in last] == ["system", "user"]
    assert recovered.response == "You said: hello again"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_mcp_tools_are_served_through_an_sk_mcp_plugin(
    tmp_path: Path, fake: FakeOpenAI, transport: str, request: pytest.FixtureRequest
) -> None:
    if transport == "http":
        agent = agent_for(tmp_path, fake, mcp_url=request.getfixturevalue("http_ledger"))
    else:
        agent = agent_for(tmp_path, fake, mcp=True)

    [output] = run_bounded(converse(agent, [PROMPT]))

    assert not output.is_error, output.error
    [call] = output.tool_calls
    assert call.name == "ledger-subtract"
    assert call.args == SUBTRACT_ARGS
    assert call.result == "25587"
    assert output.response == "The difference is 25587."


def test_a_session_whose_mcp_server_cannot_start_fails_to_open(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    agent = agent_for(tmp_path, fake, mcp=True)
    (tmp_path / "agent" / "mcp_server.py").write_text("raise SystemExit(3)\n")

    with pytest.raises(BackendError, match="could not open a session"):
        run_bounded(converse(agent, [PROMPT]))


def test_the_backend_refuses_a_provider_it_does_not_serve(tmp_path: Path, fake: FakeOpenAI) -> None:
    agent = write_agent(
        tmp_path / "agent", provider="anthropic", model="claude-sonnet-4-5", endpoint=fake.url
    )

    with pytest.raises(BackendError, match="anthropic"):
        SemanticKernelBackend(agent)


def test_ollama_uses_the_openai_compatible_endpoint(tmp_path: Path, fake: FakeOpenAI) -> None:
    agent = write_agent(
        tmp_path / "agent", provider="ollama", model="llama3.2", endpoint=f"{fake.url}/v1"
    )

    [output] = run_bounded(converse(agent, [PROMPT]))

    assert output.response == "The difference is 25587."
    assert fake.requests_to("/chat/completions")[0].body["model"] == "llama3.2"


def test_sessions_of_one_backend_do_not_share_history(tmp_path: Path, fake: FakeOpenAI) -> None:
    backend = SemanticKernelBackend(agent_for(tmp_path, fake))

    async def two_sessions() -> tuple[SemanticKernelSession, SemanticKernelSession]:
        one = await backend.create_session(case_name="one", case_index=0)
        two = await backend.create_session(case_name="two", case_index=1)
        await one.send("hello from one")
        await two.send("hello from two")
        await one.close()
        await two.close()
        return one, two

    one, two = run_bounded(two_sessions())

    assert [m.content for m in one.history.messages][1:] == [
        "hello from one",
        "You said: hello from one",
    ]
    assert [m.content for m in two.history.messages][1:] == [
        "hello from two",
        "You said: hello from two",
    ]


def test_a_turn_cancelled_by_a_timeout_leaves_no_trace_in_the_history(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    agent = agent_for(tmp_path, fake)
    fake.delays.append(3.0)

    async def timed_out_then_next() -> tuple[TurnOutput, SemanticKernelSession]:
        session = await SemanticKernelBackend(agent).create_session(case_name="c", case_index=0)
        try:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(session.send(PROMPT), 0.5)  # what the engine does
            return await session.send("hello again"), session
        finally:
            await session.close()

    output, session = run_bounded(timed_out_then_next())

    assert output.response == "You said: hello again"
    assert [m.role.value for m in session.history.messages] == ["system", "user", "assistant"]


def test_azure_openai_calls_the_deployment_of_the_model_name_with_the_api_version(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    agent = write_agent(
        tmp_path / "agent",
        provider="azure_openai",
        model="my-gpt4o-deployment",
        endpoint=fake.url,
        extra="",
    )

    [output] = run_bounded(converse(agent, [PROMPT]))

    assert output.response == "The difference is 25587.", output.error
    first = fake.requests_to("/chat/completions")[0]
    assert first.path.startswith("/openai/deployments/my-gpt4o-deployment/chat/completions")
    assert "api-version=" in first.path
    assert first.headers.get("api-key") == "test-key-not-secret"
    assert output.usage is not None and output.usage.prompt_tokens == 260


def test_two_tool_rounds_in_one_turn_are_both_recorded_and_every_request_is_counted(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    agent = agent_for(tmp_path, fake)

    [output] = run_bounded(converse(agent, [PROMPT + ", twice"]))

    assert not output.is_error, output.error
    first, second = output.tool_calls
    assert (first.args, first.result) == (SUBTRACT_ARGS, 25587)
    assert (second.args, second.result) == ({"a": 25587.0, "b": 587}, 25000.0)
    assert output.response == "The difference is 25000.0."
    requests = fake.requests_to("/chat/completions")
    assert len(requests) == 3
    assert output.usage is not None
    assert output.usage.prompt_tokens == sum(r.usage["prompt_tokens"] for r in requests)
    assert output.usage.completion_tokens == sum(r.usage["completion_tokens"] for r in requests)


def test_a_turns_transcript_holds_each_model_call_with_the_servers_usage_and_the_tool_result(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    agent = agent_for(tmp_path, fake)

    async def go() -> tuple[TurnOutput, str | None]:
        session = await backend_for(agent).create_session(case_name="case", case_index=0)
        try:
            output = await session.send(PROMPT)
            return output, session.system_prompt  # type: ignore[attr-defined]
        finally:
            await session.close()

    output, system_prompt = run_bounded(go())

    events = output.transcript
    assert [e["type"] for e in events] == ["model_call", "tool_call", "model_call", "assistant"]
    assert system_prompt == INSTRUCTIONS  # as the first request sent it
    sent = fake.requests_to("/chat/completions")
    calls = [e for e in events if e["type"] == "model_call"]
    assert [(c["input_tokens"], c["output_tokens"]) for c in calls] == [
        (x.usage["prompt_tokens"], x.usage["completion_tokens"]) for x in sent
    ]
    assert [c["stop_reason"] for c in calls] == ["tool_calls", "stop"]
    assert [c["messages"] for c in calls] == [len(x.body["messages"]) for x in sent]
    assert all(c["model"] == "gpt-4o-mini" and c["duration_ms"] > 0 for c in calls)
    tool = events[1]
    assert tool["result"] == 25587 == output.tool_calls[0].result  # what tools.py returned
    assert tool["args"] == SUBTRACT_ARGS and tool["error"] is None
    assert calls[0]["start_ms"] <= tool["start_ms"] <= calls[1]["start_ms"]
    assert events[-1]["text"] == output.response


def test_a_request_the_sdk_retried_shows_as_a_retry_then_the_calls_second_attempt(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    fake.failures = [(500, {"error": {"message": "overloaded"}})]

    [output] = run_bounded(converse(agent_for(tmp_path, fake), [PROMPT]))

    assert not output.is_error, output.error
    events = output.transcript
    assert [e["type"] for e in events][:3] == ["retry", "model_call", "tool_call"]
    assert "HTTP 500" in events[0]["error"] and "overloaded" in events[0]["error"]
    assert [e["attempt"] for e in events if e["type"] == "model_call"] == [2, 1]


def test_a_failed_turn_ends_its_transcript_with_the_error(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.failures = [(400, {"error": {"message": "bad request"}})]

    [output] = run_bounded(converse(agent_for(tmp_path, fake), [PROMPT]))

    assert output.is_error
    assert [e["type"] for e in output.transcript] == ["retry", "error"]
    assert output.transcript[-1]["text"] == output.error


def test_an_engine_run_records_the_rendered_instructions_and_the_message_in_the_transcript(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    from runs.core.engine.executor import Engine

    agent = agent_for(tmp_path, fake)

    report = run_bounded(Engine(agent).run())

    for result in report.results:
        system, user, *rest = result.transcript or []
        assert (system["type"], system["text"]) == ("system", agent.instructions)
        assert system["source"] == (agent.config.instructions.file or "agent.yaml")
        assert user == {"type": "user", "text": result.test_input}
        assert [e["type"] for e in rest] == ["model_call", "tool_call", "model_call", "assistant"]
        tool = rest[1]
        assert tool["result"] == result.tool_invocations[0].result


def test_a_turn_stopped_by_a_timeout_keeps_what_it_did_before_in_its_partial_transcript(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    agent = agent_for(tmp_path, fake)
    fake.delays.extend([0.0, 3.0])  # the tool call is asked for at once, the answer hangs

    async def timed_out() -> list[dict[str, object]]:
        session = await SemanticKernelBackend(agent).create_session(case_name="c", case_index=0)
        try:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(session.send(PROMPT), 1.0)  # what the engine does
            return session.partial_transcript()
        finally:
            await session.close()

    events = run_bounded(timed_out())

    assert [e["type"] for e in events] == ["model_call", "tool_call", "model_call"]
    assert events[1]["result"] == 25587
    # The call that never answered keeps the request it sent: the tool's result included.
    waiting = events[2]
    assert waiting["stop_reason"] == "no answer" and waiting["model"] == "gpt-4o-mini"
    [sent] = [e.body for e in fake.requests_to("/chat/completions")][1:]
    assert RequestBook(events).body(waiting["request"]) == sent


def test_every_session_verifies_tls_with_one_certificate_store_loaded_once() -> None:
    import ssl

    from runs.core.backends.semantic_kernel import tls_context

    context = tls_context()
    assert context is tls_context()  # loaded once per process, not per session
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
