"""pydantic's validation errors as ConfigProblems: a YAML-like field path
(``turns[2].expected_tools[1].args.a``) and a message a person reads."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from runs.core.agentconfig.common import SPEC_ERROR, UNION_TAGS, join_path
from runs.core.agentconfig.errors import ConfigProblem

# A value shown in a message is cut to this many characters.
MAX_SHOWN = 60


def problems_from_validation(
    exc: ValidationError, *, file: str, test_case: str | None
) -> list[ConfigProblem]:
    """One ConfigProblem per pydantic error, with YAML-like field paths and a human message."""
    problems = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        path = loc_to_path(loc)
        ctx = error.get("ctx") or {}
        if error["type"] == SPEC_ERROR:
            path = join_path(path, str(ctx.get("subpath", "")))
        turn = loc[1] if len(loc) > 1 and loc[0] == "turns" and isinstance(loc[1], int) else None
        if test_case is None:
            turn = None
        problems.append(ConfigProblem(file, test_case, turn, path, _message(error)))
    return problems


def loc_to_path(loc: tuple[Any, ...]) -> str:
    """A pydantic location as a YAML-like path, without union tags.

    ``('turns', 2, 'expected_tools', 1, 'tool-object', 'args', 'a')`` ->
    ``turns[2].expected_tools[1].args.a``.
    """
    path = ""
    after_index = False
    for item in loc:
        if isinstance(item, int):
            path += f"[{item}]"
            after_index = True
            continue
        if after_index and item in UNION_TAGS:
            after_index = False
            continue  # the tag pydantic adds for a discriminated union member
        after_index = False
        path = join_path(path, str(item))
    return path


def _message(error: Any) -> str:
    kind = error["type"]
    if kind == SPEC_ERROR:
        return str((error.get("ctx") or {}).get("message", error["msg"]))
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field"
    message = str(error["msg"])
    if kind in ("value_error", "assertion_error"):
        return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind in ("metric_type", "tool_type", "expected_tool") or "input" not in error:
        return message
    return f"{message}, got {_shown(error['input'])}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."
