"""Tool-argument matchers: literal, fuzzy and regex (DESIGN.md §6 is the contract).

An expected tool call may assert its arguments. Each asserted value is one of:

- a **literal** (any scalar, list, or dict without matcher keys): numbers compare numerically
  (``206588 == 206588.0``), a bool only equals a bool (``true != 1``), ``None`` only equals
  ``None``, lists compare element-wise, dicts by key set and then element-wise, strings exactly;
- ``{fuzzy: "206588"}``: both sides normalised (trim, lowercase, collapse whitespace, drop ``,``
  ``_`` and the narrow no-break space U+202F); for the numeric reading every whitespace character
  is then removed and a trailing ``%`` divides by 100; when both sides read as numbers they are
  equal when ``math.isclose(a, b, rel_tol=0, abs_tol=1e-9)`` (as HoloDeck: no relative
  tolerance), else the normalised texts must be equal;
- ``{regex: "^2009.*$"}``: an anchored full match (``re.fullmatch``) on ``str(actual)``.

Matching never raises on any JSON value: a value that cannot be compared is a failed match
with a reason.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

import regex

from graders.result import error_text

MatcherKind = Literal["literal", "fuzzy", "regex"]

# Fuzzy numbers: equal when math.isclose(a, b, rel_tol=FUZZY_REL_TOL, abs_tol=FUZZY_ABS_TOL),
# exactly HoloDeck's rule. The absolute tolerance absorbs float noise near everyday magnitudes
# ("14.14%" -> 0.14140000000000003); there is deliberately no relative tolerance, so two large
# numbers that differ in their last digits (1234567890123456 vs ...457) do not match.
FUZZY_REL_TOL = 0.0
FUZZY_ABS_TOL = 1e-9

_FUZZY_DROP = re.compile("[,_\u202f]")
_WHITESPACE = re.compile(r"\s+")
_ANY_WHITESPACE = re.compile(r"\s")
_MAX_SHOWN = 80


@dataclass(frozen=True)
class LiteralMatcher:
    value: Any


@dataclass(frozen=True)
class FuzzyMatcher:
    pattern: str


@dataclass(frozen=True)
class RegexMatcher:
    pattern: str
    # Compiled by the ``regex`` package in its Python-``re``-compatible mode (VERSION0): same
    # syntax, plus a time limit on matching, so a catastrophic pattern cannot pin a worker.
    compiled: Any


ArgMatcher = LiteralMatcher | FuzzyMatcher | RegexMatcher

_MATCHER_KEYS = ("fuzzy", "regex")


@dataclass(frozen=True)
class MatchResult:
    """The outcome of one matcher against one actual value."""

    passed: bool
    reason: str | None
    expected_normalized: Any
    actual_normalized: Any


# --- parsing and serialising ----------------------------------------------------------------


def parse_arg_matcher(value: Any) -> ArgMatcher:
    """Turn one asserted arg value from agent.yaml into a matcher.

    Raises ValueError with a one-line cause when the value is a malformed matcher dict.
    """
    if isinstance(value, LiteralMatcher | FuzzyMatcher | RegexMatcher):
        return value
    if not isinstance(value, dict):
        return LiteralMatcher(value)
    present = [k for k in _MATCHER_KEYS if k in value]
    if not present:
        return LiteralMatcher(value)
    if len(present) == 2:
        raise ValueError("use either 'fuzzy' or 'regex', not both")
    key = present[0]
    others = sorted(str(k) for k in value if k != key)
    if others:
        raise ValueError(
            f"a '{key}' matcher must be the only key of its dict; "
            f"found beside it: {', '.join(others)}"
        )
    pattern = value[key]
    if not isinstance(pattern, str):
        raise ValueError(f"the '{key}' pattern must be a string, got {_type_name(pattern)}")
    if key == "fuzzy":
        return FuzzyMatcher(pattern)
    return compile_regex_matcher(pattern)


# A regex match taking longer than this is a failed assertion that says so.
REGEX_TIMEOUT_S = 1.0


def compile_regex_matcher(pattern: str) -> RegexMatcher:
    try:
        re.compile(pattern)  # Python's syntax and error messages are the contract
        compiled = regex.compile(pattern, flags=regex.VERSION0)
    except (re.error, regex.error) as exc:
        raise ValueError(f"invalid regex '{pattern}': {exc}") from None
    return RegexMatcher(pattern=pattern, compiled=compiled)


def matcher_to_config(matcher: ArgMatcher) -> Any:
    """The agent.yaml form of a matcher (used to serialise expected_tools into results)."""
    if isinstance(matcher, FuzzyMatcher):
        return {"fuzzy": matcher.pattern}
    if isinstance(matcher, RegexMatcher):
        return {"regex": matcher.pattern}
    return matcher.value


def matcher_kind(matcher: ArgMatcher) -> MatcherKind:
    if isinstance(matcher, FuzzyMatcher):
        return "fuzzy"
    if isinstance(matcher, RegexMatcher):
        return "regex"
    return "literal"


def matcher_display(matcher: ArgMatcher) -> Any:
    """What the user wrote: the literal value, or the fuzzy/regex pattern."""
    if isinstance(matcher, LiteralMatcher):
        return matcher.value
    return matcher.pattern


# --- matching ------------------------------------------------------------------------------


def match_arg(matcher: ArgMatcher, actual: Any) -> MatchResult:
    """Match one actual argument value. Never raises."""
    try:
        if isinstance(matcher, FuzzyMatcher):
            return _match_fuzzy(matcher.pattern, actual)
        if isinstance(matcher, RegexMatcher):
            return _match_regex(matcher, actual)
        return _match_literal(matcher.value, actual)
    except Exception as exc:  # a matcher must never take a turn down with it
        return MatchResult(
            passed=False,
            reason=f"could not compare: {error_text(exc)}",
            expected_normalized=None,
            actual_normalized=None,
        )


def literal_equals(expected: Any, actual: Any) -> bool:
    """Literal semantics: numeric int ≡ float, strict bool and None, deep lists and dicts."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if expected is None or actual is None:
        return expected is None and actual is None
    if _is_number(expected) and _is_number(actual):
        # Python compares int and float exactly (no float() overflow on huge ints).
        return bool(expected == actual)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            literal_equals(e, a) for e, a in zip(expected, actual, strict=True)
        )
    if isinstance(expected, dict) and isinstance(actual, dict):
        return set(expected) == set(actual) and all(
            literal_equals(expected[k], actual[k]) for k in expected
        )
    if isinstance(expected, str) and isinstance(actual, str):
        return expected == actual
    return False


def _match_literal(expected: Any, actual: Any) -> MatchResult:
    passed = literal_equals(expected, actual)
    reason = None
    if not passed:
        reason = f"expected {show_value(expected)}, got {show_value(actual)}"
        hint = _literal_type_hint(expected, actual)
        if hint:
            reason += f" ({hint})"
    return MatchResult(passed, reason, expected, actual)


def _literal_type_hint(expected: Any, actual: Any) -> str | None:
    if isinstance(expected, bool) != isinstance(actual, bool):
        return "a bool only equals a bool"
    if _is_number(expected) and isinstance(actual, str):
        return "a number only equals a number; use {fuzzy: ...} to accept text"
    if isinstance(expected, str) and _is_number(actual):
        return "a string only equals a string; use {fuzzy: ...} to accept numbers"
    return None


def fuzzy_normalize(value: Any) -> str:
    """Trim, lowercase, drop , _ and U+202F, collapse whitespace."""
    text = safe_str(value).strip().lower()
    text = _FUZZY_DROP.sub("", text)
    return _WHITESPACE.sub(" ", text).strip()


def fuzzy_number(normalized: str) -> float | None:
    """Read a fuzzy-normalised string as a number, as HoloDeck does: every whitespace character
    is removed first (``"206 588"``, ``"- 5"``, ``"1 .5"`` read as 206588, -5, 1.5), then a
    trailing % divides by 100."""
    text = _ANY_WHITESPACE.sub("", normalized)
    percent = text.endswith("%")
    if percent:
        text = text[:-1]
    if not text:
        return None
    try:
        number = float(text)
    except (ValueError, OverflowError):
        return None
    return number / 100 if percent else number


def _fuzzy_side(value: Any) -> tuple[str, float | None]:
    text = fuzzy_normalize(value)
    return text, fuzzy_number(text)


def _match_fuzzy(pattern: str, actual: Any) -> MatchResult:
    exp_text, exp_num = _fuzzy_side(pattern)
    act_text, act_num = _fuzzy_side(actual)
    # NaN never equals itself as a number, so "nan" falls through to text equality.
    numeric = (
        exp_num is not None
        and act_num is not None
        and not math.isnan(exp_num)
        and not math.isnan(act_num)
    )
    if numeric:
        assert exp_num is not None and act_num is not None
        passed = math.isclose(exp_num, act_num, rel_tol=FUZZY_REL_TOL, abs_tol=FUZZY_ABS_TOL)
        exp_norm: Any = exp_num
        act_norm: Any = act_num
    else:
        passed = exp_text == act_text
        exp_norm, act_norm = exp_text, act_text
    reason = None if passed else f"expected fuzzy {_quote(pattern)}, got {show_value(actual)}"
    return MatchResult(passed, reason, exp_norm, act_norm)


def _match_regex(matcher: RegexMatcher, actual: Any) -> MatchResult:
    text = safe_str(actual)
    try:
        passed = matcher.compiled.fullmatch(text, timeout=REGEX_TIMEOUT_S) is not None
    except TimeoutError:
        gave_up = (
            f"regex {_quote(matcher.pattern)} did not finish matching {_quote(text)} within "
            f"{REGEX_TIMEOUT_S:g} s (catastrophic backtracking?): counted as no match"
        )
        return MatchResult(False, gave_up, matcher.pattern, text)
    reason = None
    if not passed:
        reason = f"expected a full match of regex {_quote(matcher.pattern)}, got {_quote(text)}"
    return MatchResult(passed, reason, matcher.pattern, text)


def json_safe(value: Any) -> Any:
    """A copy of value that json.dumps(allow_nan=False) accepts.

    Tool args and normalised values are shown in results stored as JSON; NaN/Infinity become
    the strings "nan"/"inf"/"-inf", tuples become lists, unknown objects their str().
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else safe_str(value)
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        return {
            safe_str(k) if not isinstance(k, str) else k: json_safe(v) for k, v in value.items()
        }
    return safe_str(value)


# --- display helpers -----------------------------------------------------------------------


def safe_str(value: Any) -> str:
    """str(value), but never raising (huge ints exceed Python's int->str digit limit)."""
    try:
        return str(value)
    except Exception:
        return f"<unprintable {_type_name(value)}>"


def show_value(value: Any) -> str:
    """A short, JSON-flavoured rendering for reasons: 'text', 206588, true, null, [1, 2]."""
    if isinstance(value, str):
        return _quote(value)
    if value is None or isinstance(value, bool | list | dict):
        try:
            return _clip(json.dumps(value, ensure_ascii=False, default=safe_str))
        except (TypeError, ValueError):
            return _clip(safe_str(value))
    return _clip(safe_str(value))


def _quote(text: str) -> str:
    return "'" + _clip(text) + "'"


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return type(value).__name__


__all__ = [
    "FUZZY_ABS_TOL",
    "FUZZY_REL_TOL",
    "ArgMatcher",
    "FuzzyMatcher",
    "LiteralMatcher",
    "MatchResult",
    "MatcherKind",
    "RegexMatcher",
    "compile_regex_matcher",
    "fuzzy_normalize",
    "fuzzy_number",
    "json_safe",
    "literal_equals",
    "match_arg",
    "matcher_display",
    "matcher_kind",
    "matcher_to_config",
    "parse_arg_matcher",
    "safe_str",
    "show_value",
]
