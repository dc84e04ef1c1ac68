"""``validate_agent`` and ``agent_schema``: exit codes and output."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from runs.core.agentconfig.validate import validate_agent_file
from tests.core.agentconfig.agent_dirs import base_agent, make_agent_dir


def test_a_valid_agent_reports_cases_and_turns(tmp_path: Path) -> None:
    assert validate_agent_file(make_agent_dir(tmp_path), environ={}) == (
        0,
        ["OK: spec-test-agent: 2 test cases, 4 turns"],
    )


def test_an_invalid_agent_reports_every_problem_and_exit_code_2(tmp_path: Path) -> None:
    data = base_agent()
    data["colour"] = "red"
    data["test_cases"][0]["turns"][0]["input"] = ""
    code, lines = validate_agent_file(make_agent_dir(tmp_path, data), environ={})
    assert code == 2
    assert lines == [
        "agent.yaml: colour: unknown field",
        "agent.yaml: test case 'cash' (turn 0): turns[0].input: input must not be empty",
    ]


def test_validate_agent_command_prints_ok(tmp_path: Path) -> None:
    out = StringIO()
    call_command("validate_agent", str(make_agent_dir(tmp_path)), stdout=out)
    assert out.getvalue() == "OK: spec-test-agent: 2 test cases, 4 turns\n"


def test_validate_agent_command_exits_2_with_problems_on_stderr(tmp_path: Path) -> None:
    data = base_agent()
    data["model"]["provider"] = "gemini"
    err = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("validate_agent", str(make_agent_dir(tmp_path, data)), stderr=err)
    assert exited.value.code == 2
    assert err.getvalue().startswith("agent.yaml: model.provider: Input should be")


def test_agent_schema_command_prints_or_writes_the_schema(tmp_path: Path) -> None:
    out = StringIO()
    call_command("agent_schema", stdout=out)
    assert json.loads(out.getvalue())["title"] == "HoloDeck agent.yaml"

    target = tmp_path / "agent.schema.json"
    call_command("agent_schema", output=str(target), stdout=StringIO())
    assert json.loads(target.read_text()) == json.loads(out.getvalue())
