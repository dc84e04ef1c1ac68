"""The LLM blocks of agent.yaml: ``model`` (also a judge's), ``instructions`` and ``claude``."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import PrivateAttr, ValidationInfo, field_validator, model_validator

from runs.core.agentconfig.common import (
    NotedModel,
    StrictModel,
    context_base_dir,
    exists_if_local,
    local_path,
    not_blank,
    spec_error,
)
from runs.core.agentconfig.compat import ignored
from runs.core.agentconfig.holodeck import (
    BashConfig,
    ExtendedThinkingConfig,
    FileSystemConfig,
    SubagentSpec,
)
from runs.core.agentconfig.limits import ClaudeTurns, LatencyMs, Temperature, TokenCount, TopP

Provider = Literal["openai", "azure_openai", "anthropic", "ollama", "scripted"]
AuthProvider = Literal["api_key", "oauth_token", "bedrock", "vertex", "foundry", "custom"]


class ModelConfig(NotedModel):
    """An LLM: the agent's model, or a judge model for evaluations."""

    provider: Provider
    name: Annotated[str, not_blank("model name")]
    temperature: Temperature | None = None
    max_tokens: TokenCount | None = None
    top_p: TopP | None = None
    endpoint: str | None = None
    api_key: str | None = None
    api_version: str | None = None
    # HoloDeck: how the provider authenticates. Only "api_key" (model.api_key, else the
    # provider's usual environment variable) is what HoloDeck Web does.
    auth_provider: AuthProvider | None = None
    # scripted provider only
    transcript: str | None = None
    latency_ms: LatencyMs = 0

    @model_validator(mode="after")
    def _auth_provider(self) -> Self:
        if self.auth_provider not in (None, "api_key"):
            self.compat_note(
                "auth_provider",
                ignored(
                    f"{self.auth_provider!r}: credentials come from api_key or the provider's "
                    "environment variables, e.g. CLAUDE_CODE_USE_BEDROCK or "
                    "CLAUDE_CODE_OAUTH_TOKEN for anthropic"
                ),
            )
        return self

    @model_validator(mode="after")
    def _scripted_fields(self, info: ValidationInfo) -> Self:
        if self.provider != "scripted":
            if self.transcript is not None:
                raise spec_error("transcript is only for provider 'scripted'", "transcript")
            if self.latency_ms:
                raise spec_error("latency_ms is only for provider 'scripted'", "latency_ms")
            return self
        if not exists_if_local(info, self.transcript):
            raise spec_error(f"transcript file {self.transcript!r} was not found", "transcript")
        return self


class Instructions(StrictModel):
    """The system prompt: ``inline`` text or a ``file`` relative to the agent directory."""

    inline: str | None = None
    file: str | None = None
    _text: str | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _bare_string_is_inline(cls, data: Any) -> Any:
        return {"inline": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _exactly_one(self, info: ValidationInfo) -> Self:
        if (self.inline is None) == (self.file is None):
            raise spec_error("give exactly one of 'inline' or 'file'")
        base_dir = context_base_dir(info)
        if self.file is not None and base_dir is not None:
            path = local_path(base_dir, self.file)
            try:
                self._text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise spec_error(f"instructions file {self.file!r} was not found", "file") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise spec_error(f"cannot read {self.file!r}: {exc}", "file") from None
        return self

    @property
    def text(self) -> str:
        """The prompt text (for ``file``, as read at load)."""
        if self.inline is not None:
            return self.inline
        if self._text is None:
            raise RuntimeError("instructions file not read: load the agent with load_agent()")
        return self._text


# HoloDeck's permission modes, as run here: "manual" is the default (tools outside the allowed
# list are denied, never prompted); "acceptAll" runs as "acceptEdits" (with a warning).
_HOLODECK_PERMISSION_MODES = {"manual": "default", "acceptAll": "acceptEdits"}


class ClaudeConfig(NotedModel):
    """Options of the claude_agent_sdk backend (provider anthropic).

    HoloDeck's own options are accepted too: ``extended_thinking`` sets ``max_thinking_tokens``;
    ``bash``, ``file_system`` and ``web_search`` add the built-in tools they enable to
    ``allowed_tools`` (``bash.excluded_commands`` to ``disallowed_tools``); the rest has no
    effect here (``holodeck_ignored``).
    """

    holodeck_ignored: ClassVar[dict[str, str]] = {
        "agents": "subagents are not run",
        "disable_default_hooks": "",
        "disable_subprocess_env_scrub": "the CLI inherits the server's environment",
        "effort": "",
        "fallback_model": "",
        "i_understand_this_is_unsafe": "",
        "max_budget_usd": "",
        "max_concurrent_sessions": "execution.parallel_test_cases bounds concurrency",
        "session_memory_estimate_mib": "",
        "setting_sources": "user and project settings are never loaded",
        "working_directory": "the CLI runs in the agent directory",
    }

    max_turns: ClaudeTurns | None = None
    allowed_tools: list[str] | None = None
    disallowed_tools: list[str] | None = None
    permission_mode: Literal["default", "acceptEdits", "plan", "manual", "acceptAll"] = "default"
    max_thinking_tokens: TokenCount | None = None
    append_system_prompt: str | None = None
    # HoloDeck 0.7.1
    extended_thinking: ExtendedThinkingConfig | None = None
    bash: BashConfig | None = None
    file_system: FileSystemConfig | None = None
    web_search: bool | None = None
    agents: dict[str, SubagentSpec] | None = None
    disable_default_hooks: bool | None = None
    disable_subprocess_env_scrub: bool | None = None
    effort: Literal["low", "medium", "high", "max"] | None = None
    fallback_model: str | None = None
    i_understand_this_is_unsafe: bool | None = None
    max_budget_usd: float | None = None
    max_concurrent_sessions: int | None = None
    session_memory_estimate_mib: int | None = None
    setting_sources: list[Literal["user", "project", "local", "all"]] | None = None
    working_directory: str | None = None

    @field_validator("permission_mode", mode="before")
    @classmethod
    def _no_bypass(cls, value: Any) -> Any:
        if value == "bypassPermissions":
            raise ValueError("permission_mode 'bypassPermissions' is not allowed")
        return value

    @model_validator(mode="after")
    def _holodeck_options(self) -> Self:
        mode = self.permission_mode
        if mode in _HOLODECK_PERMISSION_MODES:
            self.permission_mode = _HOLODECK_PERMISSION_MODES[mode]  # type: ignore[assignment]
            if mode == "acceptAll":
                self.compat_note(
                    "permission_mode",
                    "'acceptAll' runs as 'acceptEdits' in HoloDeck Web: tools outside "
                    "allowed_tools are denied",
                )
        thinking = self.extended_thinking
        if thinking is not None and thinking.enabled and self.max_thinking_tokens is None:
            self.max_thinking_tokens = thinking.budget_tokens or 10000
        enabled: list[str] = []
        if self.bash is not None and self.bash.enabled:
            enabled.append("Bash")
            excluded = [f"Bash({command}:*)" for command in self.bash.excluded_commands or []]
            self.disallowed_tools = _merged(self.disallowed_tools, excluded)
            if self.bash.allow_unsafe is not None:
                self.compat_note("bash.allow_unsafe", ignored())
        if self.file_system is not None:
            fs = self.file_system
            enabled += ["Read", "Glob", "Grep"] if fs.read else []
            enabled += ["Write"] if fs.write else []
            enabled += ["Edit"] if fs.edit else []
        if self.web_search:
            enabled.append("WebSearch")
        if enabled:
            self.allowed_tools = _merged(self.allowed_tools, enabled)
        return self


def _merged(names: list[str] | None, more: list[str]) -> list[str] | None:
    if not more:
        return names
    return list(dict.fromkeys([*(names or []), *more]))
