"""The LLM blocks of agent.yaml: ``model`` (also a judge's), ``instructions`` and ``claude``."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import PrivateAttr, ValidationInfo, field_validator, model_validator

from runs.spec.common import (
    StrictModel,
    context_base_dir,
    exists_if_local,
    local_path,
    non_empty,
    spec_error,
)
from runs.spec.limits import ClaudeTurns, LatencyMs, Temperature, TokenCount, TopP

Provider = Literal["openai", "azure_openai", "anthropic", "ollama", "scripted"]


class ModelConfig(StrictModel):
    """An LLM: the agent's model, or a judge model for evaluations."""

    provider: Provider
    name: str
    temperature: Temperature | None = None
    max_tokens: TokenCount | None = None
    top_p: TopP | None = None
    endpoint: str | None = None
    api_key: str | None = None
    api_version: str | None = None
    # scripted provider only
    transcript: str | None = None
    latency_ms: LatencyMs = 0

    @field_validator("name")
    @classmethod
    def _name_not_empty(cls, value: str) -> str:
        non_empty(value, "model name")
        return value

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


class ClaudeConfig(StrictModel):
    """Options of the claude_agent_sdk backend (provider anthropic)."""

    max_turns: ClaudeTurns | None = None
    allowed_tools: list[str] | None = None
    disallowed_tools: list[str] | None = None
    permission_mode: Literal["default", "acceptEdits", "plan"] = "default"
    max_thinking_tokens: TokenCount | None = None
    append_system_prompt: str | None = None

    @field_validator("permission_mode", mode="before")
    @classmethod
    def _no_bypass(cls, value: Any) -> Any:
        if value == "bypassPermissions":
            raise ValueError("permission_mode 'bypassPermissions' is not allowed")
        return value
