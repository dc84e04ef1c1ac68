"""A Claude Code process kept from one test case for the next (runs.core.backends.claude_reuse).

The real bundled CLI against the fake Anthropic API: two cases through one reused process see
none of each other's messages, tool calls or errors; the pool's own rules are tested with
stand-in sessions. Every CLI test is time-boxed (``run_bounded``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from runs.core.agentconfig.loader import load_agent
from runs.core.backends import claude_agent_sdk
from runs.core.backends.base import BackendError
from runs.core.backends.claude_agent_sdk import ClaudeAgentBackend
from runs.core.backends.claude_reuse import (
    CASES_PER_PROCESS_ENV,
    DEFAULT_CASES_PER_PROCESS,
    SessionPool,
    cases_per_process_setting,
)
from runs.core.engine.executor import Engine
from tests.core.backends.agent_files import needs_claude_cli, run_bounded, write_agent
from tests.core.backends.fake_llm_servers import Exchange, FakeAnthropic

MODEL = "claude-sonnet-4-5"
SESSION = "X-Claude-Code-Session-Id"


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic().start()
    yield server
    server.stop()


def conversation_requests(fake: FakeAnthropic) -> list[Exchange]:
    return fake.model_requests(MODEL)


def sent_text(exchange: Exchange) -> str:
    """Everything a request sent the model in its messages, as one string."""
    return json.dumps(exchange.body["messages"])


def agent_with_cases(tmp_path: Path, fake: FakeAnthropic, inputs: list[str]) -> Any:
    path = write_agent(
        tmp_path / "agent", provider="anthropic", model=MODEL, endpoint=fake.url
    ).path
    config = yaml.safe_load(path.read_text())
    config["test_cases"] = [{"name": f"case{i}", "input": text} for i, text in enumerate(inputs)]
    path.write_text(yaml.safe_dump(config))
    return load_agent(path, environ={})


@needs_claude_cli
def test_two_cases_through_one_reused_process_see_none_of_each_others_messages(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    agent = agent_with_cases(tmp_path, fake, ["x"])
    first = ["remember the word PINEAPPLE", "please subtract 181001 from 206588"]
    second = ["which word did I ask you to remember?", "and what was the difference?"]

    async def two_cases() -> tuple[list[Any], list[Any], bool, int]:
        backend = ClaudeAgentBackend(agent)
        async with backend.session_scope():
            a = await backend.create_session(case_name="a", case_index=0)
            a_out = [await a.send(message) for message in first]
            await a.close()
            b = await backend.create_session(case_name="b", case_index=1)
            b_out = [await b.send(message) for message in second]
            await b.close()
        return a_out, b_out, a is b, backend.processes_started

    a_out, b_out, same, started = run_bounded(two_cases(), timeout=90)

    assert same and started == 1  # one CLI process served both cases
    assert [o.is_error for o in a_out + b_out] == [False] * 4
    assert a_out[1].tool_calls and a_out[1].tool_calls[0].result == 25587
    assert [o.tool_calls for o in b_out] == [[], []]  # the first case's call is not the second's
    requests = conversation_requests(fake)
    a_session = requests[0].headers[SESSION]
    b_requests = [e for e in requests if e.headers[SESSION] != a_session]
    assert len(b_requests) == 2  # a new CLI conversation for the second case
    for exchange in b_requests:
        text = sent_text(exchange)
        assert "PINEAPPLE" not in text and "206588" not in text and "25587" not in text
    # The second case's first request holds one user message: its own (after the CLI's
    # record of the /clear it ran), none of the first case's.
    opening = b_requests[0].body["messages"]
    assert len(opening) == 1 and opening[0]["role"] == "user"
    assert opening[0]["content"][-1]["text"] == second[0]


@needs_claude_cli
def test_an_engine_run_reuses_processes_and_every_case_keeps_its_own_conversation(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    inputs = [f"case{i}: please subtract 181001 from 206588" for i in range(5)]
    agent = agent_with_cases(tmp_path, fake, inputs)
    engine = Engine(agent)
    backend = engine.backend
    assert isinstance(backend, ClaudeAgentBackend)

    report = run_bounded(engine.run(parallel=1), timeout=120)

    assert [r.passed for r in report.results] == [True] * 5
    assert all(r.agent_response == "The difference is 25587." for r in report.results)
    assert all(len(r.tool_calls) == 1 for r in report.results)
    assert backend.processes_started <= 2  # 5 cases: the first case's and one opened ahead
    by_session: dict[str, list[Exchange]] = {}
    for exchange in conversation_requests(fake):
        by_session.setdefault(exchange.headers[SESSION], []).append(exchange)
    assert len(by_session) == 5  # one conversation per case
    for exchanges in by_session.values():
        tags = {
            f"case{i}:" for i in range(5) if any(f"case{i}:" in sent_text(e) for e in exchanges)
        }
        assert len(tags) == 1  # each conversation sent one case's input only


@needs_claude_cli
def test_with_one_case_per_process_every_case_starts_its_own_cli(
    tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CASES_PER_PROCESS_ENV, "1")
    agent = agent_with_cases(tmp_path, fake, [f"case{i}: hello" for i in range(3)])
    engine = Engine(agent)

    report = run_bounded(engine.run(parallel=1), timeout=120)

    assert len(report.results) == 3
    assert engine.backend.processes_started == 3  # type: ignore[attr-defined]


@needs_claude_cli
def test_outside_a_run_scope_each_session_is_its_own_process(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    agent = agent_with_cases(tmp_path, fake, ["x"])

    async def two_sessions() -> tuple[bool, int]:
        backend = ClaudeAgentBackend(agent)
        a = await backend.create_session(case_name="a", case_index=0)
        await a.send("hello")
        await a.close()
        b = await backend.create_session(case_name="b", case_index=1)
        await b.close()
        return a is b, backend.processes_started

    assert run_bounded(two_sessions()) == (False, 2)  # a Celery worker's case: as before


@needs_claude_cli
def test_a_process_whose_turn_was_stopped_is_not_given_to_another_case(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    agent = agent_with_cases(tmp_path, fake, ["x"])
    fake.delays = [5.0]

    async def stopped_then_next() -> tuple[bool, int]:
        backend = ClaudeAgentBackend(agent)
        async with backend.session_scope():
            a = await backend.create_session(case_name="a", case_index=0)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(a.send("hello"), 1.0)  # the engine's llm_timeout
            await a.close()
            b = await backend.create_session(case_name="b", case_index=1)
            await b.close()
        return a is b, backend.processes_started

    assert run_bounded(stopped_then_next()) == (False, 2)


@needs_claude_cli
def test_a_process_whose_clear_keeps_the_conversation_is_not_given_to_another_case(
    tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A CLI that did not know the command would send it to the model, in the old conversation.
    monkeypatch.setattr(claude_agent_sdk, "CLEAR_COMMAND", "this is not a command")
    agent = agent_with_cases(tmp_path, fake, ["x"])

    async def not_cleared() -> tuple[bool, int]:
        backend = ClaudeAgentBackend(agent)
        async with backend.session_scope():
            a = await backend.create_session(case_name="a", case_index=0)
            await a.send("remember the word PINEAPPLE")
            await a.close()
            b = await backend.create_session(case_name="b", case_index=1)
            await b.send("which word?")
            await b.close()
        return a is b, backend.processes_started

    assert run_bounded(not_cleared()) == (False, 2)
    last = conversation_requests(fake)[-1]
    assert "PINEAPPLE" not in sent_text(last)


@needs_claude_cli
def test_only_an_agent_whose_process_holds_nothing_but_its_conversation_reuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def agent(name: str, **options: Any) -> Any:
        return write_agent(
            tmp_path / name, provider="anthropic", model=MODEL, endpoint="http://x", **options
        )

    def limit(loaded: Any) -> int:
        return ClaudeAgentBackend(loaded).cases_per_process

    plain = agent("plain")
    assert limit(plain) == DEFAULT_CASES_PER_PROCESS
    assert limit(agent("stdio", mcp=True)) == 1  # the server is the CLI's child
    assert limit(agent("http", mcp_url="http://127.0.0.1:9/mcp")) == 1  # its MCP session too
    assert limit(agent("bash", extra="claude:\n  allowed_tools: [Bash]\n")) == 1
    assert limit(agent("mcp-named", extra="claude:\n  allowed_tools: [mcp__x]\n")) > 1
    # Without --bare (an OAuth token the only credential) the config folder keeps memories.
    keyless = agent("keyless").path
    keyless.write_text(re.sub(r"(?m)^ *api_key: .*\n", "", keyless.read_text()))
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLAUDE_CODE_OAUTH_TOKEN", "oauth-token")
    assert limit(load_agent(keyless, environ={})) == 1
    assert limit(plain) == DEFAULT_CASES_PER_PROCESS  # its own api_key: bare


def test_cases_per_process_is_read_from_the_environment_and_a_bad_value_names_the_variable(
    tmp_path: Path,
) -> None:
    assert cases_per_process_setting({}) == DEFAULT_CASES_PER_PROCESS
    assert cases_per_process_setting({CASES_PER_PROCESS_ENV: " 3 "}) == 3
    with pytest.raises(ValueError, match=f"{CASES_PER_PROCESS_ENV}='many' is not a whole number"):
        cases_per_process_setting({CASES_PER_PROCESS_ENV: "many"})
    with pytest.raises(ValueError, match="must be 1 or more"):
        cases_per_process_setting({CASES_PER_PROCESS_ENV: "0"})


@needs_claude_cli
def test_a_backend_refuses_a_bad_cases_per_process_with_the_variables_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = write_agent(tmp_path / "a", provider="anthropic", model=MODEL, endpoint="http://x")
    monkeypatch.setenv(CASES_PER_PROCESS_ENV, "-2")

    with pytest.raises(BackendError, match=CASES_PER_PROCESS_ENV):
        ClaudeAgentBackend(agent)


# --- the pool's rules, with stand-in sessions ------------------------------------------------


class StandIn:
    def __init__(self, *, reusable: bool = True, clears: bool = True, clear_s: float = 0) -> None:
        self.cases_served = 1
        self._reusable, self._clears, self._clear_s = reusable, clears, clear_s
        self.cleared = 0
        self.stopped = False

    def reusable(self) -> bool:
        return self._reusable

    async def clear(self) -> bool:
        await asyncio.sleep(self._clear_s)
        self.cleared += 1
        return self._clears

    async def shutdown(self) -> None:
        self.stopped = True


def test_a_pool_hands_a_cleared_session_to_the_next_case_and_waits_for_one_being_cleared() -> None:
    async def body() -> None:
        pool: SessionPool[StandIn] = SessionPool(limit=5)
        assert await pool.take() is None  # nothing kept: the case starts a process
        session = StandIn(clear_s=0.05)
        assert pool.give_back(session)
        taken = await pool.take()  # waits for its /clear
        assert taken is session and session.cleared == 1 and not session.stopped
        await pool.close()

    run_bounded(body(), timeout=10)


def test_a_pool_stops_a_session_that_is_spent_not_reusable_or_not_cleared() -> None:
    async def body() -> None:
        pool: SessionPool[StandIn] = SessionPool(limit=2)
        spent, broken, failing = StandIn(), StandIn(reusable=False), StandIn(clears=False)
        spent.cases_served = 2
        assert not pool.give_back(spent)
        assert not pool.give_back(broken)
        assert pool.give_back(failing)
        assert await pool.take() is None  # its /clear failed: stopped, not handed on
        assert failing.stopped
        await pool.close()

    run_bounded(body(), timeout=10)


async def one_idle_one_clearing(pool: SessionPool[StandIn]) -> tuple[StandIn, StandIn]:
    """Two sessions given back: one already cleared (idle), one whose /clear is under way."""
    idle, clearing = StandIn(), StandIn(clear_s=0.3)
    pool.give_back(idle)
    await asyncio.sleep(0.01)
    pool.give_back(clearing)
    return idle, clearing


def test_a_pool_whose_closing_is_cancelled_still_stops_every_kept_session() -> None:
    async def body() -> None:
        pool: SessionPool[StandIn] = SessionPool(limit=5)
        idle, clearing = await one_idle_one_clearing(pool)
        closing = asyncio.create_task(pool.close())
        await asyncio.sleep(0.05)
        closing.cancel()  # e.g. a second Ctrl-C while the run ends
        await asyncio.gather(closing, return_exceptions=True)
        await asyncio.sleep(0.4)
        assert idle.stopped and clearing.stopped

    run_bounded(body(), timeout=10)


def test_closing_a_pool_stops_every_kept_session_and_keeps_nothing_after() -> None:
    async def body() -> None:
        pool: SessionPool[StandIn] = SessionPool(limit=5)
        idle, clearing = await one_idle_one_clearing(pool)
        await pool.close()
        assert idle.stopped and clearing.stopped
        late = StandIn()
        assert not pool.give_back(late)
        assert await pool.take() is None

    run_bounded(body(), timeout=10)
