"""The value object every grader returns.

A grader is a small callable that turns (response, expectation, options) into a ``Grade``.
"Could not grade" is its own outcome: ``error`` is set, ``passed`` is False and ``score`` is
None, so a broken judge never looks like a low score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JudgeUsage:
    """Tokens and cost a judge model spent on one grade."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


@dataclass(frozen=True)
class Grade:
    score: float | None
    passed: bool
    threshold: float | None = None
    reason: str | None = None
    error: str | None = None
    details: dict[str, Any] | None = None
    model_used: str | None = None
    retry_count: int = 0
    evaluation_time_ms: int = 0
    judge_usage: JudgeUsage | None = None

    @property
    def errored(self) -> bool:
        return self.error is not None

    @classmethod
    def could_not_grade(cls, error: str, *, threshold: float | None = None, **kw: Any) -> Grade:
        return cls(score=None, passed=False, threshold=threshold, error=error, **kw)


def error_text(exc: BaseException) -> str:
    """The one-line form every error is recorded in: ``ExcType: message`` (or just the type)."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
