"""Tool assertions: did this turn call the expected tools with the expected arguments?

Semantics (DESIGN.md §5-6):

- a call matches an expectation by name when the expected name is a case-sensitive substring of
  the called name (backends prefix names: ``lookup`` matches ``mcp__fin__lookup``);
- every asserted arg must be present and match its matcher; extra args and extra tools are fine;
- ``count`` is a lower bound on the number of fully matching calls.

Each verdict records ``matched_call_index``, the first matching call, only when the assertion
passes (as HoloDeck: a ``count`` that is not met leaves it empty), and separately
``closest_call_index``, the call the per-arg verdicts (the UI's arg-match diff) describe: the
name-matching call with the most passing args, the first on ties. When the assertion passes the
two are the same call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from graders.matchers import (
    ArgMatcher,
    MatcherKind,
    json_safe,
    match_arg,
    matcher_display,
    matcher_kind,
)


@dataclass(frozen=True)
class ToolExpectation:
    """One expected tool call: a name, optional arg matchers, a minimum count."""

    name: str
    args: dict[str, ArgMatcher] | None = None
    count: int = 1


class CallLike(Protocol):
    """One tool call the agent made in this turn: anything with a name and args (the engine
    passes the report's ``ToolInvocation``; graders cannot import it)."""

    @property
    def name(self) -> str: ...

    @property
    def args(self) -> Any: ...


class ExpectationLike(Protocol):
    """Anything shaped like ToolExpectation (the spec's ExpectedTool too)."""

    @property
    def name(self) -> str: ...

    @property
    def args(self) -> Mapping[str, ArgMatcher] | None: ...

    @property
    def count(self) -> int: ...


@dataclass(frozen=True)
class ArgVerdict:
    arg: str
    matcher: MatcherKind
    expected: Any
    actual: Any
    actual_present: bool
    expected_normalized: Any
    actual_normalized: Any
    passed: bool
    reason: str | None

    def to_wire(self) -> dict[str, Any]:
        return {
            "arg": self.arg,
            "matcher": self.matcher,
            "expected": json_safe(self.expected),
            "actual": json_safe(self.actual),
            "actual_present": self.actual_present,
            "expected_normalized": json_safe(self.expected_normalized),
            "actual_normalized": json_safe(self.actual_normalized),
            "passed": self.passed,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class ToolAssertionVerdict:
    tool: str
    args_asserted: list[str]
    count: int
    matching_call_indices: list[int]
    matched_call_index: int | None  # the first matching call; None unless passed
    closest_call_index: int | None  # the call arg_verdicts describe; None without a candidate
    arg_verdicts: list[ArgVerdict]
    passed: bool
    unmatched_reason: str | None

    def to_wire(self) -> dict[str, Any]:
        """The seed's arg_match_details record plus the diff the UI draws. JSON-safe."""
        return {
            "tool": self.tool,
            "args_asserted": list(self.args_asserted),
            "matched_call_index": self.matched_call_index,
            "unmatched_reason": self.unmatched_reason,
            "passed": self.passed,
            "count": self.count,
            "matching_calls": list(self.matching_call_indices),
            "closest_call_index": self.closest_call_index,
            "args": [v.to_wire() for v in self.arg_verdicts],
        }


def assert_tools(
    expectations: Sequence[ExpectationLike], calls: Sequence[CallLike]
) -> list[ToolAssertionVerdict]:
    """One verdict per expectation, in order, against this turn's calls."""
    return [_assert_one(expectation, calls) for expectation in expectations]


def tools_matched(verdicts: Sequence[ToolAssertionVerdict]) -> bool | None:
    """None when nothing was asserted; else whether every assertion passed."""
    if not verdicts:
        return None
    return all(v.passed for v in verdicts)


# --- one expectation ------------------------------------------------------------------------


def _assert_one(expectation: ExpectationLike, calls: Sequence[CallLike]) -> ToolAssertionVerdict:
    matchers = dict(expectation.args or {})
    count = max(int(expectation.count), 1)
    candidates = [i for i, call in enumerate(calls) if expectation.name in call.name]
    verdicts_by_call = {i: _judge_args(matchers, _call_args(calls[i])) for i in candidates}
    matching = [i for i in candidates if all(v.passed for v in verdicts_by_call[i])]
    # A fully matching call has every arg passing, so the closest call is the first match.
    closest = _closest(candidates, verdicts_by_call)
    passed = len(matching) >= count
    reason = None
    if not passed:
        reason = _unmatched_reason(expectation.name, count, calls, candidates, matching)
        if reason is None and closest is not None:
            reason = _args_reason(verdicts_by_call[closest])
            if len(candidates) > 1:
                reason += (
                    f" (closest of {len(candidates)} calls named like "
                    f"'{expectation.name}': call {closest})"
                )
    return ToolAssertionVerdict(
        tool=expectation.name,
        args_asserted=list(matchers),
        count=count,
        matching_call_indices=matching,
        matched_call_index=matching[0] if passed else None,
        closest_call_index=closest,
        arg_verdicts=verdicts_by_call[closest] if closest is not None else [],
        passed=passed,
        unmatched_reason=reason,
    )


def _closest(candidates: list[int], verdicts_by_call: dict[int, list[ArgVerdict]]) -> int | None:
    """The name-matching call with the most passing args; the first one on ties."""
    best: int | None = None
    best_score = -1
    for i in candidates:
        score = sum(v.passed for v in verdicts_by_call[i])
        if score > best_score:
            best, best_score = i, score
    return best


def _unmatched_reason(
    name: str,
    count: int,
    calls: Sequence[CallLike],
    candidates: list[int],
    matching: list[int],
) -> str | None:
    """The reason when it is about calls, not args (None: let the args explain)."""
    if not candidates:
        called = ", ".join(_dedupe(c.name for c in calls))
        made = f"calls: {called}" if called else "no tools were called"
        return f"no call to a tool named like '{name}' ({made})"
    if matching:
        noun = "call" if count == 1 else "calls"
        return f"{len(matching)} of {count} required {noun} matched"
    return None


def _args_reason(verdicts: list[ArgVerdict]) -> str:
    return "; ".join(f"arg '{v.arg}': {v.reason}" for v in verdicts if not v.passed)


def _judge_args(matchers: dict[str, ArgMatcher], args: Mapping[str, Any]) -> list[ArgVerdict]:
    return [_judge_arg(key, matcher, args) for key, matcher in matchers.items()]


def _judge_arg(key: str, matcher: ArgMatcher, args: Mapping[str, Any]) -> ArgVerdict:
    present = key in args
    actual = args[key] if present else None
    result = match_arg(matcher, actual)
    reason = result.reason
    if not present:
        reason = f"missing from the call (call args: {', '.join(str(k) for k in args) or 'none'})"
    return ArgVerdict(
        arg=key,
        matcher=matcher_kind(matcher),
        expected=matcher_display(matcher),
        actual=actual,
        actual_present=present,
        expected_normalized=result.expected_normalized,
        actual_normalized=result.actual_normalized if present else None,
        passed=result.passed and present,
        reason=reason,
    )


def _call_args(call: CallLike) -> Mapping[str, Any]:
    # A model can send malformed arguments (a string, null); then no asserted arg is present.
    args = call.args
    return args if isinstance(args, Mapping) else {}


def _dedupe(names: Any) -> list[str]:
    seen: dict[str, None] = {}
    for n in names:
        seen.setdefault(str(n), None)
    return list(seen)


__all__ = [
    "ArgVerdict",
    "CallLike",
    "ExpectationLike",
    "ToolAssertionVerdict",
    "ToolExpectation",
    "assert_tools",
    "tools_matched",
]
