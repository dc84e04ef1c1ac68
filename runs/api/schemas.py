"""Shared API schemas."""

from __future__ import annotations

from typing import Annotated, Any

from ninja import Schema
from ninja.pagination import LimitOffsetPagination
from pydantic import AfterValidator, Field, StringConstraints

from runs.core.agentconfig.errors import ConfigError
from runs.core.queryvalues import MAX_INT, MAX_TEXT, parse_text


class ErrorOut(Schema):
    """Every error: ``{"detail": ...}`` (a message, or a list of field errors for 422)."""

    detail: str | list[dict[str, object]]


# --- safe query values ------------------------------------------------------------------------
# Validated before they reach the database: a NUL character (PostgreSQL refuses it) or an
# integer beyond 64 bits is a 422 naming the parameter, never a 500.

MAX_ID = MAX_INT
# Pages of a list: a limit the database's LIMIT holds and an offset well inside 64 bits (SQLite
# answers "datatype mismatch" to an OFFSET of 2^63 or more).
MAX_LIMIT = 1000
MAX_OFFSET = 10_000_000


def _safe_text(value: str) -> str:
    return parse_text(value, max_length=MAX_TEXT)  # its QueryValueError is a ValueError: 422


SafeText = Annotated[str, StringConstraints(max_length=MAX_TEXT), AfterValidator(_safe_text)]
Id = Annotated[int, Field(ge=1, le=MAX_ID)]


class BoundedPagination(LimitOffsetPagination):
    """``limit``/``offset`` with bounds the schema documents and the database holds."""

    class Input(Schema):
        limit: int = Field(100, ge=1, le=MAX_LIMIT, description=f"at most {MAX_LIMIT}")
        offset: int = Field(0, ge=0, le=MAX_OFFSET, description=f"at most {MAX_OFFSET}")


# Every operation can answer these: a bad query value (400/422), no or a bad token (401).
COMMON_ERRORS = (400, 401, 422)


def responses(ok: dict[int, Any], *errors: int) -> dict[int, Any]:
    """An operation's documented responses: its success, the common errors and ``errors``."""
    return {**ok, **{code: ErrorOut for code in sorted({*COMMON_ERRORS, *errors})}}


def config_problems(exc: ConfigError) -> dict[str, list[dict[str, Any]]]:
    """A 422's body for an agent.yaml that does not load: one item per problem, located at
    its field in agent.yaml (a launch, a re-run and a replay answer alike)."""
    return {
        "detail": [
            {"loc": ["agent.yaml", *([p.field_path] if p.field_path else [])], "msg": str(p)}
            for p in exc.problems
        ]
    }
