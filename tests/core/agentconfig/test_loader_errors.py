"""Every invalid agent.yaml is reported with file, test case, turn, field path and a cause."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from runs.core.agentconfig.errors import ConfigError, ConfigProblem
from runs.core.agentconfig.loader import load_agent
from tests.core.agentconfig.agent_dirs import base_agent, make_agent_dir

Agent = dict[str, Any]


@dataclass(frozen=True)
class Invalid:
    id: str
    change: Callable[[Agent], Any] | str  # mutate the base agent, or the raw agent.yaml text
    file: str
    test_case: str | None
    turn: int | None
    field_path: str
    message: str  # a part of the one-line cause
    environ: tuple[tuple[str, str], ...] = ()


def turn(agent: Agent, index: int) -> dict[str, Any]:
    return agent["test_cases"][0]["turns"][index]


def set_turn(index: int, **fields: Any) -> Callable[[Agent], None]:
    return lambda agent: turn(agent, index).update(fields)


def set_arg(matcher: Any) -> Callable[[Agent], None]:
    def change(agent: Agent) -> None:
        turn(agent, 2)["expected_tools"][1]["args"]["b"] = matcher

    return change


def turn_metric(metric: dict[str, Any]) -> Callable[[Agent], None]:
    return set_turn(2, evaluations=[metric])


def add_tool(tool: dict[str, Any]) -> Callable[[Agent], None]:
    return lambda agent: agent["tools"].append(tool)


def _both_case_sources(agent: Agent) -> None:
    agent["test_cases_file"] = "cases.yaml"


def _turns_with_input(agent: Agent) -> None:
    agent["test_cases"][0]["input"] = "Hello"


def _empty_turns(agent: Agent) -> None:
    agent["test_cases"][0]["turns"] = []


def _unnamed_case_without_input(agent: Agent) -> None:
    agent["test_cases"].append({"ground_truth": "x"})


def execution(**fields: Any) -> Callable[[Agent], None]:
    return lambda agent: agent.update(execution=fields)


def model(**fields: Any) -> Callable[[Agent], None]:
    return lambda agent: agent["model"].update(fields)


def agent_metric(metric: dict[str, Any]) -> Callable[[Agent], None]:
    return lambda agent: agent.update(evaluations={"metrics": [metric]})


def case_metric(metric: dict[str, Any]) -> Callable[[Agent], None]:
    return lambda agent: agent["test_cases"][1].update(evaluations=[metric])


def _duplicate_tools(agent: Agent) -> None:
    agent["tools"][1]["name"] = "subtract"


CASE = "cash"
ARG_B = "turns[2].expected_tools[1].args.b"
T2_METRIC = "turns[2].evaluations[0]"
PDF = {"path": "report.pdf", "type": "pdf"}
NAN = float("nan")
INF = float("inf")

INVALID = [
    Invalid("two metrics with one name",
            set_turn(2, evaluations=[{"metric": "numeric"}, {"metric": "numeric",
                                                              "absolute_tolerance": 0.5}]),
            "agent.yaml", CASE, 2, "turns[2].evaluations", "two metrics are named 'numeric'"),
    Invalid("turns together with input", _turns_with_input, "agent.yaml", CASE, None,
            "turns", "'turns' cannot be combined with input"),
    Invalid("empty turns", _empty_turns, "agent.yaml", CASE, None,
            "turns", "turns must not be empty"),
    Invalid("bad regex", set_arg({"regex": "(unclosed"}), "agent.yaml", CASE, 2,
            f"{ARG_B}.regex", "invalid regex '(unclosed'"),
    Invalid("fuzzy and regex in one dict", set_arg({"fuzzy": "1", "regex": "1"}), "agent.yaml",
            CASE, 2, ARG_B, "either 'fuzzy' or 'regex', not both"),
    Invalid("matcher dict with an extra key", set_arg({"fuzzy": "1", "note": "x"}), "agent.yaml",
            CASE, 2, ARG_B, "must be the only key"),
    Invalid("non-string fuzzy pattern", set_arg({"fuzzy": 181001}), "agent.yaml", CASE, 2,
            f"{ARG_B}.fuzzy", "must be a string"),
    Invalid("count 0", set_turn(2, expected_tools=[{"name": "subtract", "count": 0}]),
            "agent.yaml", CASE, 2, "turns[2].expected_tools[0].count", "count must be >= 1"),
    Invalid("expected tool that is a number", set_turn(2, expected_tools=[7]), "agent.yaml",
            CASE, 2, "turns[2].expected_tools[0]", "a tool name or a mapping"),
    Invalid("dotted arg name", set_turn(2, expected_tools=[{"name": "x", "args": {"a.b": 1}}]),
            "agent.yaml", CASE, 2, "turns[2].expected_tools[0].args", "plain argument name"),
    Invalid("negative tolerance", turn_metric({"metric": "numeric", "absolute_tolerance": -0.1}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.absolute_tolerance", "must be >= 0"),
    Invalid("grader with a bad path", turn_metric({"type": "code", "grader": "graders/program.py"}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.grader", "must look like 'module.path:callable'"),
    Invalid("grader module missing", turn_metric({"type": "code", "grader": "nowhere.mod:check"}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.grader", "'nowhere.mod' was not found"),
    Invalid("grader attribute missing",
            turn_metric({"type": "code", "grader": "graders.program:nope"}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.grader", "has no attribute 'nope'"),
    Invalid("grader not callable",
            turn_metric({"type": "code", "grader": "graders.program:NOT_CALLABLE"}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.grader", "'NOT_CALLABLE' is not callable"),
    Invalid("retry_on_failure 4", turn_metric({"metric": "bleu", "retry_on_failure": 4}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.retry_on_failure", "between 1 and 3, got 4"),
    Invalid("timeout_ms 0", turn_metric({"metric": "bleu", "timeout_ms": 0}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.timeout_ms", "must be positive"),
    Invalid("unknown metric type", turn_metric({"type": "llm", "metric": "bleu"}),
            "agent.yaml", CASE, 2, T2_METRIC, "standard, geval, rag or code"),
    Invalid("unknown standard metric", turn_metric({"metric": "f1"}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.metric", "got 'f1'"),
    Invalid("geval without criteria", turn_metric({"type": "geval", "name": "tone"}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.criteria", "required field is missing"),
    Invalid("bad response_path", turn_metric({"metric": "equality", "response_path": "a..b"}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.response_path", "keys joined by dots"),
    Invalid("missing ${VAR}",
            "name: x\nmodel:\n  provider: openai\n  name: gpt-4o\n  api_key: ${HOLODECK_NOPE}\n",
            "agent.yaml", None, None, "", "line 5: environment variable HOLODECK_NOPE is not set"),
    Invalid("test_cases with test_cases_file", _both_case_sources, "agent.yaml", None, None,
            "test_cases_file", "either test_cases or test_cases_file, not both"),
    Invalid("unknown top-level field", lambda a: a.update(colour="red"), "agent.yaml", None, None,
            "colour", "unknown field"),
    Invalid("unknown field in a turn", set_turn(1, expected_output="x"), "agent.yaml", CASE, 1,
            "turns[1].expected_output", "unknown field"),
    Invalid("unknown field in an agent metric",
            lambda a: a.update(evaluations={"metrics": [{"metric": "bleu", "weight": 2}]}),
            "agent.yaml", None, None, "evaluations.metrics[0].weight", "unknown field"),
    Invalid("unknown field in a turn metric", turn_metric({"metric": "bleu", "weight": 2}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.weight", "unknown field"),
    Invalid("empty metrics list", lambda a: a.update(evaluations={"metrics": []}),
            "agent.yaml", None, None, "evaluations.metrics", "at least one metric"),
    Invalid("11 files on a turn", set_turn(0, files=[PDF] * 11), "agent.yaml", CASE, 0,
            "turns[0].files", "at most 10 files per turn, got 11"),
    Invalid("file with both path and url",
            set_turn(0, files=[{"path": "report.pdf", "url": "https://x/y.pdf", "type": "pdf"}]),
            "agent.yaml", CASE, 0, "turns[0].files[0]", "exactly one of 'path' or 'url'"),
    Invalid("file of an unknown type", set_turn(0, files=[{"path": "report.pdf", "type": "zip"}]),
            "agent.yaml", CASE, 0, "turns[0].files[0].type", "got 'zip'"),
    Invalid("file page 0", set_turn(0, files=[{**PDF, "pages": [1, 0]}]), "agent.yaml", CASE, 0,
            "turns[0].files[0].pages[1]", "greater than 0"),
    Invalid("missing local file", set_turn(0, files=[{"path": "nope.pdf", "type": "pdf"}]),
            "agent.yaml", CASE, 0, "turns[0].files[0].path", "'nope.pdf' was not found"),
    Invalid("duplicate tool names", _duplicate_tools, "agent.yaml", None, None,
            "tools[1].name", "duplicate tool name 'subtract' (also tools[0])"),
    Invalid("tool name with a dash", lambda a: a["tools"][0].update(name="sub-tract"),
            "agent.yaml", None, None, "tools[0].name", "letters, digits and _"),
    Invalid("function tool attribute missing", lambda a: a["tools"][0].update(function="minus"),
            "agent.yaml", None, None, "tools[0].function", "has no attribute 'minus'"),
    Invalid("function tool file missing", lambda a: a["tools"][0].update(file="tools/x.py"),
            "agent.yaml", None, None, "tools[0].file", "'tools/x.py' was not found"),
    Invalid("stdio mcp without command", add_tool({"type": "mcp", "name": "docs"}),
            "agent.yaml", None, None, "tools[2].command", "needs 'command'"),
    Invalid("http mcp without url", add_tool({"type": "mcp", "name": "docs", "transport": "http"}),
            "agent.yaml", None, None, "tools[2].url", "needs 'url'"),
    Invalid("empty input", set_turn(1, input="   "), "agent.yaml", CASE, 1,
            "turns[1].input", "input must not be empty"),
    Invalid("empty ground_truth", set_turn(0, ground_truth=""), "agent.yaml", CASE, 0,
            "turns[0].ground_truth", "ground_truth must not be empty"),
    Invalid("unnamed case without input", _unnamed_case_without_input, "agent.yaml", "#2", None,
            "input", "needs 'input' (single-turn) or 'turns'"),
    Invalid("unknown provider", lambda a: a["model"].update(provider="gemini"), "agent.yaml",
            None, None, "model.provider", "got 'gemini'"),
    Invalid("transcript file missing", lambda a: a["model"].update(transcript="t.yaml"),
            "agent.yaml", None, None, "model.transcript", "'t.yaml' was not found"),
    Invalid("instructions file missing", lambda a: a.update(instructions={"file": "p.md"}),
            "agent.yaml", None, None, "instructions.file", "'p.md' was not found"),
    Invalid("parallel_test_cases 0", lambda a: a.update(execution={"parallel_test_cases": 0}),
            "agent.yaml", None, None, "execution.parallel_test_cases", "must be >= 1, got 0"),
    Invalid("bad parallel env", lambda a: None, "environment", None, None,
            "HOLODECK_PARALLEL_TEST_CASES", "must be an integer >= 1, got 'many'",
            environ=(("HOLODECK_PARALLEL_TEST_CASES", "many"),)),
    # --- bounds: every number finite and in a range that means something
    Invalid("parallel_test_cases 1e21", execution(parallel_test_cases=1e21), "agent.yaml", None,
            None, "execution.parallel_test_cases", "must be <= 1024, got 1e+21"),
    Invalid("parallel_test_cases 1025", execution(parallel_test_cases=1025), "agent.yaml", None,
            None, "execution.parallel_test_cases", "must be <= 1024, got 1025"),
    Invalid("parallel env above the bound", lambda a: None, "environment", None, None,
            "HOLODECK_PARALLEL_TEST_CASES", "must be an integer <= 1024, got '100000'",
            environ=(("HOLODECK_PARALLEL_TEST_CASES", "100000"),)),
    Invalid("threshold 5", turn_metric({"metric": "numeric", "threshold": 5}), "agent.yaml", CASE,
            2, f"{T2_METRIC}.threshold",
            "threshold of metric 'numeric' must be between 0 and 1 (scores are 0..1), got 5"),
    Invalid("threshold -0.5", agent_metric({"type": "geval", "name": "tone", "criteria": "Polite",
                                            "threshold": -0.5}),
            "agent.yaml", None, None, "evaluations.metrics[0].threshold",
            "threshold of metric 'tone' must be between 0 and 1 (scores are 0..1), got -0.5"),
    Invalid("threshold .nan", turn_metric({"type": "rag", "metric_type": "faithfulness",
                                           "threshold": NAN}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.threshold",
            "metric 'faithfulness' must be between 0 and 1 (scores are 0..1), got nan"),
    Invalid("threshold .inf", case_metric({"type": "code", "grader": "graders.program:check",
                                           "threshold": INF}),
            "agent.yaml", "legacy", None, "evaluations[0].threshold",
            "threshold of metric 'check' must be between 0 and 1 (scores are 0..1), got inf"),
    Invalid("threshold 1.01", turn_metric({"metric": "bleu", "threshold": 1.01}), "agent.yaml",
            CASE, 2, f"{T2_METRIC}.threshold", "metric 'bleu' must be between 0 and 1"),
    Invalid("llm_timeout .inf", execution(llm_timeout=INF), "agent.yaml", None, None,
            "execution.llm_timeout", "llm_timeout must be a finite number, got inf"),
    Invalid("file_timeout .nan", execution(file_timeout=NAN), "agent.yaml", None, None,
            "execution.file_timeout", "file_timeout must be a finite number, got nan"),
    Invalid("download_timeout 0", execution(download_timeout=0), "agent.yaml", None, None,
            "execution.download_timeout", "download_timeout must be positive, got 0"),
    Invalid("llm_timeout above a day", execution(llm_timeout=86401), "agent.yaml", None, None,
            "execution.llm_timeout", "llm_timeout must be <= 86400 (24 h), got 86401"),
    Invalid("timeout_ms .inf", turn_metric({"metric": "bleu", "timeout_ms": INF}), "agent.yaml",
            CASE, 2, f"{T2_METRIC}.timeout_ms", "timeout_ms must be a finite number, got inf"),
    Invalid("timeout_ms above a day", turn_metric({"metric": "bleu", "timeout_ms": 10**11}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.timeout_ms",
            "timeout_ms must be <= 86400000 (24 h), got 100000000000"),
    Invalid("scale 0", turn_metric({"type": "geval", "name": "t", "criteria": "c", "scale": 0}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.scale", "scale must be >= 1, got 0"),
    Invalid("latency_ms .inf", model(latency_ms=INF), "agent.yaml", None, None,
            "model.latency_ms", "latency_ms must be a finite number, got inf"),
    Invalid("latency_ms above ten minutes", model(latency_ms=600_001), "agent.yaml", None, None,
            "model.latency_ms", "latency_ms must be <= 600000 (10 min), got 600001"),
    Invalid("temperature 2.5", model(temperature=2.5), "agent.yaml", None, None,
            "model.temperature", "temperature must be <= 2, got 2.5"),
    Invalid("temperature .nan", model(temperature=NAN), "agent.yaml", None, None,
            "model.temperature", "temperature must be a finite number, got nan"),
    Invalid("top_p 1.5", model(top_p=1.5), "agent.yaml", None, None, "model.top_p",
            "top_p must be <= 1, got 1.5"),
    Invalid("max_tokens 0", model(max_tokens=0), "agent.yaml", None, None, "model.max_tokens",
            "max_tokens must be >= 1, got 0"),
    Invalid("max_tokens 1e9", model(max_tokens=10**9), "agent.yaml", None, None,
            "model.max_tokens", "max_tokens must be <= 1000000, got 1000000000"),
    Invalid("judge temperature -1",
            turn_metric({"type": "geval", "name": "t", "criteria": "c",
                         "model": {"provider": "openai", "name": "gpt-4o", "temperature": -1}}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.model.temperature",
            "temperature must be >= 0, got -1"),
    Invalid("absolute_tolerance .nan", turn_metric({"metric": "numeric",
                                                    "absolute_tolerance": NAN}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.absolute_tolerance",
            "absolute_tolerance must be a finite number, got nan"),
    Invalid("relative_tolerance .inf", turn_metric({"metric": "numeric",
                                                    "relative_tolerance": INF}),
            "agent.yaml", CASE, 2, f"{T2_METRIC}.relative_tolerance",
            "relative_tolerance must be a finite number, got inf"),
    Invalid("count 1001", set_turn(2, expected_tools=[{"name": "subtract", "count": 1001}]),
            "agent.yaml", CASE, 2, "turns[2].expected_tools[0].count",
            "count must be <= 1000, got 1001"),
    Invalid("count .inf", set_turn(2, expected_tools=[{"name": "subtract", "count": INF}]),
            "agent.yaml", CASE, 2, "turns[2].expected_tools[0].count",
            "count must be a finite number, got inf"),
    Invalid("claude max_turns 1e6", lambda a: a.update(claude={"max_turns": 10**6}),
            "agent.yaml", None, None, "claude.max_turns", "max_turns must be <= 1000"),
    Invalid("file page above the bound", set_turn(0, files=[{**PDF, "pages": [100_001]}]),
            "agent.yaml", CASE, 0, "turns[0].files[0].pages[0]", "less than or equal to 100000"),
    # --- duplicates
    Invalid("duplicate test case names", lambda a: a["test_cases"].append(
                {"name": "cash", "input": "again"}),
            "agent.yaml", CASE, None, "name",
            "duplicate test case name 'cash' (test cases #0 and #2)"),
    Invalid("duplicate key in a turn",
            "name: x\nmodel: {provider: scripted, name: s}\ninstructions: hi\ntest_cases:\n"
            "- name: dup\n  turns:\n  - input: a\n  - input: b\n    input: c\n",
            "agent.yaml", "dup", 1, "turns[1].input",
            "duplicate key 'input' at line 9 (first at line 8)"),
    Invalid("duplicate top-level key",
            "name: x\ntest_cases:\n- input: a\nmodel: {provider: scripted, name: s}\n"
            "test_cases:\n- input: b\n",
            "agent.yaml", None, None, "test_cases",
            "duplicate key 'test_cases' at line 5 (first at line 2)"),
    Invalid("invalid YAML", "name: x\nmodel: [unclosed\n", "agent.yaml", None, None, "",
            "invalid YAML at line 3, column 1"),
    Invalid("agent.yaml that is a list", "- name: x\n", "agent.yaml", None, None, "",
            "must be a mapping of agent fields"),
]  # fmt: skip


def load_problems(tmp_path: Path, entry: Invalid) -> list[ConfigProblem]:
    if isinstance(entry.change, str):
        path = make_agent_dir(tmp_path, entry.change)
    else:
        agent = base_agent()
        entry.change(agent)
        path = make_agent_dir(tmp_path, agent)
    with pytest.raises(ConfigError) as caught:
        load_agent(path, environ=dict(entry.environ))
    return caught.value.problems


@pytest.mark.parametrize("entry", INVALID, ids=[e.id for e in INVALID])
def test_each_invalid_config_names_file_case_turn_and_field(tmp_path: Path, entry: Invalid) -> None:
    problems = load_problems(tmp_path, entry)

    where = [(p.file, p.test_case, p.turn, p.field_path) for p in problems]
    expected = (entry.file, entry.test_case, entry.turn, entry.field_path)
    assert expected in where, f"{expected} not in {[str(p) for p in problems]}"
    problem = problems[where.index(expected)]
    assert entry.message in problem.message
    assert "\n" not in problem.message
    assert "errors.pydantic.dev" not in problem.message


def test_the_table_covers_at_least_25_invalid_configs() -> None:
    assert len(INVALID) >= 25


def test_a_file_with_several_problems_reports_all_of_them(tmp_path: Path) -> None:
    agent = base_agent()
    agent["colour"] = "red"
    agent["tools"][1]["name"] = "subtract"
    turn(agent, 0)["ground_truth"] = ""
    turn(agent, 2)["expected_tools"][1]["args"]["b"] = {"regex": "("}
    agent["test_cases"][1]["turns"] = [{"input": "x"}]
    agent["test_cases"].append({"input": "ok", "bogus": True})

    problems = load_problems_of(tmp_path, agent)

    assert [str(p) for p in problems] == [
        "agent.yaml: tools[1].name: duplicate tool name 'subtract' (also tools[0])",
        "agent.yaml: colour: unknown field",
        "agent.yaml: test case 'cash' (turn 0): turns[0].ground_truth: "
        "ground_truth must not be empty",
        "agent.yaml: test case 'cash' (turn 2): turns[2].expected_tools[1].args.b.regex: "
        "invalid regex '(': missing ), unterminated subpattern at position 0",
        "agent.yaml: test case 'legacy': turns: "
        "'turns' cannot be combined with input, ground_truth (move them into a turn)",
        "agent.yaml: test case #2: bogus: unknown field",
    ]


def test_config_error_message_lists_every_problem(tmp_path: Path) -> None:
    agent = base_agent()
    turn(agent, 0)["input"] = ""
    turn(agent, 1)["input"] = ""
    path = make_agent_dir(tmp_path, agent)
    with pytest.raises(ConfigError) as caught:
        load_agent(path, environ={})
    assert str(caught.value).splitlines() == [
        "2 problems in the agent configuration:",
        "  agent.yaml: test case 'cash' (turn 0): turns[0].input: input must not be empty",
        "  agent.yaml: test case 'cash' (turn 1): turns[1].input: input must not be empty",
    ]


def test_every_unset_variable_is_reported_with_its_line(tmp_path: Path) -> None:
    text = "name: ${A_NAME}\n# ${IN_A_COMMENT}\nmodel: {provider: openai, name: ${B_NAME}}\n"
    problems = load_problems_of(tmp_path, text)
    assert [p.message for p in problems] == [
        "line 1: environment variable A_NAME is not set",
        "line 3: environment variable B_NAME is not set",
    ]


def test_default_value_syntax_is_refused_rather_than_kept_literally(tmp_path: Path) -> None:
    problems = load_problems_of(tmp_path, "name: ${NAME:-x}\n")
    assert problems[0].message == "line 1: unsupported '${NAME:-x}': only ${NAME}"


def test_a_missing_agent_file_is_one_clear_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_agent(tmp_path / "nope" / "agent.yaml", environ={})
    [problem] = caught.value.problems
    assert problem.file == "agent.yaml"
    assert problem.message.startswith("file not found: ")


def test_problems_in_a_test_cases_file_name_that_file(tmp_path: Path) -> None:
    agent = base_agent()
    del agent["test_cases"]
    agent["test_cases_file"] = "cases/suite.yaml"
    path = make_agent_dir(tmp_path, agent)
    (tmp_path / "cases").mkdir()
    cases = [{"name": "ok", "input": "x"}, {"turns": [{"input": "a", "ground_truth": " "}]}]
    (tmp_path / "cases" / "suite.yaml").write_text(yaml.safe_dump(cases))

    with pytest.raises(ConfigError) as caught:
        load_agent(path, environ={})

    assert [str(p) for p in caught.value.problems] == [
        "cases/suite.yaml: test case #1 (turn 0): turns[0].ground_truth: "
        "ground_truth must not be empty"
    ]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("just text\n", "must be a list of test cases or a mapping with a 'test_cases' list"),
        ("test_cases: []\nextra: 1\n", "unknown key(s) extra: only 'test_cases' is read"),
        ("- input: [unclosed\n", "invalid YAML at line 2"),
    ],
)
def test_a_malformed_test_cases_file_is_reported(
    tmp_path: Path, payload: str, message: str
) -> None:
    agent = base_agent()
    del agent["test_cases"]
    agent["test_cases_file"] = "suite.yaml"
    path = make_agent_dir(tmp_path, agent)
    (tmp_path / "suite.yaml").write_text(payload)
    with pytest.raises(ConfigError) as caught:
        load_agent(path, environ={})
    [problem] = caught.value.problems
    assert problem.file == "suite.yaml"
    assert message in problem.message


def test_a_missing_test_cases_file_is_reported(tmp_path: Path) -> None:
    agent = base_agent()
    del agent["test_cases"]
    agent["test_cases_file"] = "missing.yaml"
    with pytest.raises(ConfigError) as caught:
        load_agent(make_agent_dir(tmp_path, agent), environ={})
    [problem] = caught.value.problems
    assert (problem.file, problem.message.split(":")[0]) == ("missing.yaml", "file not found")


def test_a_bad_command_line_parallel_value_is_a_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_agent(make_agent_dir(tmp_path), environ={}, parallel_override=0)
    assert [str(p) for p in caught.value.problems] == [
        "command line: parallel_test_cases: must be >= 1, got 0"
    ]


def load_problems_of(tmp_path: Path, agent: Agent | str) -> list[ConfigProblem]:
    with pytest.raises(ConfigError) as caught:
        load_agent(make_agent_dir(tmp_path, agent), environ={})
    return caught.value.problems
