"""The bounds of agent.yaml: every number is finite and in a range that can mean something, and
YAML aliases may not expand beyond a small budget.

Each bounded field refuses NaN, the infinities and a value outside its range with a message
naming the field and the bound it breaks. The check runs before pydantic's own type check, so
``1e21`` for an integer reads "must be <= 1024, got 1e+21" rather than an integer-parsing error;
the range also shows in the JSON Schema (``minimum`` / ``maximum``).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationInfo

# Timeouts: positive, at most a day.
MAX_TIMEOUT_S = 24 * 60 * 60
MAX_TIMEOUT_MS = MAX_TIMEOUT_S * 1000
# Simulated latency of the scripted provider: at most ten minutes per model call.
MAX_LATENCY_MS = 10 * 60 * 1000
MAX_PARALLEL_TEST_CASES = 1024
# Repetitions of every case in one run (execution.repeats).
MAX_REPEATS = 1000
MAX_TOKENS = 1_000_000
MAX_TEMPERATURE = 2
MAX_TOOL_COUNT = 1000
MAX_CLAUDE_TURNS = 1000
MAX_PAGE = 100_000
MAX_SCALE = 100
# YAML anchors/aliases: at most this many alias references per file, and at most this many
# nodes added by expanding them (a "billion laughs" file is refused before it is built).
MAX_YAML_ALIASES = 100
MAX_YAML_ALIAS_NODES = 10_000


def range_problem(
    value: Any,
    what: str,
    low: float,
    high: float | None = None,
    *,
    positive: bool = False,
    unit: str = "",
) -> str | None:
    """Why the number ``value`` is not finite or not in ``[low, high]`` (``positive``: also
    ``> 0``), or None. Non-numbers are not judged here (pydantic's type check reports them)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{what} must be a finite number, got {value}"
    if positive and value <= 0:
        return f"{what} must be positive, got {value}"
    if value < low:
        return f"{what} must be >= {shown_number(low)}, got {value}"
    if high is not None and value > high:
        return f"{what} must be <= {shown_number(high)}{unit}, got {value}"
    return None


def shown_number(value: float) -> str:
    """``5.0`` as ``5``; other numbers as Python writes them (``-0.5``, ``nan``, ``inf``)."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _check(
    low: float, high: float | None = None, *, positive: bool = False, unit: str = ""
) -> BeforeValidator:
    def check(value: Any, info: ValidationInfo) -> Any:
        what = str(info.field_name)
        problem = range_problem(value, what, low, high, positive=positive, unit=unit)
        if problem is not None:
            raise ValueError(problem)
        return value

    return BeforeValidator(check)


def _field(low: float, high: float | None = None, *, positive: bool = False) -> Any:
    if positive:
        return Field(gt=low, le=high, allow_inf_nan=False)
    return Field(ge=low, le=high, allow_inf_nan=False)


_DAY = " (24 h)"

TimeoutSeconds = Annotated[
    float,
    _field(0, MAX_TIMEOUT_S, positive=True),
    _check(0, MAX_TIMEOUT_S, positive=True, unit=_DAY),
]
TimeoutMs = Annotated[
    int,
    _field(0, MAX_TIMEOUT_MS, positive=True),
    _check(0, MAX_TIMEOUT_MS, positive=True, unit=_DAY),
]
LatencyMs = Annotated[float, _field(0, MAX_LATENCY_MS), _check(0, MAX_LATENCY_MS, unit=" (10 min)")]
ParallelTestCases = Annotated[
    int, _field(1, MAX_PARALLEL_TEST_CASES), _check(1, MAX_PARALLEL_TEST_CASES)
]
Repeats = Annotated[int, _field(1, MAX_REPEATS), _check(1, MAX_REPEATS)]
Temperature = Annotated[float, _field(0, MAX_TEMPERATURE), _check(0, MAX_TEMPERATURE)]
TopP = Annotated[float, _field(0, 1), _check(0, 1)]
TokenCount = Annotated[int, _field(1, MAX_TOKENS), _check(1, MAX_TOKENS)]
ToolCount = Annotated[int, _field(1, MAX_TOOL_COUNT), _check(1, MAX_TOOL_COUNT)]
ClaudeTurns = Annotated[int, _field(1, MAX_CLAUDE_TURNS), _check(1, MAX_CLAUDE_TURNS)]
PageNumber = Annotated[int, Field(gt=0, le=MAX_PAGE)]
Scale = Annotated[int, _field(1, MAX_SCALE), _check(1, MAX_SCALE)]
Tolerance = Annotated[float, _field(0), _check(0)]
