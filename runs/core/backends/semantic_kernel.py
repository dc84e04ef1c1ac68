"""The semantic-kernel backend (providers ``openai``, ``azure_openai``, ``ollama``).

One session = one Kernel with one chat service, the agent's function tools as kernel functions
(plugin ``tools``, so the model sees ``tools-<name>``), its MCP tools as SK MCP plugins (plugin
``<tool name>``, functions ``<tool name>-<server tool>``), automatic function calling, and a
ChatHistory that lives as long as the session.

What a turn reports:
- tool calls, from an AUTO_FUNCTION_INVOCATION filter (name, args, result, error, duration);
- token usage summed over every HTTP request of the turn: each request of SK's auto-invoke loop
  is a separate chat completion with its own ``usage``, so an httpx response hook on the
  session's private client adds them up (the final message's metadata only holds the last one);
- model/HTTP failures as ``TurnOutput(is_error=True)``; ``send`` never raises for them;
- its transcript (``runs.core.wire.transcripts``), from the same two places: each HTTP request of
  the turn is a ``model_call`` (its model, timing, usage and finish reason read off the
  request and response; a failed one a ``retry``), the assistant text of each response, and
  each tool call from the filter. The system prompt is the one the first request carried.

``ollama`` goes through Ollama's OpenAI-compatible ``/v1`` API with the OpenAI connector (no
extra ``ollama`` package, and the same wire format the offline tests fake).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import httpx
from openai import AsyncAzureOpenAI, AsyncOpenAI
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import AzureChatCompletion, OpenAIChatCompletion
from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings
from semantic_kernel.contents import ChatHistory, TextContent
from semantic_kernel.filters import AutoFunctionInvocationContext, FilterTypes
from semantic_kernel.functions import (
    FunctionResult,
    KernelFunctionFromMethod,
    KernelParameterMetadata,
)
from semantic_kernel.functions.kernel_function_decorator import kernel_function

from runs.core.backends import function_tools
from runs.core.backends.base import BackendError, TurnOutput, captured_call
from runs.core.backends.replay import CaseReplay, Refused, Replayed, ToolReplay, replay_begin_turn
from runs.core.wire.models import TokenUsage, ToolInvocation
from runs.core.wire.requests import RESPONSE_CAP, RequestLog, capped_json
from runs.core.wire.transcripts import TurnTrace

if TYPE_CHECKING:
    from semantic_kernel.connectors.mcp import MCPPluginBase

    from runs.core.agentconfig.loader import LoadedAgent

OLLAMA_DEFAULT_ENDPOINT = "http://localhost:11434/v1"
# Retries inside one send; the engine's llm_timeout bounds the whole turn anyway.
HTTP_MAX_RETRIES = 2
# SK reports a swallowed function exception to the model with this prefix (kernel.py).
_SK_FUNCTION_ERROR = "An error occurred while invoking the function "

# Where a failing python tool puts its error for the tool call in progress in this asyncio task
# (SK runs parallel calls as separate tasks; it would otherwise only tell the model).
_TOOL_ERRORS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "holodeck_tool_errors", default=None
)


class ToolFailedError(Exception):
    """A python tool raised; the message is already ``ExcType: message``."""


class SemanticKernelBackend:
    """Builds one :class:`SemanticKernelSession` per test case."""

    providers = ("openai", "azure_openai", "ollama")

    def __init__(self, agent: LoadedAgent, *, replay: ToolReplay | None = None) -> None:
        provider = agent.config.model.provider
        if provider not in self.providers:
            raise BackendError(f"the semantic_kernel backend does not serve provider {provider!r}")
        self.agent = agent
        self.replay = replay

    async def create_session(
        self, *, case_name: str | None, case_index: int
    ) -> SemanticKernelSession:
        replay = self.replay.for_case(case_index) if self.replay is not None else None
        try:
            session = SemanticKernelSession(self.agent, replay=replay)
        except Exception as exc:
            raise open_error(exc) from exc
        try:
            await session.open()
        except BaseException as exc:
            await session.close()
            if isinstance(exc, Exception):
                raise open_error(exc) from exc
            raise
        return session


def open_error(exc: Exception) -> BackendError:
    detail = str(exc) if isinstance(exc, BackendError) else function_tools.error_text(exc)
    return BackendError(f"could not open a session: {detail}")


class SemanticKernelSession:
    """One conversation: a kernel, a chat service and the ChatHistory of every turn so far."""

    def __init__(self, agent: LoadedAgent, *, replay: CaseReplay | None = None) -> None:
        self._replay = replay
        self._meter = UsageMeter()
        timeout = float(agent.config.execution.llm_timeout)
        self._timeout = timeout
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            verify=tls_context(),
            event_hooks={
                "request": [self._meter.on_request],
                "response": [self._meter.on_response],
            },
        )
        self._service = chat_service(agent.config.model, self._http)
        self._kernel = Kernel()
        self._kernel.add_service(self._service)
        self._kernel.add_filter(FilterTypes.AUTO_FUNCTION_INVOCATION, self._record_tool_call)
        self._mcp_configs = [t for t in agent.config.tools if t.type == "mcp"]
        self._base_dir = agent.base_dir
        self._mcp_plugins: list[MCPPluginBase] = []
        plugin = function_tools.function_group_name([t.name for t in self._mcp_configs])
        for tool in agent.config.tools:
            if tool.type == "function":
                self._kernel.add_function(plugin, python_kernel_function(tool, plugin))
        self._model = agent.config.model
        self._settings = execution_settings(self._service, self._model, self._kernel)
        self._instructions = agent.instructions or None
        self._history = ChatHistory(system_message=self._instructions)
        self._calls: list[ToolInvocation] = []
        self._trace = TurnTrace()

    @property
    def history(self) -> ChatHistory:
        return self._history

    @property
    def system_prompt(self) -> str | None:
        """The system prompt as the first request sent it (before one: the history's)."""
        if self._meter.system_prompt is not None:
            return self._meter.system_prompt
        return self._instructions

    async def open(self) -> None:
        """Connect the MCP servers (each plugin lists its tools as kernel functions)."""
        for config in self._mcp_configs:
            plugin = mcp_plugin(config, self._base_dir, request_timeout=self._timeout)
            self._mcp_plugins.append(plugin)
            await connect_mcp_plugin(plugin, config.name, self._timeout)
            self._kernel.add_plugin(plugin, plugin_name=config.name)
        self._settings = execution_settings(self._service, self._model, self._kernel)

    async def send(self, message: str) -> TurnOutput:
        self._calls = []
        self._trace = self._meter.reset()
        replay_begin_turn(self._replay)
        mark = len(self._history.messages)
        self._history.add_user_message(message)
        try:
            reply = await self._service.get_chat_message_content(
                chat_history=self._history, settings=self._settings, kernel=self._kernel
            )
        except Exception as exc:
            # Drop the half-finished turn (a dangling tool_calls message would make every later
            # request of this session invalid); the failure is reported, not retried.
            del self._history.messages[mark:]
            return self._output(None, error=function_tools.error_text(exc))
        except BaseException:
            del self._history.messages[mark:]  # cancelled by the engine's llm_timeout
            raise
        if reply is None:
            del self._history.messages[mark:]
            return self._output(None, error="the model returned no message")
        self._history.add_message(reply)
        return self._output(reply.content or "")

    def partial_transcript(self) -> list[dict[str, Any]]:
        """The current turn's events so far (the engine asks when it stops a turn), a request
        still waiting for its answer as a model call that got none."""
        self._meter.unanswered()
        return self._trace.finished()

    async def close(self) -> None:
        for plugin in reversed(self._mcp_plugins):
            with contextlib.suppress(Exception):  # closing must not hide the turn's outcome
                await plugin.close()
        self._mcp_plugins.clear()
        await self._http.aclose()

    def _output(self, response: str | None, *, error: str | None = None) -> TurnOutput:
        if error is not None:
            self._trace.add("error", text=error)
        return TurnOutput(
            response=response,
            tool_calls=list(self._calls),
            usage=self._meter.usage if self._meter.requests else None,
            is_error=error is not None,
            error=error,
            transcript=self._trace.finished(),
        )

    async def _record_tool_call(
        self,
        context: AutoFunctionInvocationContext,
        next: Callable[[AutoFunctionInvocationContext], Awaitable[None]],
    ) -> None:
        call = context.function_call_content
        args = dict(call.parse_arguments() or {}) if call is not None else {}
        name = context.function.fully_qualified_name
        # Recorded when it starts, replaced by its outcome below: the list keeps call order even
        # when SK runs calls in parallel (and a later turn's list is a new one).
        calls, slot = self._calls, len(self._calls)
        calls.append(captured_call(name, args))
        trace = self._trace
        event = trace.add(
            "tool_call", id=call.id if call else None, name=name, args=args, start_ms=trace.now_ms()
        )
        answer = self._replay.answer(name, args) if self._replay is not None else None
        if answer is not None:
            self._answer_from_replay(context, answer, slot=slot, event=event)
            return
        errors: list[str] = []
        token = _TOOL_ERRORS.set(errors)
        started = time.perf_counter()
        try:
            await next(context)
        finally:
            duration_ms = (time.perf_counter() - started) * 1000
            _TOOL_ERRORS.reset(token)
        result = context.function_result
        value = result.value if result else None
        error = errors[0] if errors else None
        if error is None and isinstance(value, str) and value.startswith(_SK_FUNCTION_ERROR):
            error = value.split(": ", 1)[-1]
        output = None
        if error is None:
            output = result_value(value)
            if result is not None and _is_content_list(value):
                # SK would show the model the repr of MCP content objects; give it the text.
                result.value = output
        calls[slot] = captured_call(name, args, result=output, error=error, duration_ms=duration_ms)
        trace.update(event, result=output, error=error, duration_ms=round(duration_ms, 3))

    def _answer_from_replay(
        self,
        context: AutoFunctionInvocationContext,
        answer: Replayed | Refused,
        *,
        slot: int,
        event: int | None,
    ) -> None:
        """Give the model the recorded outcome (or the refusal) without running the tool, as SK
        itself would word a result or a failed call."""
        name = context.function.fully_qualified_name
        args = self._calls[slot].args
        result, error = (
            (answer.result, answer.error) if isinstance(answer, Replayed) else (None, answer.error)
        )
        text = f"{_SK_FUNCTION_ERROR}{name}: {error}" if error is not None else result
        context.function_result = FunctionResult(function=context.function.metadata, value=text)
        self._calls[slot] = captured_call(name, args, result=result, error=error)
        replayed = {"replayed": True} if isinstance(answer, Replayed) else {}
        self._trace.update(event, result=result, error=error, duration_ms=0.0, **replayed)


class UsageMeter:
    """Sums the ``usage`` of every chat-completion HTTP response seen by one httpx client, and
    writes each request of the current turn into its transcript: a ``model_call`` (model,
    timing, usage, finish reason, how many messages it sent) and the response's assistant
    text, or a ``retry`` for a request that failed."""

    def __init__(self) -> None:
        self.usage = TokenUsage.zero()
        self.requests = 0
        self.trace = TurnTrace()
        self.system_prompt: str | None = None
        # The session's requests as sent (one case per session): each model_call refers to it.
        self.log = RequestLog()
        self._started: dict[int, tuple[float, int, dict[str, Any] | None]] = {}
        self._failed = 0

    def reset(self) -> TurnTrace:
        """A new turn: zero usage and a new transcript (returned)."""
        self.usage = TokenUsage.zero()
        self.requests = 0
        self.trace = TurnTrace()
        self._started.clear()
        self._failed = 0
        return self.trace

    async def on_request(self, request: httpx.Request) -> None:
        if not request.url.path.endswith("/chat/completions"):
            return
        messages = 0
        sent_request: dict[str, Any] | None = None
        try:
            body = json.loads(request.content or b"{}")
            sent = body.get("messages") or []
            messages = len(sent)
            if self.system_prompt is None and sent and sent[0].get("role") in _SYSTEM_ROLES:
                self.system_prompt = _message_text(sent[0].get("content"))
            if isinstance(body, dict):
                sent_request = self.log.request(body, fmt="openai")
        except (ValueError, AttributeError, httpx.RequestNotRead):
            pass
        self._started[id(request)] = (self.trace.now_ms(), messages, sent_request)

    def unanswered(self) -> None:
        """Each request still waiting for its answer (the turn was stopped) as a model call
        with stop reason ``no answer``, its request kept (a later call builds on it)."""
        for start, messages, sent in self._started.values():
            params = sent.get("params") if sent is not None else None
            self.trace.add(
                "model_call",
                model=params.get("model") if isinstance(params, dict) else None,
                start_ms=start,
                duration_ms=round(self.trace.now_ms() - start, 3),
                stop_reason="no answer",
                attempt=self._failed + 1,
                messages=messages,
                **({"request": sent} if sent is not None else {}),
            )
        self._started.clear()

    async def on_response(self, response: httpx.Response) -> None:
        if not response.request.url.path.endswith("/chat/completions"):
            return
        start, messages, sent = self._started.pop(
            id(response.request), (self.trace.now_ms(), 0, None)
        )
        duration = round(self.trace.now_ms() - start, 3)
        request = {"request": sent} if sent is not None else {}
        if response.status_code >= 400:
            self._failed += 1
            await response.aread()
            error = f"HTTP {response.status_code}: {response.text[:500]}"
            self.trace.add("retry", error=error, start_ms=start, duration_ms=duration, **request)
            return
        if "json" not in response.headers.get("content-type", ""):
            return  # a streamed body cannot be read here without consuming it
        await response.aread()
        try:
            body = response.json()
        except ValueError:
            return
        if not isinstance(body, dict):
            return
        usage = body.get("usage")
        counted = openai_usage(usage) if isinstance(usage, dict) else None
        if counted is not None:
            self.requests += 1
            self.usage = self.usage + counted
        self._record_call(
            body, counted, start=start, duration=duration, messages=messages, request=request
        )

    def _record_call(
        self,
        body: dict[str, Any],
        usage: TokenUsage | None,
        *,
        start: float,
        duration: float,
        messages: int,
        request: dict[str, Any],
    ) -> None:
        choice = (body.get("choices") or [{}])[0] or {}
        self.trace.add(
            "model_call",
            model=body.get("model"),
            start_ms=start,
            duration_ms=duration,
            input_tokens=usage.prompt_tokens if usage else None,
            output_tokens=usage.completion_tokens if usage else None,
            cached_tokens=usage.cache_read_tokens if usage else None,
            stop_reason=choice.get("finish_reason"),
            attempt=self._failed + 1,
            messages=messages,
            **request,
            response=capped_json(body, RESPONSE_CAP),
        )
        self._failed = 0
        text = _message_text((choice.get("message") or {}).get("content"))
        if text:
            self.trace.add("assistant", text=text)


_SYSTEM_ROLES = ("system", "developer")


def _message_text(content: Any) -> str | None:
    """A chat message's content as text (a string, or the text parts of a list)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "".join(parts)
    return None


def openai_usage(usage: dict[str, Any]) -> TokenUsage:
    """OpenAI ``usage`` -> TokenUsage; ``cached_tokens`` (part of prompt_tokens) are cache
    reads."""
    details = usage.get("prompt_tokens_details") or {}
    return TokenUsage.counted(
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
        cache_read_tokens=int(details.get("cached_tokens") or 0),
    )


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The certificate store every session's httpx client verifies with, loaded once per process
    as httpx would load it (certifi, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``): loading it took
    18 of the 22 ms a session took to open (benchmarks/sk_session_bench.py)."""
    return httpx.create_ssl_context()


def chat_service(model: Any, http: httpx.AsyncClient) -> ChatCompletionClientBase:
    """The one chat service of a session, talking through the session's httpx client."""
    if model.provider == "azure_openai":
        if not model.endpoint:
            raise BackendError("model.endpoint is required for provider azure_openai")
        # openai>=3 is built on httpx2 and still takes an httpx client (typed as httpx2 only).
        azure = AsyncAzureOpenAI(  # type: ignore[call-overload]
            azure_endpoint=model.endpoint,
            api_key=model.api_key,
            api_version=model.api_version or "2024-10-21",
            http_client=http,
            max_retries=HTTP_MAX_RETRIES,
        )
        return AzureChatCompletion(
            deployment_name=model.name,
            # Requests go through `azure` above; SK's settings only validate this URL, and insist
            # on https (a local gateway or test double may be plain http).
            endpoint=model.endpoint if model.endpoint.startswith("https://") else None,
            api_key=model.api_key,
            api_version=model.api_version or "2024-10-21",
            async_client=azure,
        )
    endpoint = model.endpoint
    api_key = model.api_key
    if model.provider == "ollama":
        endpoint = endpoint or OLLAMA_DEFAULT_ENDPOINT
        api_key = api_key or "ollama"  # Ollama ignores the key; the client insists on one
    client = AsyncOpenAI(
        api_key=api_key,
        base_url=endpoint,
        http_client=http,  # type: ignore[arg-type]
        max_retries=HTTP_MAX_RETRIES,
    )
    return OpenAIChatCompletion(ai_model_id=model.name, api_key=api_key, async_client=client)


def execution_settings(
    service: ChatCompletionClientBase, model: Any, kernel: Kernel
) -> PromptExecutionSettings:
    """Sampling options from the model config; auto function calling when there are tools."""
    options: dict[str, Any] = {}
    for name in ("temperature", "max_tokens", "top_p"):
        value = getattr(model, name, None)
        if value is not None:
            options[name] = value
    settings = service.get_prompt_execution_settings_class()(**options)
    if kernel.plugins:
        settings.function_choice_behavior = FunctionChoiceBehavior.Auto()
    return settings


def python_kernel_function(tool: Any, plugin: str) -> KernelFunctionFromMethod:
    """A kernel function that runs the tool's python callable, with its real JSON schema."""
    fn = tool.callable
    schema = function_tools.function_tool_schema(fn)
    required = set(schema.get("required", []))

    async def invoke(**kwargs: Any) -> Any:
        result, error = await function_tools.call_function_tool(fn, kwargs)
        if error is not None:
            errors = _TOOL_ERRORS.get()
            if errors is not None:
                errors.append(error)
            raise ToolFailedError(error)
        return result

    description = function_tools.function_description(fn, getattr(tool, "description", None))
    method = kernel_function(name=tool.name, description=description)(invoke)
    parameters = [
        KernelParameterMetadata(
            name=name,
            description=prop.get("description"),
            default_value=prop.get("default"),
            type="object",
            is_required=name in required,
            schema_data=prop,
        )
        for name, prop in schema["properties"].items()
    ]
    returns = KernelParameterMetadata(name="return", type="object", schema_data={})
    return KernelFunctionFromMethod(
        method=method, plugin_name=plugin, parameters=parameters, return_parameter=returns
    )


async def connect_mcp_plugin(plugin: MCPPluginBase, name: str, timeout: float) -> None:
    """``plugin.connect()``, but failing fast when the server dies during the handshake.

    SK's connect() waits for a "ready" event that its connection task never sets when
    ``initialize`` fails (a server that exits at once, a bad command): it would hang forever.
    So wait for either side, bounded by ``timeout``.
    """
    connecting = asyncio.create_task(plugin.connect())
    deadline = time.monotonic() + timeout
    while not connecting.done() and time.monotonic() < deadline:
        await asyncio.wait({connecting}, timeout=0.05)
        inner: asyncio.Task[None] | None = getattr(plugin, "_current_task", None)
        if inner is not None and inner.done() and not connecting.done():
            connecting.cancel()
            cause = inner.exception() if not inner.cancelled() else None
            detail = f": {function_tools.error_text(cause.__cause__ or cause)}" if cause else ""
            raise BackendError(f"MCP server {name!r} failed during its handshake{detail}")
    if not connecting.done():
        connecting.cancel()
        inner = getattr(plugin, "_current_task", None)
        if inner is not None:
            inner.cancel()
            plugin._current_task = None  # so close() does not wait on it
        raise BackendError(f"MCP server {name!r} did not connect within {timeout:g}s")
    connecting.result()


def mcp_plugin(tool: Any, base_dir: Any, *, request_timeout: float) -> MCPPluginBase:
    """An SK MCP plugin for an McpTool; a stdio server starts in the agent directory."""
    # lazy: SK's MCP connectors cost ~0.5 s more at import; only agents with MCP tools need them
    from semantic_kernel.connectors.mcp import MCPStdioPlugin, MCPStreamableHttpPlugin

    if tool.transport == "http":
        return MCPStreamableHttpPlugin(
            name=tool.name,
            url=tool.url,
            headers=dict(tool.headers or {}) or None,
            description=tool.description,
            load_prompts=False,
            request_timeout=int(request_timeout),
        )
    return MCPStdioPlugin(
        name=tool.name,
        command=tool.command,
        args=list(tool.args or []),
        env=dict(tool.env or {}) or None,
        description=tool.description,
        load_prompts=False,
        request_timeout=int(request_timeout),
        cwd=str(base_dir),
    )


def _is_content_list(value: Any) -> bool:
    return (
        isinstance(value, list) and bool(value) and all(isinstance(v, TextContent) for v in value)
    )


def result_value(value: Any) -> Any:
    """A JSON-safe form of a function result (MCP results arrive as SK content lists)."""
    if _is_content_list(value):
        value = "\n".join(v.text for v in value)
    elif isinstance(value, TextContent):
        value = value.text
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value
