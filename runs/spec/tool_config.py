"""The ``tools`` of agent.yaml: python function tools and MCP servers."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Self

from pydantic import (
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from runs.spec.common import StrictModel, context_resolver, spec_error
from runs.spec.resolve import ResolveError

TOOL_NAME_RE = re.compile(r"^[0-9A-Za-z_]+$")


class _ToolBase(StrictModel):
    name: str
    description: str = ""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not TOOL_NAME_RE.match(value):
            raise ValueError(f"tool name {value!r} may only use letters, digits and _")
        return value


class FunctionTool(_ToolBase):
    """A Python function in a file of the agent directory; its schema comes from the signature."""

    type: Literal["function"] = "function"
    file: str
    function: str
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
    """An MCP server: stdio (``command`` + ``args`` + ``env``) or http (``url`` + ``headers``)."""

    type: Literal["mcp"] = "mcp"
    transport: Literal["stdio", "http"] = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # The tool's output counts as retrieval context for RAG metrics.
    is_retrieval: bool = False

    @model_validator(mode="after")
    def _transport_fields(self) -> Self:
        if self.transport == "stdio" and not self.command:
            raise spec_error("a stdio MCP server needs 'command'", "command")
        if self.transport == "http" and not self.url:
            raise spec_error("an http MCP server needs 'url'", "url")
        return self


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
