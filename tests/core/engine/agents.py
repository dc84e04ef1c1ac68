"""Small agent directories written into tmp dirs for engine tests (scripted provider)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from runs.core.agentconfig.loader import LoadedAgent, load_agent

TOOLS = '''
def subtract(a: float, b: float) -> float:
    """Subtract b from a."""
    return a - b


def divide(a: float, b: float) -> float:
    return a / b


def explode(x: int) -> int:
    raise RuntimeError("tool blew up")


def quarterly() -> dict:
    return {(2023, "Q1"): 1.5, "nan": float("nan")}


def hang(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return "woke up"
'''

GRADERS = """
from graders.code import GraderResult


def always_half(ctx):
    return GraderResult(score=0.5, passed=True, details={"turn": ctx.turn_index})


def crash(ctx):
    raise ValueError("grader bug")
"""


def make_agent(
    tmp_path: Path,
    test_cases: list[dict[str, Any]],
    transcript: dict[str, list[dict[str, Any]]] | None = None,
    *,
    metrics: list[dict[str, Any]] | None = None,
    execution: dict[str, Any] | None = None,
    latency_ms: float = 0,
) -> LoadedAgent:
    (tmp_path / "tools").mkdir(exist_ok=True)
    (tmp_path / "tools" / "fin.py").write_text(TOOLS)
    (tmp_path / "checks").mkdir(exist_ok=True)
    (tmp_path / "checks" / "grade.py").write_text(GRADERS)
    model: dict[str, Any] = {"provider": "scripted", "name": "scripted-test"}
    if transcript is not None:
        (tmp_path / "transcript.yaml").write_text(yaml.safe_dump({"cases": transcript}))
        model["transcript"] = "transcript.yaml"
    if latency_ms:
        model["latency_ms"] = latency_ms
    config: dict[str, Any] = {
        "name": "engine-test",
        "model": model,
        "instructions": {"inline": "You are a careful calculator."},
        "tools": [
            {"type": "function", "name": name, "file": "tools/fin.py", "function": name}
            for name in ("subtract", "divide", "explode", "quarterly", "hang")
        ],
        "test_cases": test_cases,
    }
    if metrics is not None:
        config["evaluations"] = {"metrics": metrics}
    if execution is not None:
        config["execution"] = execution
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return load_agent(tmp_path / "agent.yaml")
