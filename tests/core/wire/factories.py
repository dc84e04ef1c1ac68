"""Small builders for report objects, so each test states only what it is about."""

from __future__ import annotations

from typing import Any

from runs.core.wire.models import MetricResult, TestResult, TokenUsage, TurnResult

TIMESTAMP = "2026-11-30T04:52:10Z"


def metric(
    name: str = "bleu",
    score: float | None = 0.5,
    *,
    passed: bool = True,
    threshold: float | None = 0.4,
    **fields: Any,
) -> MetricResult:
    kind = fields.pop("kind", "standard")
    return MetricResult(
        metric_name=name, kind=kind, score=score, threshold=threshold, passed=passed, **fields
    )


def usage(prompt: int, completion: int, **fields: int) -> TokenUsage:
    total = fields.pop("total_tokens", prompt + completion)
    return TokenUsage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=total, **fields
    )


def turn(index: int, **fields: Any) -> TurnResult:
    values: dict[str, Any] = {
        "turn_index": index,
        "input": f"question {index}",
        "response": f"answer {index}",
        "passed": True,
        "execution_time_ms": 100,
    }
    values.update(fields)
    return TurnResult(**values)


def result(name: str = "case", *, passed: bool = True, **fields: Any) -> TestResult:
    values: dict[str, Any] = {
        "test_name": name,
        "test_input": f"input of {name}",
        "agent_response": f"response of {name}",
        "passed": passed,
        "execution_time_ms": 1000,
        "timestamp": TIMESTAMP,
    }
    values.update(fields)
    return TestResult(**values)
