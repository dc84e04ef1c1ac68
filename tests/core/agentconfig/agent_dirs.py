"""Builders of small agent directories on disk for the spec tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

GRADER_SOURCE = """\
from __future__ import annotations

NOT_CALLABLE = 42


def check(ctx):
    return True


def other(ctx):
    return 0.5
"""

TOOLS_SOURCE = """\
def subtract(a: float, b: float) -> float:
    return a - b


def divide(a: float, b: float) -> float:
    return a / b
"""

BASE_AGENT: dict[str, Any] = {
    "name": "spec-test-agent",
    "model": {"provider": "scripted", "name": "scripted-test"},
    "instructions": {"inline": "Answer with a number."},
    "tools": [
        {
            "type": "function",
            "name": "subtract",
            "file": "tools/finance.py",
            "function": "subtract",
        },
        {"type": "function", "name": "divide", "file": "tools/finance.py", "function": "divide"},
    ],
    "test_cases": [
        {
            "name": "cash",
            "turns": [
                {"input": "What was cash in 2009?", "ground_truth": "206588"},
                {"input": "And in 2008?", "ground_truth": "181001"},
                {
                    "input": "What was the change?",
                    "ground_truth": "25587",
                    "expected_tools": [
                        "subtract",
                        {"name": "subtract", "args": {"a": 206588, "b": {"fuzzy": "181,001"}}},
                    ],
                    "evaluations": [{"type": "standard", "metric": "numeric"}],
                },
            ],
        },
        {"name": "legacy", "input": "Hello?", "ground_truth": "Hi"},
    ],
}


def base_agent() -> dict[str, Any]:
    return copy.deepcopy(BASE_AGENT)


def make_agent_dir(root: Path, agent: dict[str, Any] | str | None = None) -> Path:
    """Write agent.yaml (a dict is dumped as YAML, a str written as-is) plus tools and graders.

    Returns the path of agent.yaml.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools").mkdir(exist_ok=True)
    (root / "tools" / "finance.py").write_text(TOOLS_SOURCE)
    (root / "graders").mkdir(exist_ok=True)
    (root / "graders" / "program.py").write_text(GRADER_SOURCE)
    (root / "prompts").mkdir(exist_ok=True)
    (root / "prompts" / "system.md").write_text("You are a careful analyst.\n")
    (root / "report.pdf").write_bytes(b"%PDF-1.4\n")
    if agent is None:
        agent = base_agent()
    text = agent if isinstance(agent, str) else yaml.safe_dump(agent, sort_keys=False)
    path = root / "agent.yaml"
    path.write_text(text)
    return path
