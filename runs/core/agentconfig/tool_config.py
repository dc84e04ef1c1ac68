"""The ``tools`` of agent.yaml: python function tools and MCP servers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BeforeValidator,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from runs.core.agentconfig.common import (
    StrictModel,
    context_base_dir,
    context_resolver,
    local_path,
    spec_error,
)
from runs.core.agentconfig.resolve import ResolveError

TOOL_NAME_RE = re.compile(r"^[0-9A-Za-z_]+$")


class _ToolBase(StrictModel):
    holodeck_ignored: ClassVar[dict[str, str]] = {"defer_loading": "every tool is loaded"}

    name: str
    description: str = ""
    # HoloDeck 0.7.1
    defer_loading: bool | None = None

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not TOOL_NAME_RE.match(value):
            raise ValueError(f"tool name {value!r} may only use letters, digits and _")
        return value


class FunctionTool(_ToolBase):
    """A Python function in a file of the agent directory; its schema comes from the signature."""

    holodeck_ignored: ClassVar[dict[str, str]] = {
        **_ToolBase.holodeck_ignored,
        "parameters": "the schema comes from the function's signature",
    }

    type: Literal["function"] = "function"
    file: str
    function: str
    parameters: dict[str, Any] | None = None  # HoloDeck 0.7.1
    _callable: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _resolve(self, info: ValidationInfo) -> Self:
        resolver = context_resolver(info)
        if resolver is None:
            return self
        try:
            self._callable = resolver.function(self.file, self.function)
        except ResolveError as exc:
            raise spec_error(str(exc), "function" if exc.part == "attribute" else "file") from None
        return self

    @property
    def callable(self) -> Any:
        if self._callable is None:
            raise RuntimeError(f"tool {self.name!r} not resolved: load the agent with load_agent()")
        return self._callable


class McpTool(_ToolBase):
    """An MCP server: stdio (``command`` + ``args`` + ``env``) or http (``url`` + ``headers``).

    HoloDeck's ``env_file`` is honoured: its ``KEY=VALUE`` lines (relative to the agent
    directory) are read at load into ``env``, the values of ``env`` winning.
    """

    holodeck_ignored: ClassVar[dict[str, str]] = {
        **_ToolBase.holodeck_ignored,
        "config": "",
        "encoding": "",
        "load_prompts": "MCP prompts are not used",
        "load_tools": "the server's tools are always loaded",
        "registry_name": "",
        "request_timeout": "execution.llm_timeout bounds a turn",
        "sse_read_timeout": "",
        "terminate_on_close": "",
        "timeout": "execution.llm_timeout bounds a turn",
    }

    type: Literal["mcp"] = "mcp"
    transport: Literal["stdio", "http"] = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # The tool's output counts as retrieval context for RAG metrics.
    is_retrieval: bool = False
    # HoloDeck 0.7.1
    env_file: str | None = None
    config: dict[str, Any] | None = None
    encoding: str | None = None
    load_prompts: bool | None = None
    load_tools: bool | None = None
    registry_name: str | None = None
    request_timeout: int | None = None
    sse_read_timeout: float | None = None
    terminate_on_close: bool | None = None
    timeout: float | None = None

    @field_validator("transport", mode="before")
    @classmethod
    def _runnable_transport(cls, value: Any) -> Any:
        if value in ("sse", "websocket"):
            raise ValueError(
                f"MCP transport {value!r} is not supported by HoloDeck Web; use stdio or http"
            )
        return value

    @field_validator("args", "env", "headers", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:  # HoloDeck writes these as null
            return [] if info.field_name == "args" else {}
        return value

    @model_validator(mode="after")
    def _transport_fields(self) -> Self:
        if self.transport == "stdio" and not self.command:
            raise spec_error("a stdio MCP server needs 'command'", "command")
        if self.transport == "http" and not self.url:
            raise spec_error("an http MCP server needs 'url'", "url")
        return self

    @model_validator(mode="after")
    def _read_env_file(self, info: ValidationInfo) -> Self:
        base_dir = context_base_dir(info)
        if self.env_file is None or base_dir is None:
            return self
        path = local_path(base_dir, self.env_file)
        try:
            values = parse_env_file(path)
        except FileNotFoundError:
            raise spec_error(f"env_file {self.env_file!r} was not found", "env_file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise spec_error(f"cannot read {self.env_file!r}: {exc}", "env_file") from None
        self.env = {**values, **self.env}
        return self


def parse_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export`` and quotes allowed; blank and ``#`` lines skipped)."""
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if key.strip():
            values[key.strip()] = value
    return values


# HoloDeck tool types HoloDeck Web cannot run.
UNSUPPORTED_TOOL_TYPES = ("vectorstore", "prompt", "hierarchical_document")


def _refuse_unsupported(value: Any) -> Any:
    kind = value.get("type") if isinstance(value, dict) else None
    if kind in UNSUPPORTED_TOOL_TYPES:
        name = value.get("name")
        shown = f"tool {name!r}: " if isinstance(name, str) else ""
        raise spec_error(
            f"{shown}tool type {kind!r} is not supported by HoloDeck Web; "
            "remove it or replace it with an mcp tool",
            "type",
        )
    return value


def _tool_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if isinstance(kind, str) else None


Tool = Annotated[
    Annotated[FunctionTool, Tag("function")] | Annotated[McpTool, Tag("mcp")],
    Discriminator(
        _tool_tag,
        custom_error_type="tool_type",
        custom_error_message="a tool needs 'type': function or mcp",
    ),
    BeforeValidator(_refuse_unsupported),
]


def duplicate_tool_names(names: list[Any]) -> list[tuple[str, str]]:
    """(field path, message) for every tool name already used by an earlier tool."""
    seen: dict[Any, int] = {}
    problems: list[tuple[str, str]] = []
    for index, name in enumerate(names):
        if not isinstance(name, str):
            continue
        if name in seen:
            problems.append(
                (f"tools[{index}].name", f"duplicate tool name {name!r} (also tools[{seen[name]}])")
            )
        else:
            seen[name] = index
    return problems
