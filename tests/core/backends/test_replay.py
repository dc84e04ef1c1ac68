"""What-if replay through real backends: the scripted one, and semantic-kernel over the fake
OpenAI server, each with a tool that would raise (and counts its calls on disk). A call that
matches the recording is answered from it (the tool never runs) and marked replayed; an
unmatched one fails naming the call under ``recorded-only``, runs under
``recorded-then-live``; ``live`` runs every call."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runs.core.agentconfig.loader import LoadedAgent, load_agent
from runs.core.backends.base import backend_for
from runs.core.backends.replay import ToolReplay
from runs.core.engine.executor import Engine
from runs.core.wire.models import TestResult
from tests.core.backends.agent_files import needs_claude_cli, run_bounded, write_agent
from tests.core.backends.fake_llm_servers import SUBTRACT_ARGS, FakeAnthropic, FakeOpenAI

# A tool that would raise, and writes a line to calls.log beside it each time it runs.
RAISING_TOOLS = '''
from pathlib import Path


def subtract(a: float, b: float) -> float:
    """Subtract b from a."""
    with open(Path(__file__).with_name("calls.log"), "a") as log:
        log.write(f"{a} {b}\\n")
    raise RuntimeError("the ledger is down")
'''


def tool_runs(agent: LoadedAgent) -> int:
    log = next(agent.base_dir.rglob("calls.log"), None)
    return len(log.read_text().splitlines()) if log else 0


def recorded(args: dict[str, Any], result: Any) -> dict[int, list[list[dict[str, Any]]]]:
    """Case 0's recording: one turn that called subtract with ``args`` and got ``result``."""
    return {0: [[{"name": "subtract", "args": args, "result": result, "error": None}]]}


def replayed_case(agent: LoadedAgent, policy: str, recording: dict[int, Any]) -> TestResult:
    replay = ToolReplay(lambda index: recording.get(index, []), policy)  # type: ignore[arg-type]
    engine = Engine(agent, backend=backend_for(agent, replay=replay))
    return run_bounded(engine.run_case(0))


def tool_events(transcript: Any) -> list[dict[str, Any]]:
    return [event for event in transcript or [] if event.get("type") == "tool_call"]


# --- the scripted backend ---------------------------------------------------------------------


SCRIPTED_AGENT = """
name: replay-test
model: {provider: scripted, name: scripted-test, transcript: transcript.yaml}
instructions: {inline: You are a careful calculator.}
tools:
  - {type: function, name: subtract, file: tools.py, function: subtract}
evaluations:
  metrics:
    - {type: standard, metric: equality}
test_cases:
  - {name: c, input: 5 - 3?, ground_truth: "2", expected_tools: [subtract]}
"""

SCRIPTED_TRANSCRIPT = """
cases:
  c:
    - tool_calls: [{name: subtract, args: {a: 5, b: 3}}]
      response: "2"
"""


def scripted_agent(tmp_path: Path) -> LoadedAgent:
    """A scripted agent whose one case calls subtract(5, 3) and answers "2" (equality graded
    against "2"); its subtract raises and counts its calls."""
    (tmp_path / "tools.py").write_text(RAISING_TOOLS)
    (tmp_path / "transcript.yaml").write_text(SCRIPTED_TRANSCRIPT)
    (tmp_path / "agent.yaml").write_text(SCRIPTED_AGENT)
    return load_agent(tmp_path / "agent.yaml", environ={})


def test_recorded_only_answers_a_matched_call_from_the_recording_without_running_the_tool(
    tmp_path: Path,
) -> None:
    agent = scripted_agent(tmp_path)

    result = replayed_case(agent, "recorded-only", recorded({"a": 5, "b": 3}, 2))

    [call] = result.tool_invocations
    assert (call.name, call.result, call.error) == ("subtract", 2, None)
    assert tool_runs(agent) == 0
    assert result.outcome == "passed"  # the verdict follows the recorded result
    [event] = tool_events(result.transcript)
    assert event.get("replayed") is True


def test_recorded_only_fails_an_unmatched_call_with_an_error_naming_it(tmp_path: Path) -> None:
    agent = scripted_agent(tmp_path)

    result = replayed_case(agent, "recorded-only", recorded({"a": 5, "b": 4}, 1))

    [call] = result.tool_invocations
    assert call.error is not None
    assert 'subtract({"a": 5, "b": 3})' in call.error and "recorded-only" in call.error
    assert 'subtract({"a": 5, "b": 4})' in call.error  # what the turn recorded instead
    assert tool_runs(agent) == 0
    [event] = tool_events(result.transcript)
    assert not event.get("replayed")


def test_recorded_then_live_runs_the_tool_for_an_unmatched_call(tmp_path: Path) -> None:
    agent = scripted_agent(tmp_path)

    result = replayed_case(agent, "recorded-then-live", recorded({"a": 5, "b": 4}, 1))

    [call] = result.tool_invocations
    assert call.error is not None and "the ledger is down" in call.error
    assert tool_runs(agent) == 1


def test_live_runs_every_call_even_one_the_recording_matches(tmp_path: Path) -> None:
    agent = scripted_agent(tmp_path)

    result = replayed_case(agent, "live", recorded({"a": 5, "b": 3}, 2))

    [call] = result.tool_invocations
    assert call.error is not None and "the ledger is down" in call.error
    assert tool_runs(agent) == 1
    assert not any(event.get("replayed") for event in tool_events(result.transcript))


# --- semantic-kernel over the fake OpenAI server ------------------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


def sk_agent(tmp_path: Path, fake: FakeOpenAI) -> LoadedAgent:
    """The calculator agent on the fake OpenAI server, its subtract raising and counting."""
    extra = """
    evaluations:
      metrics:
        - {type: standard, metric: equality}
    """
    agent = write_agent(
        tmp_path / "agent",
        provider="openai",
        model="gpt-4o-mini",
        endpoint=f"{fake.url}/v1",
        extra=extra,
    )
    (agent.base_dir / "tools.py").write_text(RAISING_TOOLS)
    text = (agent.base_dir / "agent.yaml").read_text()
    text = text.replace(
        "input: please subtract 181001 from 206588",
        "input: please subtract 181001 from 206588\n    ground_truth: The difference is 25587.",
    )
    (agent.base_dir / "agent.yaml").write_text(text)
    return load_agent(agent.base_dir / "agent.yaml", environ={})


def test_semantic_kernel_answers_a_matched_call_from_the_recording_and_the_verdict_follows(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    agent = sk_agent(tmp_path, fake)

    result = replayed_case(agent, "recorded-only", recorded(SUBTRACT_ARGS, 25587))

    assert result.agent_response == "The difference is 25587."  # the recorded result, quoted
    [call] = result.tool_invocations
    assert call.result == 25587 and call.error is None
    assert tool_runs(agent) == 0
    assert result.outcome == "passed"
    assert [event.get("replayed") for event in tool_events(result.transcript)] == [True]


def test_semantic_kernel_fails_an_unmatched_call_naming_it_under_recorded_only(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    agent = sk_agent(tmp_path, fake)

    result = replayed_case(agent, "recorded-only", recorded({"a": 1, "b": 2}, -1))

    [call] = result.tool_invocations
    assert call.error is not None and "no recorded call" in call.error
    assert "subtract" in call.error and "206588" in call.error
    assert tool_runs(agent) == 0
    assert result.outcome != "passed"


def test_semantic_kernel_runs_the_tools_under_live(tmp_path: Path, fake: FakeOpenAI) -> None:
    agent = sk_agent(tmp_path, fake)

    result = replayed_case(agent, "live", recorded(SUBTRACT_ARGS, 25587))

    [call] = result.tool_invocations
    assert call.error is not None and "the ledger is down" in call.error
    assert tool_runs(agent) == 1
    assert result.outcome != "passed"


def test_a_replay_is_refused_an_unknown_policy() -> None:
    with pytest.raises(ValueError, match="unknown replay tool policy"):
        ToolReplay(lambda index: [], "sometimes")  # type: ignore[arg-type]


# --- the Claude Agent SDK: its external MCP servers served in process ------------------------

CLAUDE_MODEL = "claude-sonnet-4-5"


def claude_mcp_agent(tmp_path: Path, fake: Any) -> LoadedAgent:
    return write_agent(
        tmp_path / "agent", provider="anthropic", model=CLAUDE_MODEL, endpoint=fake.url, mcp=True
    )


def claude_turn(agent: LoadedAgent, policy: str, recording: dict[int, Any]) -> Any:
    replay = ToolReplay(lambda index: recording.get(index, []), policy)  # type: ignore[arg-type]

    async def one_turn() -> Any:
        backend = backend_for(agent, replay=replay)
        session = await backend.create_session(case_name="c", case_index=0)
        try:
            return await session.send("please subtract 181001 from 206588")
        finally:
            await session.close()

    return run_bounded(one_turn())


def ledger_recording(args: dict[str, Any], result: Any) -> dict[int, Any]:
    call = {"name": "mcp__ledger__subtract", "args": args, "result": result, "error": None}
    return {0: [[call]]}


@needs_claude_cli
def test_claude_answers_an_external_mcp_call_from_the_recording(tmp_path: Path) -> None:
    fake = FakeAnthropic().start()
    try:
        agent = claude_mcp_agent(tmp_path, fake)
        # The recording's answer is not the ledger's (25587): the model quotes the recording's.
        output = claude_turn(agent, "recorded-only", ledger_recording(SUBTRACT_ARGS, "99999"))
        refused = claude_turn(agent, "recorded-only", ledger_recording({"a": 1, "b": 2}, "-1"))
        live = claude_turn(agent, "recorded-then-live", ledger_recording({"a": 1, "b": 2}, "-1"))
    finally:
        fake.stop()

    assert not output.is_error, output.error
    [call] = output.tool_calls
    assert (call.name, call.result) == ("mcp__ledger__subtract", "99999")
    assert output.response == "The difference is 99999."
    [event] = tool_events(output.transcript)
    assert event["replayed"] is True
    [failed] = refused.tool_calls
    assert failed.error is not None and "no recorded call of turn 1 matches" in failed.error
    assert "mcp__ledger__subtract" in failed.error
    assert "replayed" not in tool_events(refused.transcript)[0]
    [ran] = live.tool_calls
    assert ran.result == "25587" and live.response == "The difference is 25587."  # the ledger
