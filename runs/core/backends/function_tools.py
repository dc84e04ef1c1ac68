"""Calling the agent's python function tools, and describing them as JSON schema.

Every backend (scripted, semantic_kernel, claude_agent_sdk) runs the same python callables the
loader resolved from ``tools[].file`` / ``tools[].function``. These helpers keep the calling
convention (sync or async, errors as ``"ExcType: message"``) and the schema the model sees
identical across backends.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import re
import threading
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union, get_args, get_origin

from graders.result import error_text

_JSON_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


async def call_function_tool(
    fn: Callable[..., Any], args: dict[str, Any]
) -> tuple[Any, str | None]:
    """Call a tool with keyword arguments; return ``(result, None)`` or ``(None, error)``.

    Coroutine functions are awaited; plain functions run in a worker thread so a slow tool
    cannot block the event loop that drives the other sessions. A tool exception is a tool
    error (the model sees it), never a crash of the turn.
    """
    try:
        if inspect.iscoroutinefunction(fn):
            result = await fn(**args)
        else:
            result = await call_in_daemon_thread(fn, args)
            if inspect.isawaitable(result):
                result = await result
    except Exception as exc:
        return None, error_text(exc)
    return result, None


async def call_in_daemon_thread(fn: Callable[..., Any], args: dict[str, Any]) -> Any:
    """Run a blocking tool in a daemon thread of its own.

    Not the default executor: its threads are joined when ``asyncio.run`` ends, so a tool that
    hangs past ``llm_timeout`` would keep the CLI (or a worker's case task) from finishing. A
    daemon thread is abandoned instead; the turn has already been recorded as timed out.
    """
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[tuple[bool, Any]] = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if not outcome.done():  # the turn timed out and stopped waiting
            outcome.set_result((ok, value))

    def work() -> None:
        try:
            report: tuple[bool, Any] = (True, context.run(fn, **args))
        except BaseException as exc:  # a tool's SystemExit must not kill the worker
            report = (False, exc)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, *report)

    threading.Thread(
        target=work, name=f"tool:{getattr(fn, '__name__', 'tool')}", daemon=True
    ).start()
    ok, value = await outcome
    if not ok:
        if isinstance(value, Exception):
            raise value
        raise RuntimeError(f"the tool raised {type(value).__name__}: {value}")
    return value


def function_group_name(mcp_tool_names: list[str]) -> str:
    """Plugin/server name of the python tools: ``tools``, unless an MCP tool is named so."""
    return "tools" if "tools" not in mcp_tool_names else "python_tools"


def function_tool_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The JSON schema (``type: object``) of a callable's parameters.

    Types come from the annotations, descriptions from a Google/NumPy/Sphinx style docstring,
    ``required`` from parameters without a default. ``*args``/``**kwargs`` are not described.
    """
    signature = inspect.signature(fn)
    hints = _type_hints(fn)
    docs = parameter_docs(inspect.getdoc(fn) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(name, param.annotation)
        schema = type_schema(annotation)
        if name in docs:
            schema["description"] = docs[name]
        if param.default is param.empty:
            required.append(name)
        elif _json_safe(param.default):
            schema["default"] = param.default
        properties[name] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        result["required"] = required
    return result


def function_description(fn: Callable[..., Any], configured: str | None = None) -> str:
    """The tool description: the configured one, else the docstring's summary paragraph."""
    if configured:
        return configured
    doc = inspect.getdoc(fn) or ""
    return doc.split("\n\n", 1)[0].strip()


def type_schema(annotation: Any) -> dict[str, Any]:
    """JSON schema of one python annotation; unknown or missing annotations allow anything."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    if annotation in _JSON_SCALARS:
        return {"type": _JSON_SCALARS[annotation]}
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is typing.Annotated:
        schema = type_schema(args[0])
        text = next((a for a in args[1:] if isinstance(a, str)), None)
        if text:
            schema["description"] = text
        return schema
    if origin is Union or origin is types.UnionType:
        return _union_schema(args)
    if origin is Literal:
        return {"enum": list(args)}
    if annotation in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset):
        return _array_schema(args)
    if annotation is dict or origin is dict:
        return {"type": "object"}
    return {}


def _union_schema(args: tuple[Any, ...]) -> dict[str, Any]:
    options = [a for a in args if a is not type(None)]
    if len(options) != 1:
        return {"anyOf": [type_schema(option) for option in options]}
    schema = type_schema(options[0])
    if len(options) < len(args) and isinstance(schema.get("type"), str):
        # Optional[X]: the model may pass null.
        schema["type"] = [schema["type"], "null"]
    return schema


def _array_schema(args: tuple[Any, ...]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array"}
    item_types = [a for a in args if a is not Ellipsis]
    if len(item_types) == 1:
        schema["items"] = type_schema(item_types[0])
    return schema


def _type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    # String annotations (from __future__ import annotations in the tool file) need resolving;
    # a tool file with an unresolvable hint still gets a schema, just a looser one.
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:
        return {}


def _json_safe(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params)\s*:?\s*$", re.IGNORECASE)
_OTHER_SECTION = re.compile(
    r"^(Returns?|Raises|Yields|Examples?|Notes?|See Also|Attributes)\s*:?\s*$", re.IGNORECASE
)
_GOOGLE_ITEM = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ITEM = re.compile(r"^:param\s+(?:[\w\[\], .|]+\s+)?(\w+)\s*:\s*(.*)$")


def parameter_docs(doc: str) -> dict[str, str]:
    """Parameter descriptions from a docstring (Google ``Args:``, Sphinx ``:param x:``, NumPy)."""
    found = _sphinx_docs(doc)
    found.update({k: v for k, v in _section_docs(doc).items() if k not in found})
    return found


def _sphinx_docs(doc: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in doc.splitlines():
        match = _SPHINX_ITEM.match(line.strip())
        if match:
            found[match.group(1)] = match.group(2).strip()
    return found


def _section_docs(doc: str) -> dict[str, str]:
    found: dict[str, str] = {}
    in_section = False
    current: str | None = None
    item_indent = 0
    for raw in doc.splitlines():
        line = raw.strip()
        indent = len(raw) - len(raw.lstrip())
        if _SECTION.match(line):
            in_section, current = True, None
            continue
        if _OTHER_SECTION.match(line):
            in_section = False
        if not in_section or not line or set(line) == {"-"}:
            continue
        item = _GOOGLE_ITEM.match(line)
        if item and (current is None or indent <= item_indent):
            current, item_indent = item.group(1).lstrip("*"), indent
            # NumPy's "name : type" line carries the type, the description follows below it.
            numpy_style = re.match(r"^\w+ : ", line) is not None
            found[current] = "" if numpy_style else item.group(3).strip()
        elif current is not None:
            # A continuation line (Google) or the description under "name : type" (NumPy).
            found[current] = f"{found[current]} {line}".strip()
    return found
