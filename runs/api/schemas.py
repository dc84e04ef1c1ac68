"""Shared API schemas."""

from typing import Annotated, Any

from ninja import Schema
from pydantic import AfterValidator, Field, StringConstraints


class ErrorOut(Schema):
    """Every error: ``{"detail": ...}`` (a message, or a list of field errors for 422)."""

    detail: str | list[dict[str, object]]


# --- safe query values ------------------------------------------------------------------------
# Validated before they reach the database: a NUL character (PostgreSQL refuses it) or an
# integer beyond 64 bits is a 422 naming the parameter, never a 500.

MAX_ID = 2**63 - 1


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


SafeText = Annotated[str, StringConstraints(max_length=200), AfterValidator(_no_nul)]
Id = Annotated[int, Field(ge=1, le=MAX_ID)]


# Every operation can answer these: a bad query value (400/422), no or a bad token (401).
COMMON_ERRORS = (400, 401, 422)


def responses(ok: dict[int, Any], *errors: int) -> dict[int, Any]:
    """An operation's documented responses: its success, the common errors and ``errors``."""
    return {**ok, **{code: ErrorOut for code in sorted({*COMMON_ERRORS, *errors})}}
