"""Code graders are imported under a time limit (HOLODECK_GRADER_IMPORT_TIMEOUT) with their
output captured: a module that hangs or exits at import is a ConfigError naming its file, the
metric's field and what it printed; normal graders still load."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runs.core.agentconfig.errors import ConfigError
from runs.core.agentconfig.loader import load_agent

AGENT = """\
name: a
model: {provider: scripted, name: s}
instructions: {inline: x}
evaluations:
  metrics:
    - type: code
      grader: "graders_here.%s:check"
test_cases:
  - {input: hi, ground_truth: hello}
"""

GRADER = "def check(ctx):\n    return True\n"

ARGPARSE = (
    """\
import argparse

parser = argparse.ArgumentParser(prog="scorer")
parser.add_argument("--threshold", required=True)
parser.parse_args()
"""
    + GRADER
)


def agent_with(tmp_path: Path, module: str, source: str) -> Path:
    (tmp_path / "graders_here").mkdir(exist_ok=True)
    (tmp_path / "graders_here" / "__init__.py").write_text("")
    (tmp_path / "graders_here" / f"{module}.py").write_text(source)
    (tmp_path / "agent.yaml").write_text(AGENT % module)
    return tmp_path / "agent.yaml"


def problem_line(agent: Path, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_agent(agent, environ=environ)
    (line,) = caught.value.lines()
    return line


# Sleeps 30 s at import, unless the test ends it early: a hung import holds the import lock
# until it ends, and would make the next test's load wait behind it.
SLEEPY = (
    """\
import pathlib
import time

print("warming up")
for _ in range(300):
    if (pathlib.Path(__file__).parent / "stop").exists():
        break
    time.sleep(0.1)
"""
    + GRADER
)


@pytest.fixture
def stop_sleeping(tmp_path: Path) -> Iterator[None]:
    yield
    (tmp_path / "graders_here" / "stop").write_text("")
    for thread in threading.enumerate():
        if thread.name.startswith("holodeck-import"):
            thread.join(timeout=30)


def test_a_grader_whose_import_sleeps_30_s_is_refused_within_the_limit(
    tmp_path: Path, stop_sleeping: None
) -> None:
    agent = agent_with(tmp_path, "sleepy", SLEEPY)
    started = time.monotonic()
    line = problem_line(agent, {"HOLODECK_GRADER_IMPORT_TIMEOUT": "2"})
    elapsed = time.monotonic() - started

    assert elapsed < 25, f"the load waited for the sleep ({elapsed:.1f} s)"
    assert "evaluations.metrics[0].grader" in line
    assert "graders_here/sleepy.py" in line
    assert "did not finish within 2 s (HOLODECK_GRADER_IMPORT_TIMEOUT)" in line
    assert "its output: warming up" in line


def test_a_grader_that_runs_argparse_at_import_names_its_file_and_quotes_the_usage(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    line = problem_line(agent_with(tmp_path, "scorer", ARGPARSE))

    assert "evaluations.metrics[0].grader" in line
    assert "graders_here/scorer.py" in line and "SystemExit: 2" in line
    assert "usage: scorer [-h] --threshold THRESHOLD" in line
    assert "the following arguments are required: --threshold" in line
    assert "usage:" not in capfd.readouterr().err  # nothing anonymous reached stderr


def test_a_normal_grader_still_loads_and_its_prints_are_attributed_to_its_file(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    agent = agent_with(tmp_path, "fine", "print('loaded the table')\n" + GRADER)
    loaded = load_agent(agent)

    (metric,) = loaded.config.evaluations.metrics  # type: ignore[union-attr]
    assert metric.callable(None) is True  # type: ignore[union-attr]
    err = capfd.readouterr().err
    assert "importing 'graders_here.fine' (graders_here/fine.py): loaded the table" in err


def test_a_bad_limit_is_a_problem_of_the_environment(tmp_path: Path) -> None:
    agent = agent_with(tmp_path, "fine", GRADER)
    line = problem_line(agent, {"HOLODECK_GRADER_IMPORT_TIMEOUT": "soon"})
    assert "HOLODECK_GRADER_IMPORT_TIMEOUT" in line and "'soon'" in line
