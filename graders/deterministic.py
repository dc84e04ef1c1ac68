"""Deterministic graders: ``equality`` and ``numeric`` (seed 000 §5, DESIGN.md §6).

Both score 1.0 or 0.0. Without a threshold a grade passes iff the score is 1.0; with one it
passes iff score >= threshold. An empty or missing response is graded as empty text (it fails;
it is never skipped). A numeric answer that cannot be parsed is "could not grade" (``error`` set,
score None), whatever the threshold.

``response_path`` grades one JSON leaf of the response instead of the whole text. Syntax (the
same as HoloDeck's): keys joined by dots, list indices in brackets — ``answer``,
``result.value``, ``items[0].score``, ``data.rows[2][1]``. Keys match ``[A-Za-z_][\\w-]*``. The
leaf is rendered as JSON text (``true``, ``null``, ``1.5``); a string leaf is used as-is. A
response that is not JSON, a missing key or index, or a leaf that is a list/object is an error.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import string
import time
from collections.abc import Callable
from typing import Any

from graders.result import Grade

_SEGMENT = r"[A-Za-z_][\w-]*(?:\[\d+\])*"
RESPONSE_PATH_RE = re.compile(rf"^{_SEGMENT}(?:\.{_SEGMENT})*$")
_PATH_TOKEN = re.compile(r"([A-Za-z_][\w-]*)|\[(\d+)\]")

_WHITESPACE = re.compile(r"\s+")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
# Thousands separators for `numeric` with accept_thousands_separators: comma, underscore,
# narrow no-break space (U+202F) and no-break space (U+00A0), as HoloDeck. A plain space is not
# one (unlike fuzzy arg matching) — "206 588" does not parse.
THOUSANDS_SEPARATORS = (",", "_", "\u202f", "\u00a0")
_SHOWN = 80


# --- response_path ------------------------------------------------------------------------


def is_valid_response_path(path: str) -> bool:
    return bool(RESPONSE_PATH_RE.match(path))


def extract_response_path(response: str, path: str) -> str:
    """The leaf at ``path`` of the JSON ``response``, as text. Raises ValueError with a reason."""
    if not is_valid_response_path(path):
        raise ValueError(f"response_path '{path}' is not a valid path (e.g. answer.items[0].value)")
    try:
        cursor: Any = json.loads(response)
    except ValueError:
        raise ValueError(
            f"response_path '{path}': the response is not JSON: {_clip(response)!r}"
        ) from None
    walked = ""
    for match in _PATH_TOKEN.finditer(path):
        key, index = match.groups()
        cursor = _step(cursor, key, index, path, walked)
        if key is None:
            walked += f"[{index}]"
        else:
            walked += f".{key}" if walked else key
    if isinstance(cursor, dict | list):
        kind = "an object" if isinstance(cursor, dict) else "a list"
        raise ValueError(f"response_path '{path}': the value is {kind}, not a single value")
    return cursor if isinstance(cursor, str) else json.dumps(cursor)


def _step(cursor: Any, key: str | None, index: str | None, path: str, walked: str) -> Any:
    where = f"'{walked}'" if walked else "the top level"
    if index is not None:
        if not isinstance(cursor, list):
            raise ValueError(f"response_path '{path}': {where} is not a list")
        if int(index) >= len(cursor):
            raise ValueError(
                f"response_path '{path}': index [{index}] is out of range "
                f"({where} has {len(cursor)} items)"
            )
        return cursor[int(index)]
    if not isinstance(cursor, dict):
        raise ValueError(f"response_path '{path}': {where} is not an object")
    if key not in cursor:
        keys = ", ".join(sorted(str(k) for k in cursor)) or "none"
        raise ValueError(f"response_path '{path}': no key '{key}' (keys: {keys})")
    return cursor[key]


def resolve_response(response: str | None, response_path: str | None) -> str:
    """The text to grade: the whole response (None -> ""), or its JSON leaf."""
    text = response or ""
    if response_path is None:
        return text
    return extract_response_path(text, response_path)


# --- timing -------------------------------------------------------------------------------


def timed(grade_fn: Callable[[], Grade]) -> Grade:
    """Run a grading step and stamp the Grade with its wall time in milliseconds."""
    start = time.perf_counter()
    grade = grade_fn()
    elapsed_ms = round((time.perf_counter() - start) * 1000)
    return dataclasses.replace(grade, evaluation_time_ms=elapsed_ms)


def passes(score: float, threshold: float | None, default: float) -> bool:
    return score >= (threshold if threshold is not None else default)


# --- equality ------------------------------------------------------------------------------


def grade_equality(
    response: str | None,
    expected: str,
    *,
    case_insensitive: bool = False,
    strip_whitespace: bool = False,
    strip_punctuation: bool = False,
    response_path: str | None = None,
    threshold: float | None = None,
) -> Grade:
    """Exact string equality after the optional normalisations (case, punctuation, spaces)."""

    def grade() -> Grade:
        try:
            actual = resolve_response(response, response_path)
        except ValueError as exc:
            return Grade.could_not_grade(str(exc), threshold=threshold)

        def norm(text: str) -> str:
            return normalize_text(
                text,
                case_insensitive=case_insensitive,
                strip_whitespace=strip_whitespace,
                strip_punctuation=strip_punctuation,
            )

        left, right = norm(actual), norm(expected)
        score = 1.0 if left == right else 0.0
        if score:
            reason = "the response equals the expected text"
        else:
            reason = (
                f"expected {_clip(right)!r}, got {_clip(left)!r}{_first_difference(right, left)}"
            )
        flags = _flag_note(case_insensitive, strip_whitespace, strip_punctuation)
        return Grade(
            score=score,
            passed=passes(score, threshold, 1.0),
            threshold=threshold,
            reason=reason + flags,
        )

    return timed(grade)


def normalize_text(
    text: str, *, case_insensitive: bool, strip_whitespace: bool, strip_punctuation: bool
) -> str:
    """Casefold, then drop string.punctuation, then collapse whitespace runs and trim."""
    out = text
    if case_insensitive:
        out = out.casefold()
    if strip_punctuation:
        out = out.translate(_PUNCTUATION)
    if strip_whitespace:
        out = _WHITESPACE.sub(" ", out).strip()
    return out


def _first_difference(expected: str, actual: str) -> str:
    for i, (a, b) in enumerate(zip(expected, actual, strict=False)):
        if a != b:
            return f" (first difference at character {i})"
    if len(expected) != len(actual):
        return f" (lengths {len(expected)} and {len(actual)})"
    return ""


def _flag_note(case_insensitive: bool, strip_whitespace: bool, strip_punctuation: bool) -> str:
    flags = [
        name
        for name, on in (
            ("case_insensitive", case_insensitive),
            ("strip_whitespace", strip_whitespace),
            ("strip_punctuation", strip_punctuation),
        )
        if on
    ]
    return f" [{', '.join(flags)}]" if flags else ""


# --- numeric -------------------------------------------------------------------------------


def grade_numeric(
    response: str | None,
    expected: str,
    *,
    absolute_tolerance: float = 1e-6,
    relative_tolerance: float = 0.0,
    accept_percent: bool = False,
    accept_thousands_separators: bool = False,
    response_path: str | None = None,
    threshold: float | None = None,
) -> Grade:
    """Pass iff |actual - expected| <= absolute_tolerance or <= relative_tolerance * |expected|.

    The boundary is inclusive and compared in binary floats (so 1.1 - 1.0 > 0.1).
    """

    def grade() -> Grade:
        try:
            text = resolve_response(response, response_path)
        except ValueError as exc:
            return Grade.could_not_grade(str(exc), threshold=threshold)
        options = {
            "accept_percent": accept_percent,
            "accept_thousands_separators": accept_thousands_separators,
        }
        try:
            want = parse_number(str(expected), **options)
        except ValueError as exc:
            return Grade.could_not_grade(
                f"could not parse a number from the expected value: {exc}", threshold=threshold
            )
        try:
            got = parse_number(text, **options)
        except ValueError as exc:
            return Grade.could_not_grade(
                f"could not parse a number from the response: {exc}", threshold=threshold
            )
        ok, reason = compare_numbers(got, want, absolute_tolerance, relative_tolerance)
        score = 1.0 if ok else 0.0
        return Grade(
            score=score,
            passed=passes(score, threshold, 1.0),
            threshold=threshold,
            reason=reason,
        )

    return timed(grade)


def parse_number(text: str, *, accept_percent: bool, accept_thousands_separators: bool) -> float:
    """Parse the whole text as one number. Raises ValueError('<quoted text>[ (hint)]')."""
    raw = text.strip()
    body = raw
    percent = body.endswith("%")
    if percent:
        if not accept_percent:
            raise ValueError(f"{_clip(raw)!r} (a trailing % needs accept_percent)")
        body = body[:-1].strip()
    has_separator = any(sep in body for sep in THOUSANDS_SEPARATORS)
    if has_separator:
        # float() itself accepts "1_000"; without the flag that must not parse either.
        if not accept_thousands_separators:
            raise ValueError(
                f"{_clip(raw)!r} (thousands separators need accept_thousands_separators)"
            )
        for sep in THOUSANDS_SEPARATORS:
            body = body.replace(sep, "")
    try:
        value = float(body)
    except (ValueError, OverflowError):
        raise ValueError(repr(_clip(raw))) from None
    return value / 100 if percent else value


def compare_numbers(
    actual: float, expected: float, absolute_tolerance: float, relative_tolerance: float
) -> tuple[bool, str]:
    diff = abs(actual - expected)
    abs_ok = diff <= absolute_tolerance
    rel_limit = relative_tolerance * abs(expected)
    rel_ok = relative_tolerance > 0 and diff <= rel_limit
    head = f"expected {fmt_number(expected)}, got {fmt_number(actual)}"
    if abs_ok:
        return True, f"{head} (|diff| {fmt_number(diff)} <= {fmt_number(absolute_tolerance)})"
    if rel_ok:
        return True, (
            f"{head} (|diff| {fmt_number(diff)} <= {fmt_number(relative_tolerance)} "
            f"x |expected| = {fmt_number(rel_limit)})"
        )
    why = f"|diff| {fmt_number(diff)} > {fmt_number(absolute_tolerance)}"
    if relative_tolerance > 0:
        why += f" and > {fmt_number(relative_tolerance)} x |expected| = {fmt_number(rel_limit)}"
    return False, f"{head} ({why})"


def fmt_number(value: float) -> str:
    """Short human form: 206588, 0.1414, 1e-6, 0.0014 (six significant digits)."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    text = f"{value:.6g}"
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + ("-" if m[1] == "-" else "") + m[2], text)


def _clip(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


__all__ = [
    "RESPONSE_PATH_RE",
    "THOUSANDS_SEPARATORS",
    "compare_numbers",
    "extract_response_path",
    "fmt_number",
    "grade_equality",
    "grade_numeric",
    "is_valid_response_path",
    "normalize_text",
    "parse_number",
    "resolve_response",
    "timed",
]
