"""The claude-agent-sdk backend: the real bundled Claude Code CLI against a fake Anthropic API.

The CLI streams ``POST /v1/messages?beta=true`` to ``ANTHROPIC_BASE_URL``; the fake answers with
SSE events. Every test is time-boxed (a hung CLI fails the test instead of stalling CI).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from runs.core.agentconfig.loader import load_agent
from runs.core.backends.base import BackendError, TurnOutput, backend_for
from runs.core.backends.claude_agent_sdk import ClaudeAgentBackend, ClaudeAgentSession
from runs.core.engine.executor import Engine
from runs.core.wire.models import TokenUsage
from tests.core.backends.agent_files import INSTRUCTIONS, needs_claude_cli, run_bounded, write_agent
from tests.core.backends.fake_llm_servers import SUBTRACT_ARGS, Exchange, FakeAnthropic

pytestmark = needs_claude_cli

PROMPT = "please subtract 181001 from 206588"
MODEL = "claude-sonnet-4-5"


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic().start()
    yield server
    server.stop()


def agent_for(tmp_path: Path, fake: FakeAnthropic, **options: Any) -> Any:
    return write_agent(
        tmp_path / "agent", provider="anthropic", model=MODEL, endpoint=fake.url, **options
    )


def model_requests(fake: FakeAnthropic) -> list[Exchange]:
    return fake.model_requests(MODEL)


def summed(exchanges: list[Exchange]) -> TokenUsage:
    usages = [e.usage for e in exchanges if e.usage]
    return TokenUsage.counted(
        sum(u["input_tokens"] for u in usages),
        sum(u["output_tokens"] for u in usages),
        cache_creation_tokens=sum(u["cache_creation_input_tokens"] for u in usages),
        cache_read_tokens=sum(u["cache_read_input_tokens"] for u in usages),
    )


async def converse(agent: Any, messages: list[str]) -> tuple[list[TurnOutput], ClaudeAgentSession]:
    session = await backend_for(agent).create_session(case_name="case", case_index=0)
    assert isinstance(session, ClaudeAgentSession)
    try:
        return [await session.send(message) for message in messages], session
    finally:
        await session.close()


def test_a_tool_round_trip_runs_the_python_tool_through_the_in_process_mcp_server(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    ([output], _) = run_bounded(converse(agent_for(tmp_path, fake), [PROMPT]))

    assert not output.is_error, output.error
    assert output.response == "The difference is 25587."  # computed by tools.py, not the fake
    [call] = output.tool_calls
    assert call.name == "mcp__tools__subtract"
    assert call.args == SUBTRACT_ARGS
    assert call.result == 25587
    assert call.error is None
    assert call.duration_ms > 0


def test_the_model_gets_the_instructions_the_model_id_and_exactly_the_configured_tools(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    run_bounded(converse(agent_for(tmp_path, fake), [PROMPT]))

    first = model_requests(fake)[0]
    assert "?beta=true" in first.path
    assert first.body["stream"] is True
    assert first.headers.get("x-api-key") == "test-key-not-secret"
    # No Bash, Read, Write, ...: only the agent's own tool, with the schema of its signature.
    [tool] = first.body["tools"]
    assert tool["name"] == "mcp__tools__subtract"
    assert tool["input_schema"]["required"] == ["a", "b"]
    assert tool["input_schema"]["properties"]["a"]["type"] == "number"
    system = first.body["system"]
    system_text = system if isinstance(system, str) else " ".join(b["text"] for b in system)
    assert INSTRUCTIONS in system_text


def test_two_turns_share_one_conversation_and_each_reports_its_own_usage(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    ([first, second], _) = run_bounded(
        converse(agent_for(tmp_path, fake), [PROMPT, "and now say thanks"])
    )

    assert not second.is_error, second.error
    assert second.response == "You said: and now say thanks"
    assert second.tool_calls == []
    requests = model_requests(fake)
    assert len(requests) == 3  # turn 1: tool_use + answer; turn 2: answer
    # Turn 2's request carries turn 1 (question, tool_use, tool_result, answer) before it.
    assert len(requests[2].body["messages"]) == 5
    assert "subtract" in str(requests[2].body["messages"][0]["content"])
    assert first.usage == summed(requests[:2])
    assert second.usage == summed(requests[2:])
    assert first.usage.cache_creation_tokens == 14  # both requests of turn 1, cache included


def test_a_failing_tool_is_recorded_with_its_error_and_the_turn_completes(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    agent = agent_for(tmp_path, fake, function="broken_subtract")

    ([output], _) = run_bounded(converse(agent, [PROMPT]))

    assert not output.is_error, output.error
    [call] = output.tool_calls
    assert call.error == "ValueError: cannot subtract 181001 from 206588 today"
    assert "cannot subtract" in (output.response or "")  # the model read the error


def test_an_api_error_is_returned_as_an_errored_turn(tmp_path: Path, fake: FakeAnthropic) -> None:
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "no thanks"}}
    fake.failures.extend([(400, error)] * 5)

    ([output], _) = run_bounded(converse(agent_for(tmp_path, fake), [PROMPT]))

    assert output.is_error
    assert "400 no thanks" in (output.error or "")
    assert output.response is None  # the CLI's "API Error: ..." text is not an answer
    assert output.tool_calls == []


def test_each_session_has_a_private_config_dir_that_is_deleted_on_close(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    agent = agent_for(tmp_path, fake)
    seen: list[Path] = []

    async def two_sessions() -> None:
        one = await backend_for(agent).create_session(case_name="one", case_index=0)
        two = await backend_for(agent).create_session(case_name="two", case_index=1)
        assert isinstance(one, ClaudeAgentSession) and isinstance(two, ClaudeAgentSession)
        await one.send("hello")
        seen.extend([one.config_dir, two.config_dir])
        assert any(one.config_dir.iterdir())  # the CLI keeps its state there, not in ~/.claude
        await one.close()
        await two.close()

    run_bounded(two_sessions())

    assert seen[0] != seen[1]
    assert not seen[0].exists() and not seen[1].exists()
    assert sorted(p.name for p in (tmp_path / "agent").iterdir()) == ["agent.yaml", "tools.py"]


def test_external_mcp_servers_pass_through_and_their_calls_are_recorded_from_the_stream(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    ([output], _) = run_bounded(converse(agent_for(tmp_path, fake, mcp=True), [PROMPT]))

    assert not output.is_error, output.error
    [call] = output.tool_calls
    assert call.name == "mcp__ledger__subtract"
    assert call.args == SUBTRACT_ARGS
    assert call.result == "25587"
    assert output.response == "The difference is 25587."


def test_external_mcp_servers_over_streamable_http_pass_through_too(
    tmp_path: Path, fake: FakeAnthropic, http_ledger: str
) -> None:
    agent = agent_for(tmp_path, fake, mcp_url=http_ledger)
    ([output], _) = run_bounded(converse(agent, [PROMPT]))

    assert not output.is_error, output.error
    [call] = output.tool_calls
    assert call.name == "mcp__ledger__subtract"
    assert call.args == SUBTRACT_ARGS
    assert call.result == "25587"


def test_the_claude_block_sets_max_turns_and_appends_to_the_system_prompt(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    extra = """
    claude:
      max_turns: 1
      append_system_prompt: Always answer in English.
    """
    ([output], _) = run_bounded(converse(agent_for(tmp_path, fake, extra=extra), [PROMPT]))

    # One model turn is spent on the tool call, so the CLI stops before answering.
    assert output.is_error
    assert (output.error or "").startswith("error_max_turns: ")
    assert [c.name for c in output.tool_calls] == ["mcp__tools__subtract"]
    system = str(model_requests(fake)[0].body["system"])
    assert "Always answer in English." in system


def test_the_backend_refuses_a_provider_it_does_not_serve(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    agent = write_agent(tmp_path / "agent", provider="openai", model="gpt-4o", endpoint=fake.url)

    with pytest.raises(BackendError, match="anthropic"):
        ClaudeAgentBackend(agent)


def test_a_turn_abandoned_by_a_timeout_is_stopped_before_the_next_turn(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    agent = agent_for(tmp_path, fake)
    fake.delays.append(5.0)

    async def timed_out_then_next() -> TurnOutput:
        session = await backend_for(agent).create_session(case_name="case", case_index=0)
        try:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(session.send(PROMPT), 1.0)  # what the engine does
            return await session.send("hello again")
        finally:
            await session.close()

    output = run_bounded(timed_out_then_next())

    assert not output.is_error, output.error
    assert output.response == "You said: hello again"
    assert output.tool_calls == []


def test_the_users_claude_code_variables_are_not_overridden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = write_agent(
        tmp_path / "agent", provider="anthropic", model=MODEL, endpoint="http://127.0.0.1:9"
    )
    session = ClaudeAgentSession(agent)
    try:
        defaults = session._options().env
        assert defaults["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
        assert defaults["CLAUDE_CODE_MAX_RETRIES"] == "2"
        assert defaults["BUN_GC_TIMER_DISABLE"] == "1"  # no collections while a session waits

        monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "7")
        monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "0")
        env = session._options().env
        # Absent from the overrides, so the CLI inherits the user's values.
        assert "CLAUDE_CODE_MAX_RETRIES" not in env
        assert "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC" not in env
        assert env["CLAUDE_CONFIG_DIR"] == str(session.config_dir)  # isolation stays
    finally:
        run_bounded(session.close())


def test_an_engine_run_gives_each_case_its_own_claude_conversation_and_records_its_start(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    path = agent_for(tmp_path, fake).path
    config = yaml.safe_load(path.read_text())
    config["test_cases"] = [{"name": f"case{i}", "input": PROMPT} for i in range(3)]
    path.write_text(yaml.safe_dump(config))
    agent = load_agent(path, environ={})
    assert ClaudeAgentBackend.costly_start  # the engine opens the next cases' sessions ahead

    report = run_bounded(Engine(agent).run(parallel=1), timeout=120)

    for result in report.results:
        assert result.passed, result.errors
        assert result.agent_response == "The difference is 25587."
        # A reused process (runs.core.backends.claude_reuse) is handed over in about no time.
        assert result.session_start_ms is not None and result.session_start_ms >= 0
        assert result.execution_time_ms >= 0
        # Its transcript: the instructions as rendered, the message, then the SDK's events.
        system, user, *rest = result.transcript or []
        assert (system["type"], system["text"]) == ("system", agent.instructions)
        assert (user["type"], user["text"]) == ("user", PROMPT)
        assert [e["type"] for e in rest] == ["model_call", "tool_call", "model_call", "assistant"]
    assert (report.results[0].session_start_ms or 0) > 0  # the first case's CLI started for it
    sessions = {e.headers["X-Claude-Code-Session-Id"] for e in model_requests(fake)}
    assert len(sessions) == 3  # one CLI conversation per case, none shared


def test_the_cli_runs_bare_unless_a_claude_code_oauth_token_is_its_only_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    keyed = write_agent(
        tmp_path / "keyed", provider="anthropic", model=MODEL, endpoint="http://127.0.0.1:9"
    )
    path = write_agent(
        tmp_path / "keyless", provider="anthropic", model=MODEL, endpoint="http://127.0.0.1:9"
    ).path
    path.write_text(re.sub(r"(?m)^ *api_key: .*\n", "", path.read_text()))
    keyless = load_agent(path, environ={})

    def bare(agent: Any) -> bool:
        session = ClaudeAgentSession(agent)
        try:
            return "bare" in session._options().extra_args
        finally:
            run_bounded(session.close())

    assert bare(keyed) and bare(keyless)  # no credential at all: the CLI says so either way
    monkeypatch.setenv("CLAUDE_CODE_OAUTH_TOKEN", "oauth-token")
    assert bare(keyed)  # the agent's own key is the credential
    assert not bare(keyless)  # bare mode would not read the OAuth token
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "gateway-token")
    assert bare(keyless)


def test_a_turns_transcript_holds_each_api_call_with_the_servers_usage_and_the_tool_result(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    ([output], session) = run_bounded(converse(agent_for(tmp_path, fake), [PROMPT]))

    assert not output.is_error, output.error
    assert session.system_prompt == INSTRUCTIONS
    events = output.transcript
    assert [e["type"] for e in events] == ["model_call", "tool_call", "model_call", "assistant"]
    calls = [e for e in events if e["type"] == "model_call"]
    sent = model_requests(fake)
    assert [(c["input_tokens"], c["output_tokens"], c["cached_tokens"]) for c in calls] == [
        (x.usage["input_tokens"], x.usage["output_tokens"], x.usage["cache_read_input_tokens"])
        for x in sent
    ]
    assert [c["stop_reason"] for c in calls] == ["tool_use", "end_turn"]
    assert all(c["model"] == MODEL and c["duration_ms"] >= 0 for c in calls)
    tool = events[1]
    assert tool["name"] == "mcp__tools__subtract" and tool["args"] == SUBTRACT_ARGS
    assert tool["result"] == 25587 == output.tool_calls[0].result  # what tools.py returned
    assert tool["id"].startswith("toolu_") and tool["error"] is None
    assert calls[0]["start_ms"] <= tool["start_ms"] <= calls[1]["start_ms"]
    assert events[-1]["text"] == output.response
