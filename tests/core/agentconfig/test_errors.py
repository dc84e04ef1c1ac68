"""ConfigProblem reads as one line naming file, case, turn and field."""

from __future__ import annotations

from runs.core.agentconfig.errors import ConfigError, ConfigProblem


def test_a_problem_reads_file_case_turn_path_and_cause() -> None:
    problem = ConfigProblem(
        "agent.yaml", "cash", 2, "turns[2].expected_tools[1].args.a.regex", "invalid regex '('"
    )
    assert str(problem) == (
        "agent.yaml: test case 'cash' (turn 2): turns[2].expected_tools[1].args.a.regex: "
        "invalid regex '('"
    )


def test_an_unnamed_case_is_shown_by_index_and_empty_parts_are_left_out() -> None:
    assert str(ConfigProblem("cases.yaml", "#3", None, "input", "x")) == (
        "cases.yaml: test case #3: input: x"
    )
    assert str(ConfigProblem("agent.yaml", None, None, "", "file not found")) == (
        "agent.yaml: file not found"
    )


def test_config_error_keeps_every_problem() -> None:
    problems = [
        ConfigProblem("a", None, None, "x", "one"),
        ConfigProblem("a", None, None, "y", "two"),
    ]
    error = ConfigError(problems)
    assert error.problems == problems
    assert error.lines() == ["a: x: one", "a: y: two"]
