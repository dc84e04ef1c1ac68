"""Code grader for ConvFinQA-style turns: is the agent's work equivalent to the turn's program?

``turn_config.turn_program`` is a ConvFinQA program such as
``subtract(206588, 181001), divide(#0, 181001)``: steps separated by commas, where ``#N`` is the
value of step N of the same program, ``const_100`` is the number 100 and ``33.2%`` is 0.332.
The grader evaluates the program, then checks

1. the agent's final answer equals the program's value (1% relative tolerance; ``14.1%`` and
   ``0.141`` are the same answer), and
2. every step's value appears among the results of the agent's tool calls in this turn (the
   agent looked up and computed the same intermediate numbers).

The score is the share of checks that passed; the turn passes only when all did. ``details``
carries the evaluated steps for the dashboard.

This file lives in the agent directory and is loaded as ``graders.program`` relative to it;
``graders.code`` below is the HoloDeck Web package that defines the grader contract.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from graders.code import GraderContext, GraderResult

REL_TOL = 0.01
ABS_TOL = 1e-4

_STEP_RE = re.compile(r"([a-z_]+)\((.*)\)")
_NUMBER_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?%?|-?\.\d+%?")

OPS: dict[str, Callable[[float, float], float | bool]] = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,
    "greater": lambda a, b: a > b,
    "exp": lambda a, b: float(a**b),
}


def split_steps(program: str) -> list[str]:
    """Split at the commas that separate steps (not the commas between arguments)."""
    steps, depth, current = [], 0, ""
    for char in program:
        if char == "," and depth == 0:
            steps.append(current.strip())
            current = ""
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        current += char
    if current.strip():
        steps.append(current.strip())
    return steps


def parse_number(text: str) -> float:
    """``206,588`` -> 206588.0, ``33.2%`` -> 0.332, ``const_100`` -> 100, ``const_m1`` -> -1."""
    text = text.strip()
    if text.startswith("const_"):
        text = text.removeprefix("const_").replace("m", "-", 1)
    percent = text.endswith("%")
    value = float(text.rstrip("%").replace(",", ""))
    return value / 100 if percent else value


def evaluate_program(program: str) -> list[float | bool]:
    """The value of every step, resolving ``#N`` back-references."""
    values: list[float | bool] = []
    for step in split_steps(program):
        match = _STEP_RE.fullmatch(step)
        if match is None:
            values.append(parse_number(step))  # a bare value: "the answer is this number"
            continue
        op, raw_args = match.groups()
        if op not in OPS:
            raise ValueError(f"unsupported program operation {op!r}")
        args = [_resolve(arg, values) for arg in raw_args.split(",")]
        if len(args) != 2:
            raise ValueError(f"{op} takes 2 arguments, got {len(args)} in {step!r}")
        values.append(OPS[op](args[0], args[1]))
    if not values:
        raise ValueError("empty program")
    return values


def _resolve(arg: str, values: Sequence[float | bool]) -> float:
    arg = arg.strip()
    if arg.startswith("#"):
        index = int(arg[1:])
        if index >= len(values):
            raise ValueError(f"{arg} refers to a step that has not run yet")
        return float(values[index])
    return parse_number(arg)


def parse_answer(text: str) -> float | bool | None:
    """The agent's answer as a number (or yes/no as a bool); None when there is none."""
    cleaned = text.strip().lower().rstrip(".!")
    if cleaned in ("yes", "true"):
        return True
    if cleaned in ("no", "false"):
        return False
    match = _NUMBER_RE.search(text.replace("\u202f", ""))
    return parse_number(match.group(0)) if match else None


def same_value(actual: Any, expected: float | bool) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    try:
        value = float(actual)
    except (TypeError, ValueError):
        return False
    return math.isclose(value, expected, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def _tool_results(invocations: Sequence[Mapping[str, Any]]) -> list[Any]:
    return [call.get("result") for call in invocations if not call.get("error")]


def program_equivalent(ctx: GraderContext) -> GraderResult:
    program = str(ctx.turn_config.get("turn_program") or "").strip()
    if not program:
        return GraderResult(score=1.0, passed=True, reason="no turn_program to check")
    values = evaluate_program(program)
    expected = values[-1]
    answer = parse_answer(ctx.agent_response)
    answer_ok = answer is not None and (
        same_value(answer, expected)
        # "14.14" for a ratio of 0.1414: a percentage without its % sign
        or (not isinstance(expected, bool) and same_value(answer, float(expected) * 100))
    )
    results = _tool_results(ctx.tool_invocations)
    found = [any(same_value(r, value) for r in results) for value in values]
    checks = [answer_ok, *found]
    ground_truth = parse_answer(ctx.ground_truth) if ctx.ground_truth else None
    missing = [step for step, ok in zip(split_steps(program), found, strict=True) if not ok]
    problems = []
    if not answer_ok:
        problems.append(f"answer {ctx.agent_response!r} is not {expected}")
    if missing:
        problems.append(f"no tool call produced: {', '.join(missing)}")
    steps = [
        {"step": step, "value": value, "found_in_tool_results": ok}
        for step, value, ok in zip(split_steps(program), values, found, strict=True)
    ]
    return GraderResult(
        score=sum(checks) / len(checks),
        passed=all(checks),
        reason="; ".join(problems) or "answer and every program step match",
        details={
            "program": program,
            "steps": steps,
            "expected": expected,
            "answer": answer,
            "program_matches_ground_truth": (
                None if ground_truth is None else same_value(ground_truth, expected)
            ),
        },
    )
