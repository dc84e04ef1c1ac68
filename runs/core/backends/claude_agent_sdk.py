"""The claude-agent-sdk backend (provider ``anthropic``).

A session is one ``ClaudeSDKClient`` (one Claude Code CLI process, the binary bundled in the
wheel) kept open for all turns of a test case:

- the agent's python function tools are an in-process SDK MCP server named ``tools``, so the
  model sees ``mcp__tools__<name>``; each handler runs the real callable and records the call;
- its MCP tools are passed through as external servers (``mcp__<tool name>__<server tool>``);
  their calls are recorded from the ToolUseBlock / ToolResultBlock pairs of the stream;
- no built-in tool is available (``tools=[]``) and only the configured tools are pre-approved;
  anything else is denied, never prompted (``permission_mode="dontAsk"``; never
  ``bypassPermissions``, which the CLI refuses as root);
- isolation: a private temporary ``CLAUDE_CONFIG_DIR`` (deleted on close), no user/project
  settings or CLAUDE.md (``setting_sources=[]``, ``strict_mcp_config``, ``--bare``), no
  non-essential traffic, bounded CLI retries;
- usage is the ResultMessage's ``usage`` of each turn (the CLI sums the turn's API calls);
- the transcript (``runs.core.wire.transcripts``) is read off the stream, partial messages on
  (``runs.core.backends.claude_stream``);
- within one run (``ClaudeAgentBackend.session_scope``) a case's process, once cleared, serves
  a later case of the run (``runs.core.backends.claude_reuse``).

``send`` reports model/CLI failures as ``TurnOutput(is_error=True)``; it raises only when
cancelled (the engine's ``llm_timeout``), after which the next ``send`` first interrupts and
drains the abandoned turn so the two conversations never mix.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator, Hashable
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

import claude_agent_sdk
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    SdkMcpTool,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    create_sdk_mcp_server,
)

from runs.core.backends.base import BackendError, TurnOutput, captured_call
from runs.core.backends.claude_capture import UPSTREAM_ENV, Channel, capture_enabled, capture_proxy
from runs.core.backends.claude_replay import ReplayedServers
from runs.core.backends.claude_reuse import SessionPool, cases_per_process_setting
from runs.core.backends.claude_stream import StreamTrace, tool_result_text
from runs.core.backends.function_tools import (
    call_function_tool,
    error_text,
    function_description,
    function_group_name,
    function_tool_schema,
)
from runs.core.backends.replay import CaseReplay, Refused, Replayed, ToolReplay, replay_begin_turn
from runs.core.wire.models import TokenUsage, ToolInvocation
from runs.core.wire.requests import RequestLog

if TYPE_CHECKING:
    from runs.core.agentconfig.loader import LoadedAgent

log = logging.getLogger(__name__)

MAX_RETRIES = 2
# Starts a new, empty conversation on the CLI process (the Agent SDK's documented slash command).
CLEAR_COMMAND = "/clear"
# How long the next send waits for an abandoned (timed-out) turn to wind down.
DRAIN_TIMEOUT_S = 15.0
# "default" would prompt for unapproved tools; headless, deny them instead.
_PERMISSION_MODES = {"default": "dontAsk", "acceptEdits": "acceptEdits", "plan": "plan"}


def bundled_cli_path() -> Path | None:
    """The Claude Code binary shipped inside the claude-agent-sdk wheel, if present."""
    path = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    return path if path.is_file() else None


class ClaudeAgentBackend:
    """Builds one :class:`ClaudeAgentSession` (one CLI process) per test case; within
    :meth:`session_scope` a case's process, cleared, serves a later case
    (runs.core.backends.claude_reuse)."""

    # A CLI process takes about 0.3 s of CPU before it can take a message: the engine opens the
    # next cases' sessions while the current ones run (runs.core.engine.sessions).
    costly_start = True

    def __init__(self, agent: LoadedAgent, *, replay: ToolReplay | None = None) -> None:
        self.replay = replay
        if agent.config.model.provider != "anthropic":
            raise BackendError(
                f"the claude_agent_sdk backend serves provider 'anthropic', "
                f"not {agent.config.model.provider!r}"
            )
        if bundled_cli_path() is None:
            raise BackendError("claude-agent-sdk has no bundled Claude Code CLI (_bundled/claude)")
        self.agent = agent
        try:
            limit = cases_per_process_setting()
        except ValueError as exc:
            raise BackendError(str(exc)) from exc
        self.cases_per_process = limit if reuse_allowed(agent) else 1
        # The pool of the scope a case runs in (a ContextVar: cases of other scopes may run on
        # the same event loop), and the pools kept past their scope, by key.
        self._scope: ContextVar[SessionPool[ClaudeAgentSession] | None] = ContextVar(
            f"claude-session-scope-{id(self)}", default=None
        )
        self._kept: dict[Hashable, SessionPool[ClaudeAgentSession]] = {}
        self.processes_started = 0  # CLI processes this backend started

    @contextlib.asynccontextmanager
    async def session_scope(self, key: Hashable | None = None) -> AsyncIterator[None]:
        """One run's cases: a case's process is cleared and kept for a later case instead of
        stopped. Without ``key`` (one ``Engine.run``) every kept process stops when the scope
        ends; with one (a worker's run id) they outlive it, for the next scope of that key,
        until :meth:`sessions_close` stops them."""
        if self.cases_per_process <= 1 or self._scope.get() is not None:
            yield
            return
        pool = self._kept.get(key) if key is not None else None
        if pool is None:
            pool = SessionPool(self.cases_per_process)
            if key is not None:
                self._kept[key] = pool
        token = self._scope.set(pool)
        try:
            yield
        finally:
            self._scope.reset(token)
            if key is None:
                await pool.close()

    def sessions_kept(self, key: Hashable) -> int:
        """How many processes the scopes of ``key`` keep now (ready, or being cleared)."""
        pool = self._kept.get(key)
        return pool.size if pool is not None else 0

    async def sessions_close(self, key: Hashable | None = None) -> None:
        """Stop the processes kept for ``key`` (every key's, without one)."""
        keys = list(self._kept) if key is None else [key]
        pools = [self._kept.pop(each) for each in keys if each in self._kept]
        await asyncio.gather(*(pool.close() for pool in pools))

    async def create_session(self, *, case_name: str | None, case_index: int) -> ClaudeAgentSession:
        pool = self._scope.get()
        kept = await pool.take() if pool is not None else None
        if kept is not None:
            kept.begin_case(pool, self._case_replay(case_index))
            log.info(
                "case %s takes a kept Claude Code process (its case %s)",
                case_index,
                kept.cases_served,
            )
            return kept
        self.processes_started += 1
        log.info("case %s starts a Claude Code process", case_index)
        replay = self._case_replay(case_index)
        try:
            session = ClaudeAgentSession(self.agent, replay)
        except Exception as exc:
            raise BackendError(f"could not configure Claude Code: {error_text(exc)}") from exc
        try:
            await session.open()
        except BaseException as exc:
            await session.shutdown()
            if isinstance(exc, Exception):
                raise BackendError(f"could not start Claude Code: {session.describe(exc)}") from exc
            raise
        session.begin_case(pool, replay)
        return session

    def _case_replay(self, case_index: int) -> CaseReplay | None:
        return self.replay.for_case(case_index) if self.replay is not None else None


class ClaudeAgentSession:
    """One conversation on one Claude Code CLI process."""

    def __init__(self, agent: LoadedAgent, replay: CaseReplay | None = None) -> None:
        self._agent = agent
        self._config_dir = Path(tempfile.mkdtemp(prefix="holodeck-claude-"))
        self._stderr: deque[str] = deque(maxlen=20)
        self._calls: list[ToolInvocation] = []
        self._replay = replay
        mcp = [t for t in agent.config.tools if t.type == "mcp"]
        # A replay's external MCP servers, answered from the recording (runs.core.backends.
        # claude_replay): its client is made again once they are listed (open).
        self._mcp_replay = ReplayedServers.of(mcp, replay, agent.base_dir)
        self._replayed: set[int] = set()  # slots in _calls the recording answered
        # tool_use id -> (index in _calls, start time) of an MCP call awaiting its result
        self._external: dict[str, tuple[int, float]] = {}
        self._abandoned = False
        # Requests as sent, through the capture proxy (runs.core.backends.claude_capture).
        self._requests = RequestLog()
        self._capture_url: str | None = None
        self._capture: Channel | None = None
        if capture_enabled():
            upstream = agent.config.model.endpoint or os.environ.get("ANTHROPIC_BASE_URL")
            self._capture_url, self._capture = capture_proxy().open(upstream)
        self._trace = self._stream_trace()
        self._server = function_group_name([t.name for t in agent.config.tools if t.type == "mcp"])
        self.cases_served = 0
        self._pool: SessionPool[ClaudeAgentSession] | None = None
        self._conversation: str | None = None  # the CLI session id of the last turn's result
        self._ended = False
        try:
            self._client = ClaudeSDKClient(self._options())
        except BaseException:
            shutil.rmtree(self._config_dir, ignore_errors=True)
            raise

    @property
    def config_dir(self) -> Path:
        return self._config_dir

    @property
    def system_prompt(self) -> str:
        """The system prompt the CLI was given (``--system-prompt``)."""
        return self._system_prompt()

    async def open(self) -> None:
        if self._mcp_replay is not None:
            self._client = ClaudeSDKClient(self._options(await self._mcp_replay.open()))
        await self._client.connect()

    async def send(self, message: str) -> TurnOutput:
        self._calls = []
        self._external = {}
        self._replayed = set()
        self._trace = self._stream_trace()
        replay_begin_turn(self._replay)
        if self._abandoned and not await self._drain_abandoned_turn():
            return TurnOutput(None, is_error=True, error="the previous turn could not be stopped")
        self._abandoned = True  # until the ResultMessage of this turn arrives
        try:
            await self._client.query(message)
            return await self._receive_turn()
        except Exception as exc:
            return self._output(None, None, error=self.describe(exc))

    def partial_transcript(self) -> list[dict[str, Any]]:
        """The current turn's events so far (the engine asks when it stops a turn)."""
        return self._trace.finished()

    def _stream_trace(self) -> StreamTrace:
        return StreamTrace(
            self._calls, self._replayed, capture=self._capture, requests=self._requests
        )

    async def close(self) -> None:
        """The case ended: the run's pool keeps the process for a later case when it can,
        else the process stops."""
        pool, self._pool = self._pool, None
        if pool is None or not pool.give_back(self):
            await self.shutdown()

    async def shutdown(self) -> None:
        try:
            with contextlib.suppress(Exception):
                await self._client.disconnect()
            if self._mcp_replay is not None:
                await self._mcp_replay.close()
        finally:
            shutil.rmtree(self._config_dir, ignore_errors=True)
            if self._capture_url is not None:
                capture_proxy().close(self._capture_url)

    # --- reuse (runs.core.backends.claude_reuse) -------------------------------------------------

    def begin_case(
        self, pool: SessionPool[ClaudeAgentSession] | None, replay: CaseReplay | None = None
    ) -> None:
        self.cases_served += 1
        self._pool = pool
        self._replay = replay
        # A case's requests are numbered from its first (its transcripts hold their parts).
        self._requests.reset()
        if self._capture is not None:
            self._capture.clear()

    def reusable(self) -> bool:
        """Whether the process may serve another case: its last turn ended with its result."""
        return not self._abandoned and not self._ended

    async def clear(self) -> bool:
        """Start a new, empty conversation on this process (``/clear``). True only when the
        CLI confirmed it with a result under a new session id: a CLI that kept the old
        conversation must not serve another case."""
        self._calls, self._external = [], {}
        self._trace = self._stream_trace()
        self._stderr.clear()
        if self._conversation is None:
            return True  # no turn was sent (a session opened ahead that no case took)
        self._abandoned = True  # until the command's result arrives
        before = self._conversation
        await self._client.query(CLEAR_COMMAND)
        async for msg in self._client.receive_response():
            if isinstance(msg, ResultMessage):
                self._abandoned = False
                self._conversation = msg.session_id
                return not msg.is_error and msg.session_id != before
        return False

    def describe(self, exc: BaseException) -> str:
        """The error text, with the CLI's last stderr lines when it wrote any."""
        text = error_text(exc)
        tail = " | ".join(line.strip() for line in self._stderr if line.strip())
        return f"{text} (stderr: {tail[-500:]})" if tail else text

    # --- one turn ---------------------------------------------------------------------------

    async def _receive_turn(self) -> TurnOutput:
        texts: list[str] = []
        errors: list[str] = []
        async for msg in self._client.receive_response():
            if isinstance(msg, AssistantMessage):
                if msg.parent_tool_use_id is None:
                    texts.extend(self._read_assistant(msg))
                    self._trace.assistant(msg)
                if msg.error:
                    errors.append(f"assistant error: {msg.error}")  # e.g. authentication_failed
            elif isinstance(msg, UserMessage):
                self._read_tool_results(msg)
                self._trace.tool_results(msg)
            elif isinstance(msg, StreamEvent):
                self._trace.stream(msg)
            elif isinstance(msg, SystemMessage):
                self._trace.system(msg)
            elif isinstance(msg, ResultMessage):
                self._abandoned = False
                self._conversation = msg.session_id
                return self._result_output(msg, texts, errors)
        self._abandoned = False
        self._ended = True  # the CLI's stream ended: the process serves no other case
        return self._output(None, None, error="Claude Code ended the turn without a result")

    def _read_assistant(self, msg: AssistantMessage) -> list[str]:
        """Text of this assistant message; a tool_use starts a new reply, so it resets."""
        texts: list[str] = []
        for block in msg.content:
            if isinstance(block, TextBlock):
                texts.append(block.text)
            elif isinstance(block, ToolUseBlock) and not self._is_function_tool(block.name):
                self._external[block.id] = (len(self._calls), time.perf_counter())
                self._calls.append(captured_call(block.name, block.input or {}))
        return texts

    def _read_tool_results(self, msg: UserMessage) -> None:
        if isinstance(msg.content, str):
            return
        for block in msg.content:
            if isinstance(block, ToolResultBlock) and block.tool_use_id in self._external:
                slot, started = self._external.pop(block.tool_use_id)
                text = tool_result_text(block.content)
                call = self._calls[slot]
                if self._mcp_replay is not None and self._mcp_replay.answered(call.name, call.args):
                    self._replayed.add(slot)
                self._calls[slot] = captured_call(
                    call.name,
                    call.args,
                    result=None if block.is_error else text,
                    error=text if block.is_error else None,
                    duration_ms=(time.perf_counter() - started) * 1000,
                )

    def _result_output(self, msg: ResultMessage, texts: list[str], errors: list[str]) -> TurnOutput:
        usage = claude_usage(msg.usage) if msg.usage else None
        if msg.is_error:
            # On an API failure the CLI puts "API Error: 400 ..." in `result`: that is the error
            # text, not an answer to grade.
            details = [d for d in (msg.result, *(msg.errors or []), *errors) if d]
            prefix = "" if msg.subtype == "success" else f"{msg.subtype}: "
            return self._output(None, usage, error=prefix + ("; ".join(details) or "failed"))
        response = msg.result if isinstance(msg.result, str) else "".join(texts[-1:])
        return self._output(response, usage)

    def _output(
        self, response: str | None, usage: TokenUsage | None, *, error: str | None = None
    ) -> TurnOutput:
        if error is not None:
            self._trace.trace.add("error", text=error)
        return TurnOutput(
            response=response,
            tool_calls=list(self._calls),
            usage=usage,
            is_error=error is not None,
            error=error,
            transcript=self._trace.finished(),
        )

    async def _drain_abandoned_turn(self) -> bool:
        """Stop a turn the engine gave up on and read its messages up to its ResultMessage."""

        async def drain() -> None:
            await self._client.interrupt()
            async for msg in self._client.receive_response():
                if isinstance(msg, ResultMessage):
                    return

        try:
            await asyncio.wait_for(drain(), DRAIN_TIMEOUT_S)
        except Exception:
            return False
        self._abandoned = False
        return True

    # --- options ----------------------------------------------------------------------------

    def _options(self, replayed: dict[str, Any] | None = None) -> ClaudeAgentOptions:
        config = self._agent.config
        claude = config.claude
        function_tools = [t for t in config.tools if t.type == "function"]
        mcp_tools = [t for t in config.tools if t.type == "mcp"]
        servers: dict[str, Any] = {t.name: external_server(t) for t in mcp_tools}
        servers.update(replayed or {})
        allowed = [f"mcp__{t.name}" for t in mcp_tools]
        if function_tools:
            servers[self._server] = create_sdk_mcp_server(
                self._server, tools=[self._sdk_tool(t) for t in function_tools]
            )
            allowed += [f"mcp__{self._server}__{t.name}" for t in function_tools]
        extra = list(claude.allowed_tools or []) if claude else []
        options = ClaudeAgentOptions(
            # Built-ins (Bash, Read, Write, ...) exist only when claude.allowed_tools names them.
            tools=[name for name in extra if not name.startswith("mcp__")],
            allowed_tools=allowed + extra,
            disallowed_tools=list(claude.disallowed_tools or []) if claude else [],
            system_prompt=self._system_prompt(),
            model=config.model.name,
            mcp_servers=servers,
            strict_mcp_config=True,
            setting_sources=[],
            permission_mode=_PERMISSION_MODES[claude.permission_mode if claude else "default"],  # type: ignore[arg-type]
            max_turns=claude.max_turns if claude else None,
            cwd=str(self._agent.base_dir),
            env=self._env(),
            stderr=self._stderr.append,
            extra_args={"bare": None} if bare_mode(self._agent) else {},
            # Each API call's message_start and message_delta: its usage, stop reason and time
            # for the transcript (assistant messages only carry the usage of its start).
            include_partial_messages=True,
        )
        if claude and claude.max_thinking_tokens:
            options.thinking = {"type": "enabled", "budget_tokens": claude.max_thinking_tokens}
        return options

    def _system_prompt(self) -> str:
        prompt = self._agent.instructions or ""
        claude = self._agent.config.claude
        if claude and claude.append_system_prompt:
            prompt = f"{prompt}\n\n{claude.append_system_prompt}".strip()
        return prompt

    def _env(self) -> dict[str, str]:
        """What the CLI process gets on top of the server's environment (the SDK merges them,
        this dict winning). ``CLAUDE_CODE_*`` values are defaults only: a variable the user's
        environment sets (e.g. ``CLAUDE_CODE_MAX_RETRIES``, ``CLAUDE_CODE_USE_BEDROCK``) is left
        as the user set it."""
        model = self._agent.config.model
        env = {
            "CLAUDE_CONFIG_DIR": str(self._config_dir),
            "DISABLE_AUTOUPDATER": "1",
            # The CLI's own per-request timeout; the engine's llm_timeout bounds the whole turn.
            "API_TIMEOUT_MS": str(int(self._agent.config.execution.llm_timeout * 1000)),
        }
        if model.endpoint:
            env["ANTHROPIC_BASE_URL"] = model.endpoint
        if self._capture_url is not None and self._capture is not None:
            # Through the capture proxy; the endpoint it forwards to, for whoever reads the
            # process's environment (ps, a test finding its CLIs).
            env["ANTHROPIC_BASE_URL"] = self._capture_url
            env[UPSTREAM_ENV] = self._capture.upstream
        if model.api_key:
            env["ANTHROPIC_API_KEY"] = model.api_key
        defaults = {
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": str(MAX_RETRIES),
            # The CLI's runtime (Bun) collects garbage on a timer while the process idles: a
            # session opened ahead of its case would spend ~0.1 s of CPU a second waiting.
            # Collections on allocation still happen.
            "BUN_GC_TIMER_DISABLE": "1",
        }
        if model.max_tokens:
            defaults["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(model.max_tokens)
        env.update({k: v for k, v in defaults.items() if k not in os.environ})
        return env

    def _is_function_tool(self, name: str) -> bool:
        return name.startswith(f"mcp__{self._server}__")

    def _sdk_tool(self, tool: Any) -> SdkMcpTool[Any]:
        """An in-process MCP tool whose handler runs the python callable and records the call."""
        fn = tool.callable
        name = f"mcp__{self._server}__{tool.name}"

        async def handler(args: dict[str, Any]) -> dict[str, Any]:
            # Recorded when it starts, replaced by its outcome: the list keeps call order (and a
            # later turn's list is a new one).
            calls, slot = self._calls, len(self._calls)
            calls.append(captured_call(name, args))
            started = time.perf_counter()
            answer = self._replay.answer(name, args) if self._replay is not None else None
            if isinstance(answer, Replayed):
                self._replayed.add(slot)
                result, error = answer.result, answer.error
            elif isinstance(answer, Refused):
                result, error = None, answer.error
            else:
                result, error = await call_function_tool(fn, dict(args))
            duration_ms = (time.perf_counter() - started) * 1000
            calls[slot] = captured_call(
                name, args, result=result, error=error, duration_ms=duration_ms
            )
            if error is not None:
                return {"content": [{"type": "text", "text": error}], "is_error": True}
            return {"content": [{"type": "text", "text": result_text(result)}]}

        return SdkMcpTool(
            name=tool.name,
            description=function_description(fn, tool.description),
            input_schema=function_tool_schema(fn),
            handler=handler,
        )


def bare_mode(agent: LoadedAgent) -> bool:
    """Run the CLI with ``--bare``: no hooks, plugin sync, LSP, auto-memory, CLAUDE.md
    discovery, attribution, background prefetches or housekeeping, none of which a test session
    uses (and a session opened ahead would run them while it waits). Bare mode authenticates
    with ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_AUTH_TOKEN`` (or a cloud provider's own
    credentials) only, never ``CLAUDE_CODE_OAUTH_TOKEN``: where that token is the only
    credential, the CLI runs as before."""
    if agent.config.model.api_key:
        return True
    keys = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    return any(os.environ.get(key) for key in keys) or not os.environ.get("CLAUDE_CODE_OAUTH_TOKEN")


def reuse_allowed(agent: LoadedAgent) -> bool:
    """Whether a CLI process may serve several cases of a run: only when all it holds between
    turns is its conversation, which ``/clear`` empties. Not with an MCP tool (a stdio server
    is the CLI's child, and an HTTP server's MCP session belongs to the process: either may
    keep state per session), with built-in tools (a background shell or agent may outlive
    the case), or without ``--bare`` (auto-memory and other files in its config folder)."""
    claude = agent.config.claude
    built_ins = (
        [n for n in (claude.allowed_tools or []) if not n.startswith("mcp__")] if claude else []
    )
    mcp = any(tool.type == "mcp" for tool in agent.config.tools)
    return not mcp and not built_ins and bare_mode(agent)


def external_server(tool: Any) -> dict[str, Any]:
    """An McpTool as a Claude Code ``--mcp-config`` server entry."""
    if tool.transport == "http":
        server: dict[str, Any] = {"type": "http", "url": tool.url}
        if tool.headers:
            server["headers"] = dict(tool.headers)
        return server
    server = {"type": "stdio", "command": tool.command, "args": list(tool.args or [])}
    if tool.env:
        server["env"] = dict(tool.env)
    return server


def claude_usage(usage: dict[str, Any]) -> TokenUsage:
    return TokenUsage.counted(
        int(usage.get("input_tokens") or 0),
        int(usage.get("output_tokens") or 0),
        cache_creation_tokens=int(usage.get("cache_creation_input_tokens") or 0),
        cache_read_tokens=int(usage.get("cache_read_input_tokens") or 0),
    )


def result_text(result: Any) -> str:
    """What the model reads back: strings as they are, anything else as JSON (else ``str``)."""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result)
    except (TypeError, ValueError):
        return str(result)
