"""The one strict parser for query-string values, shared by the pages (runs/web/params.py) and
the API's schemas (runs/api/schemas.py). Django-free: each function takes the raw text and
returns the value or raises ``QueryValueError`` with a message a person can act on.

Strict because Python is lenient where the databases are not: ``int("٣")`` is 3 and
``"²".isdigit()`` is true, an integer beyond 64 bits is an ``IntegrityError`` on SQLite, an
aware datetime near year 1 or 9999 overflows when turned into UTC, and PostgreSQL refuses NUL.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

# Database ids and counts fit in a signed 64-bit integer everywhere.
MAX_INT = 2**63 - 1
MAX_TEXT = 200
# Timestamps the code and both databases hold comfortably, with room for a day's margin.
EARLIEST = datetime(1, 1, 3, tzinfo=UTC)
LATEST = datetime(9999, 12, 29, tzinfo=UTC)

ASCII_INT = re.compile(r"[+-]?[0-9]+")


class QueryValueError(ValueError):
    """A query value that cannot be used; the message says why."""


def parse_text(raw: str, *, max_length: int = MAX_TEXT) -> str:
    if "\x00" in raw:
        raise QueryValueError("must not contain a NUL character")
    if len(raw) > max_length:
        raise QueryValueError(f"is longer than {max_length} characters")
    return raw


def is_ascii_int(text: str) -> bool:
    """Whether ``text`` is a whole number in ASCII digits, with an optional sign, and nothing
    else (no whitespace, no other script's digits)."""
    return ASCII_INT.fullmatch(text) is not None


def parse_int(raw: str, *, minimum: int = 0, maximum: int = MAX_INT) -> int:
    """ASCII digits only (an optional sign), within ``minimum..maximum``."""
    text = raw.strip()
    if not is_ascii_int(text):
        raise QueryValueError(f"{text[:40]!r} is not a whole number (ASCII digits)")
    if len(text) > 40:  # int() of a huge digit string is slow; no bound is anywhere near
        raise QueryValueError(f"must be between {minimum} and {maximum}")
    value = int(text)
    if not minimum <= value <= maximum:
        raise QueryValueError(f"must be between {minimum} and {maximum}")
    return value


def parse_aware_datetime(value: datetime) -> datetime:
    """An aware datetime (naive means UTC) within the range both databases and Python hold,
    returned in UTC; out of range is refused rather than clamped, so a typo is noticed."""
    if value.tzinfo is None or value.utcoffset() is None:
        value = value.replace(tzinfo=UTC)
    try:
        in_utc = value.astimezone(UTC)
    except OverflowError:
        raise QueryValueError("is out of range (years 1 to 9999)") from None
    if not EARLIEST <= in_utc <= LATEST:
        raise QueryValueError("is out of range (years 1 to 9999)")
    return in_utc


def shift(value: datetime, delta: timedelta) -> datetime:
    try:
        return value + delta
    except OverflowError:
        raise QueryValueError("is out of range (years 1 to 9999)") from None
