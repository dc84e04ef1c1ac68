"""The one protocol every agent backend implements, and the provider -> backend registry.

A backend turns a loaded agent into sessions. A session is one conversation: the engine sends
the turns of one test case in order on it, then closes it (on every outcome). Backends are
registered by dotted path and imported on first use, so the web process never pays for
semantic_kernel or claude_agent_sdk imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from graders.matchers import json_safe
from runs.core.wire.models import TokenUsage, ToolInvocation

if TYPE_CHECKING:
    from runs.core.agentconfig.loader import LoadedAgent


@dataclass
class TurnOutput:
    """What one ``send`` produced. ``is_error`` marks a session-level failure of this turn.

    Tool calls and usage are already the report's types: a backend records a call with
    :func:`captured_call` and its usage with ``TokenUsage.counted``.
    """

    response: str | None
    tool_calls: list[ToolInvocation] = field(default_factory=list)
    usage: TokenUsage | None = None
    is_error: bool = False
    error: str | None = None
    # What the turn did as the SDK reported it (``runs.core.wire.transcripts`` events: model calls,
    # assistant texts, tool calls and results, retries), from a ``TurnTrace``; None: none kept.
    transcript: list[dict[str, Any]] | None = None


def captured_call(
    name: str,
    args: Mapping[str, Any],
    *,
    result: Any = None,
    error: str | None = None,
    duration_ms: float = 0.0,
) -> ToolInvocation:
    """One tool call as the backend observed it. Args and result are made JSON-safe here, where
    they are captured, so assertions, graders and the stored report all see the same values."""
    return ToolInvocation(
        name=name,
        args=json_safe(dict(args)),
        result=json_safe(result),
        error=error,
        duration_ms=round(duration_ms, 3),
    )


class AgentSession(Protocol):
    """One conversation. A session may also carry ``system_prompt: str | None``, the
    instructions it actually gave its model (the engine records them in the case's first
    turn's transcript; a session without the attribute is taken to send the agent's own), and
    ``partial_transcript() -> list[dict]``, the current turn's events so far (the engine
    records them on a turn it stopped at ``llm_timeout``)."""

    async def send(self, message: str) -> TurnOutput: ...

    async def close(self) -> None: ...


class AgentBackend(Protocol):
    """Builds sessions. A backend whose sessions are slow to start (a process per session) sets
    the class attribute ``costly_start = True``: the engine then opens the sessions of a run's
    next cases while the current ones run (``runs.core.engine.sessions``). Each session is still
    made for one case (``case_name``/``case_index``) and used by that case only. A backend may
    also have ``session_scope()``, an async context manager ``Engine.run`` holds for the whole
    run: inside it a finished case's resources may serve a later case, each case still on a
    conversation of its own (the Claude backend's processes: ``runs.core.backends.claude_reuse``).
    A worker holds ``session_scope(key=<run id>)`` around each case instead, and a backend that
    keeps resources past such a scope also has ``sessions_kept(key)`` and ``async
    sessions_close(key)`` (``runs.services.warm_sessions``)."""

    async def create_session(self, *, case_name: str | None, case_index: int) -> AgentSession: ...


class BackendError(Exception):
    """A backend could not be created or a session could not be opened."""


# provider -> "module:factory"; a factory takes (agent: LoadedAgent) and returns an AgentBackend.
BACKENDS: dict[str, str] = {
    "openai": "runs.core.backends.semantic_kernel:SemanticKernelBackend",
    "azure_openai": "runs.core.backends.semantic_kernel:SemanticKernelBackend",
    "ollama": "runs.core.backends.semantic_kernel:SemanticKernelBackend",
    "anthropic": "runs.core.backends.claude_agent_sdk:ClaudeAgentBackend",
    "scripted": "runs.core.backends.scripted:ScriptedBackend",
}


def backend_for(agent: LoadedAgent, **options: Any) -> AgentBackend:
    """Import (on first use) and build the backend registered for the agent's provider."""
    provider = agent.config.model.provider
    try:
        dotted = BACKENDS[provider]
    except KeyError as exc:
        raise BackendError(f"no backend is registered for provider {provider!r}") from exc
    module_name, _, attr = dotted.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    backend: AgentBackend = factory(agent, **options)
    return backend


def backends_preload(providers: list[str]) -> list[str]:
    """Import the backends of ``providers`` now (a worker's main process, before it starts its
    pool processes): the modules they import are then shared, and no case waits for them. The
    modules imported; a provider with no backend is left out."""
    modules = sorted({BACKENDS[p].partition(":")[0] for p in providers if p in BACKENDS})
    for name in modules:
        importlib.import_module(name)
    return modules
