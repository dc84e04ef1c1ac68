"""The public grading API at grader speed: 10,000 verdicts through ``grade_turn_sync`` as the
docs show it (docs/graders.md, "Grading from your own code"), against the graders alone.

    .venv/bin/python benchmarks/grading_bench.py [--verdicts 10000] [--repeat 5]

The configs are the ConvFinQA example's (examples/convfinqa/agent.yaml): its ``numeric`` metric,
an ``equality`` metric, its tool expectations (literal, fuzzy and regex arg matchers) and its
code grader ``graders.program:program_equivalent``. Metrics and expectations are built once
(``metrics_from_yaml`` / ``expectations_from_yaml``) and reused, as a user's loop would; one row
builds them on every call for comparison. The facts cycle through passing and failing turns.

For each workload: CPU (``time.process_time``, every thread of the process, so a code grader's
worker thread counts) and wall time per verdict through the API, the graders' own CPU per
verdict (the grader functions called directly: ``grade_numeric``, ``grade_equality``,
``assert_tools``, the code grader on a prepared ``GraderContext``) and the ratio. Medians of
``--repeat`` rounds. ``results digest`` hashes every verdict (timings left out) so two trees can
be compared for identical results.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "convfinqa"

NUMERIC = {
    "type": "standard",
    "metric": "numeric",
    "name": "answer_numeric",
    "accept_percent": True,
    "accept_thousands_separators": True,
    "absolute_tolerance": 0.0001,
    "relative_tolerance": 0.005,
}
EQUALITY = {
    "type": "standard",
    "metric": "equality",
    "name": "answer_text",
    "case_insensitive": True,
    "strip_whitespace": True,
}
CODE = {
    "type": "code",
    "name": "program_equivalence",
    "grader": "graders.program:program_equivalent",
    "threshold": 0.75,
}
EXPECTED_TOOLS = [
    {"name": "lookup", "args": {"metric": {"regex": "(?i)net cash.*operating.*"}}},
    {"name": "subtract", "args": {"a": 206588, "b": {"fuzzy": "181,001"}}},
    {"name": "divide", "args": {"a": {"regex": "25587(\\.0+)?"}, "b": 181001.0}},
]
PROGRAM = "subtract(206588, 181001), divide(#0, 181001)"


def _calls(a: float, looked_up: str = "net cash from operating activities") -> list[dict[str, Any]]:
    return [
        {"name": "lookup", "args": {"metric": looked_up, "year": 2009}, "result": 206588},
        {"name": "lookup", "args": {"metric": looked_up, "year": 2008}, "result": 181001},
        {"name": "subtract", "args": {"a": a, "b": 181001}, "result": a - 181001},
        {"name": "divide", "args": {"a": a - 181001, "b": 181001}, "result": (a - 181001) / 181001},
    ]


# (response, ground truth, tool calls): right, wrong, unparsable, a missing call, a text answer.
VARIANTS: list[tuple[str, str, list[dict[str, Any]]]] = [
    ("14.14%", "0.14136", _calls(206588)),
    ("0.1414", "0.14136", _calls(206588)),
    ("12.2%", "0.14136", _calls(203000)),
    ("about a seventh", "0.14136", _calls(206588, "operating cash")),
    ("14.1%", "0.14136", _calls(206588)[:2]),
    (" Yes ", "yes", []),
]


@dataclass
class Workload:
    name: str
    metrics: list[dict[str, Any]]
    tools: bool
    per_call_config: bool = False
    run_async: bool = False
    # Share of --verdicts this row grades (building configs on every call is slow).
    share: float = 1.0


WORKLOADS = [
    Workload("numeric", [NUMERIC], tools=False),
    Workload("equality", [EQUALITY], tools=False),
    Workload("tool expectations (3, literal/fuzzy/regex)", [], tools=True),
    Workload("code grader (program_equivalent)", [CODE], tools=False),
    Workload("mixed: numeric + equality + code + tools", [NUMERIC, EQUALITY, CODE], tools=True),
    Workload(
        "mixed, configs built on every call",
        [NUMERIC, EQUALITY, CODE],
        tools=True,
        per_call_config=True,
        share=0.05,
    ),
    Workload(
        "mixed, `await grade_turn` in one loop (the engine's path)",
        [NUMERIC, EQUALITY, CODE],
        tools=True,
        run_async=True,
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--verdicts", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="for the several-threads row")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    os.chdir(REPO)
    print(f"load before: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    rows = []
    digests = []
    for workload in WORKLOADS:
        n = max(int(args.verdicts * workload.share), len(VARIANTS))
        api = [measure_api(workload, n) for _ in range(args.repeat)]
        alone = [measure_graders(workload, args.verdicts) for _ in range(args.repeat)]
        digests.append(api[0][2])
        rows.append((workload.name, api, alone))
    threaded = [measure_threads(args.verdicts, args.threads) for _ in range(args.repeat)]
    print(f"load after: {os.getloadavg()[0]:.2f} (1 min)")
    print()
    print(
        f"{args.verdicts} verdicts per round (the configs-on-every-call row: 5%), median of "
        f"{args.repeat} rounds (µs per verdict; CPU counts every thread)"
    )
    print()
    print("| workload | API CPU | API wall | graders alone CPU | API / graders |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, api, alone in rows:
        cpu = statistics.median(r[0] for r in api)
        wall = statistics.median(r[1] for r in api)
        own = statistics.median(alone)
        print(f"| {name} | {cpu:.1f} | {wall:.1f} | {own:.1f} | {cpu / own:.1f}× |")
    cpu = statistics.median(r[0] for r in threaded)
    wall = statistics.median(r[1] for r in threaded)
    name = f"mixed, grade_turn_sync from {args.threads} threads at once"
    print(f"| {name} | {cpu:.1f} | {wall:.1f} | | |")
    print()
    print("results digest:", hashlib.sha256("".join(digests).encode()).hexdigest()[:16])


# --- through the public API ------------------------------------------------------------------


def _configs(workload: Workload) -> tuple[list[Any], list[Any]]:
    from runs.core.engine.grading import expectations_from_yaml, metrics_from_yaml

    metrics = metrics_from_yaml(workload.metrics, base_dir=EXAMPLE)
    expected = expectations_from_yaml(EXPECTED_TOOLS) if workload.tools else []
    return metrics, expected


def _facts() -> list[Any]:
    from runs.core.engine.grading import TurnFacts

    return [
        TurnFacts(
            input="what was the percentage change between those years?",
            response=response,
            ground_truth=truth,
            tool_invocations=calls,
            turn_config={"turn_program": PROGRAM},
            case_name="northwind_operating_cash",
            turn_index=2,
        )
        for response, truth, calls in VARIANTS
    ]


def measure_api(workload: Workload, n: int) -> tuple[float, float, str]:
    """CPU and wall µs per verdict through the API, and a digest of the verdicts."""
    from runs.core.engine.grading import grade_turn, grade_turn_sync

    facts = _facts()
    metrics, expected = _configs(workload)
    grades: list[Any] = []
    keep = grades.append
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if workload.run_async:

        async def loop() -> None:
            for i in range(n):
                keep(
                    await grade_turn(
                        facts[i % len(facts)], metrics=metrics, expected_tools=expected
                    )
                )

        asyncio.run(loop())
    elif workload.per_call_config:
        for i in range(n):
            metrics, expected = _configs(workload)
            keep(grade_turn_sync(facts[i % len(facts)], metrics=metrics, expected_tools=expected))
    else:
        for i in range(n):
            keep(grade_turn_sync(facts[i % len(facts)], metrics=metrics, expected_tools=expected))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return cpu / n * 1e6, wall / n * 1e6, _digest(grades[: len(facts)])


def measure_threads(n: int, threads: int) -> tuple[float, float]:
    """The mixed workload from several threads at once, sharing one set of configs."""
    from runs.core.engine.grading import grade_turn_sync

    facts = _facts()
    metrics, expected = _configs(WORKLOADS[4])
    share = n // threads
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for i in range(share):
                grade_turn_sync(facts[i % len(facts)], metrics=metrics, expected_tools=expected)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if errors:
        raise errors[0]
    done = share * threads
    return cpu / done * 1e6, wall / done * 1e6


def _digest(grades: list[Any]) -> str:
    """The verdicts without their timings."""
    shown = [
        {
            "metrics": [
                m.model_dump(mode="json", exclude={"evaluation_time_ms"}) for m in g.metric_results
            ],
            "details": g.grader_details,
            "tools": g.arg_match_details,
            "matched": g.tools_matched,
            "stop": g.stop_reason,
            "passed": g.passed,
        }
        for g in grades
    ]
    return hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()


# --- the graders alone -----------------------------------------------------------------------


def measure_graders(workload: Workload, n: int) -> float:
    """CPU µs per verdict of the grader functions called directly on prepared inputs."""
    steps = _grader_steps(workload)
    cpu0 = time.process_time()
    for i in range(n):
        for step in steps[i % len(steps)]:
            step()
    return (time.process_time() - cpu0) / n * 1e6


def _code_grader_alone(normalize: Callable[[Any], Any], fn: Callable[[Any], Any], ctx: Any) -> Any:
    return normalize(fn(ctx))


def _grader_steps(workload: Workload) -> list[list[Callable[[], Any]]]:
    from graders.code import GraderContext, normalize_grader_output
    from graders.deterministic import grade_equality, grade_numeric
    from graders.tool_calls import assert_tools
    from runs.core.wire.models import ToolInvocation

    metrics, expected = _configs(workload)
    per_variant = []
    for response, truth, calls in VARIANTS:
        invocations = [ToolInvocation.model_validate(call) for call in calls]
        steps: list[Callable[[], Any]] = []
        for metric in metrics:
            if metric.kind == "code":
                ctx = GraderContext(
                    turn_input="q",
                    agent_response=response,
                    ground_truth=truth,
                    tool_invocations=calls,
                    turn_config={"turn_program": PROGRAM},
                )
                fn = metric.callable  # type: ignore[union-attr]
                steps.append(partial(_code_grader_alone, normalize_grader_output, fn, ctx))
            elif metric.metric == "numeric":  # type: ignore[union-attr]
                steps.append(
                    partial(
                        grade_numeric,
                        response,
                        truth,
                        absolute_tolerance=metric.absolute_tolerance,  # type: ignore[union-attr]
                        relative_tolerance=metric.relative_tolerance,  # type: ignore[union-attr]
                        accept_percent=metric.accept_percent,  # type: ignore[union-attr]
                        accept_thousands_separators=metric.accept_thousands_separators,  # type: ignore[union-attr]
                    )
                )
            else:
                steps.append(
                    partial(
                        grade_equality,
                        response,
                        truth,
                        case_insensitive=True,
                        strip_whitespace=True,
                    )
                )
        if expected:
            steps.append(partial(assert_tools, expected, invocations))
        per_variant.append(steps)
    return per_variant


if __name__ == "__main__":
    main()
