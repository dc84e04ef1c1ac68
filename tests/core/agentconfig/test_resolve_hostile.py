"""User code that misbehaves while it is imported is a problem of the config, not a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from runs.core.agentconfig.errors import ConfigError
from runs.core.agentconfig.loader import load_agent
from runs.core.agentconfig.resolve import CodeResolver, ResolveError

ARGPARSE_SCRIPT = """\
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--required", required=True)
parser.parse_args()  # exits (SystemExit 2) when imported without arguments


def check(ctx):
    return True
"""


@pytest.mark.parametrize("statement", ["raise SystemExit(3)", "import sys; sys.exit()"])
def test_a_grader_that_exits_at_import_is_reported_with_its_module(
    tmp_path: Path, statement: str
) -> None:
    (tmp_path / "quitter.py").write_text(f"{statement}\n\ndef check(ctx):\n    return 1\n")
    with pytest.raises(ResolveError, match=r"importing 'quitter' failed: SystemExit"):
        CodeResolver(tmp_path).grader("quitter:check")


def test_an_argparse_script_as_a_tool_file_is_a_config_error_naming_the_tool(
    tmp_path: Path,
) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "cli.py").write_text(ARGPARSE_SCRIPT)
    (tmp_path / "agent.yaml").write_text(
        "name: a\nmodel: {provider: scripted, name: s}\ninstructions: {inline: x}\n"
        "tools:\n  - {type: function, name: cli, file: tools/cli.py, function: check}\n"
        "test_cases:\n  - {input: hi, ground_truth: hello}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_agent(tmp_path / "agent.yaml")
    (line,) = caught.value.lines()
    assert "tools[0]" in line and "SystemExit" in line


def test_a_keyboard_interrupt_during_an_import_still_stops_the_process(tmp_path: Path) -> None:
    (tmp_path / "stop.py").write_text("raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        CodeResolver(tmp_path).grader("stop:check")
