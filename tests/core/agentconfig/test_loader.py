"""Valid agent.yaml files load into the models the engine uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from graders.matchers import FuzzyMatcher, LiteralMatcher, RegexMatcher
from runs.core.agentconfig.loader import PARALLEL_ENV, load_agent
from runs.core.agentconfig.metrics import CodeMetric, GEvalMetric, RAGMetric, StandardMetric
from tests.core.agentconfig.agent_dirs import base_agent, make_agent_dir


def test_it_loads_inline_instructions_and_resolves_tools(tmp_path: Path) -> None:
    agent = load_agent(make_agent_dir(tmp_path), environ={})

    assert agent.instructions == "Answer with a number."
    assert agent.base_dir == tmp_path.resolve()
    assert agent.path == (tmp_path / "agent.yaml").resolve()
    assert agent.raw_yaml == (tmp_path / "agent.yaml").read_text()
    subtract = agent.config.tools[0]
    assert subtract.type == "function" and subtract.callable(5, 3) == 2


def test_it_reads_instructions_from_a_file_relative_to_the_agent_dir(tmp_path: Path) -> None:
    data = base_agent()
    data["instructions"] = {"file": "prompts/system.md"}
    agent = load_agent(make_agent_dir(tmp_path, data), environ={})
    assert agent.instructions == "You are a careful analyst.\n"


def test_a_bare_string_is_inline_instructions(tmp_path: Path) -> None:
    data = base_agent()
    data["instructions"] = "Be brief."
    assert load_agent(make_agent_dir(tmp_path, data), environ={}).instructions == "Be brief."


def test_it_accepts_the_agent_directory_as_path(tmp_path: Path) -> None:
    make_agent_dir(tmp_path)
    assert load_agent(tmp_path, environ={}).config.name == "spec-test-agent"


def test_legacy_and_multi_turn_cases_both_run_as_turns(tmp_path: Path) -> None:
    cases = load_agent(make_agent_dir(tmp_path), environ={}).config.test_cases
    multi, legacy = cases

    assert multi.is_multi_turn and [t.input for t in multi.as_turns()] == [
        "What was cash in 2009?",
        "And in 2008?",
        "What was the change?",
    ]
    assert not legacy.is_multi_turn
    [only] = legacy.as_turns()
    assert (only.input, only.ground_truth) == ("Hello?", "Hi")
    assert legacy.as_turns()[0] is only  # the same turn object on every call


def test_legacy_case_level_fields_become_the_single_turn(tmp_path: Path) -> None:
    data = base_agent()
    data["test_cases"] = [
        {
            "input": "Where is A1?",
            "expected_tools": ["order_status"],
            "retrieval_context": ["A1 shipped"],
            "files": [{"path": "report.pdf", "type": "pdf", "pages": [1, 2]}],
            "evaluations": [{"metric": "bleu"}],
        }
    ]
    [case] = load_agent(make_agent_dir(tmp_path, data), environ={}).config.test_cases
    [only] = case.as_turns()
    assert [t.name for t in only.tool_expectations()] == ["order_status"]
    assert only.retrieval_context == ["A1 shipped"]
    assert only.files is not None and only.files[0].pages == [1, 2]
    assert only.evaluations is not None and only.evaluations[0].metric_name == "bleu"


def test_numbers_in_input_and_ground_truth_are_read_as_text(tmp_path: Path) -> None:
    data = base_agent()
    data["test_cases"] = [{"turns": [{"input": 2009, "ground_truth": 25587}]}]
    [case] = load_agent(make_agent_dir(tmp_path, data), environ={}).config.test_cases
    assert (case.as_turns()[0].input, case.as_turns()[0].ground_truth) == ("2009", "25587")


def test_it_parses_every_matcher_kind(tmp_path: Path) -> None:
    data = base_agent()
    data["test_cases"][0]["turns"][2]["expected_tools"] = [
        "divide",
        {
            "name": "subtract",
            "count": 2,
            "args": {
                "a": 206588,
                "b": {"fuzzy": "181,001"},
                "c": {"regex": r"2009.*cash"},
                "d": {"unit": "usd"},
                "e": [1, 2],
                "f": None,
            },
        },
    ]
    [multi, _] = load_agent(make_agent_dir(tmp_path, data), environ={}).config.test_cases

    bare, full = multi.as_turns()[2].tool_expectations()
    assert (bare.name, bare.args, bare.count) == ("divide", None, 1)
    assert full.count == 2
    args = full.args or {}
    assert args["a"] == LiteralMatcher(206588)
    assert args["b"] == FuzzyMatcher("181,001")
    assert isinstance(args["c"], RegexMatcher) and args["c"].compiled.pattern == r"2009.*cash"
    assert args["d"] == LiteralMatcher({"unit": "usd"})
    assert args["e"] == LiteralMatcher([1, 2])
    assert args["f"] == LiteralMatcher(None)


def test_metrics_of_each_type_load_with_their_defaults(tmp_path: Path) -> None:
    data = base_agent()
    data["evaluations"] = {
        "model": {"provider": "openai", "name": "gpt-4o-mini"},
        "metrics": [
            {"metric": "numeric"},
            {"type": "standard", "metric": "equality", "name": "exact", "threshold": 1},
            {"type": "geval", "name": "tone", "criteria": "Polite."},
            {"type": "rag", "metric_type": "faithfulness", "retry_on_failure": 3},
            {"type": "code", "grader": "graders.program:check", "timeout_ms": 500},
        ],
    }
    config = load_agent(make_agent_dir(tmp_path, data), environ={}).config
    assert config.evaluations is not None
    numeric, equality, geval, rag, code = config.evaluations.metrics

    assert isinstance(numeric, StandardMetric)
    assert (numeric.absolute_tolerance, numeric.relative_tolerance) == (1e-6, 0.0)
    assert not (numeric.accept_percent or numeric.accept_thousands_separators)
    assert (numeric.enabled, numeric.fail_on_error, numeric.threshold) == (True, False, None)
    assert isinstance(equality, StandardMetric)
    assert not (equality.case_insensitive or equality.strip_whitespace)
    assert isinstance(geval, GEvalMetric)
    assert (geval.evaluation_params, geval.strict_mode) == (["actual_output"], False)
    assert isinstance(rag, RAGMetric) and rag.retry_on_failure == 3
    assert isinstance(code, CodeMetric) and code.callable(None) is True
    assert [m.metric_name for m in config.evaluations.metrics] == [
        "numeric",
        "exact",
        "tone",
        "faithfulness",
        "check",
    ]
    assert [m.kind for m in config.evaluations.metrics] == [
        "standard",
        "standard",
        "geval",
        "rag",
        "code",
    ]
    assert config.evaluations.model is not None and config.evaluations.model.api_key is None


def test_two_numeric_metrics_keep_their_own_tolerances(tmp_path: Path) -> None:
    data = base_agent()
    data["test_cases"][0]["turns"][2]["evaluations"] = [
        {"metric": "numeric", "name": "tight"},
        {"metric": "numeric", "name": "loose", "relative_tolerance": 0.05},
    ]
    [multi, _] = load_agent(make_agent_dir(tmp_path, data), environ={}).config.test_cases
    tight, loose = multi.as_turns()[2].evaluations or []
    assert isinstance(tight, StandardMetric) and isinstance(loose, StandardMetric)
    assert (tight.relative_tolerance, loose.relative_tolerance) == (0.0, 0.05)


def test_environment_variables_are_substituted(tmp_path: Path) -> None:
    text = (
        "name: ${AGENT_NAME}\n"
        "model: {provider: openai, name: gpt-4o, api_key: '${KEY}'}\n"
        "instructions: {inline: hi}\n"
    )
    agent = load_agent(make_agent_dir(tmp_path, text), environ={"AGENT_NAME": "bot", "KEY": "s3"})
    assert (agent.config.name, agent.config.model.api_key) == ("bot", "s3")
    assert "${KEY}" in agent.raw_yaml  # the stored text keeps the reference, not the secret


@pytest.mark.parametrize(
    ("filename", "content"),
    [
        ("cases.yaml", yaml.safe_dump([{"name": "a", "input": "x"}, {"input": "y"}])),
        (
            "cases.yaml",
            yaml.safe_dump({"test_cases": [{"name": "a", "input": "x"}, {"input": "y"}]}),
        ),
        ("cases.json", json.dumps([{"name": "a", "input": "x"}, {"input": "y"}])),
    ],
)
def test_test_cases_file_is_read_relative_to_the_agent_dir(
    tmp_path: Path, filename: str, content: str
) -> None:
    data = base_agent()
    del data["test_cases"]
    data["test_cases_file"] = f"data/{filename}"
    path = make_agent_dir(tmp_path, data)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / filename).write_text(content)

    config = load_agent(path, environ={}).config

    assert [c.name for c in config.test_cases] == ["a", None]
    assert config.test_cases_file == f"data/{filename}"


@pytest.mark.parametrize(
    ("override", "yaml_value", "env_value", "expected"),
    [
        (3, 2, "4", 3),
        (None, 2, "4", 2),
        (None, None, "4", 4),
        (None, None, None, 1),
        (None, None, " ", 1),
    ],
)
def test_parallel_test_cases_resolves_cli_then_yaml_then_env_then_one(
    tmp_path: Path,
    override: int | None,
    yaml_value: int | None,
    env_value: str | None,
    expected: int,
) -> None:
    data = base_agent()
    if yaml_value is not None:
        data["execution"] = {"parallel_test_cases": yaml_value}
    environ = {} if env_value is None else {PARALLEL_ENV: env_value}
    agent = load_agent(make_agent_dir(tmp_path, data), environ=environ, parallel_override=override)
    assert agent.parallel_test_cases == expected


def test_execution_settings_default_to_holodeck_timeouts_and_cache_without_parallelism(
    tmp_path: Path,
) -> None:
    execution = load_agent(make_agent_dir(tmp_path), environ={}).config.execution
    assert (execution.llm_timeout, execution.file_timeout, execution.download_timeout) == (
        60,
        30,
        30,
    )
    assert (execution.cache_enabled, execution.cache_dir) == (True, ".holodeck/cache")
    assert execution.parallel_test_cases is None


def test_redacted_snapshot_hides_secrets_but_keeps_test_data(tmp_path: Path) -> None:
    data = base_agent()
    data["model"] = {"provider": "openai", "name": "gpt-4o", "api_key": "sk-1", "max_tokens": 50}
    data["tools"].append(
        {
            "type": "mcp",
            "name": "docs",
            "command": "docs-server",
            "env": {"GITHUB_TOKEN": "ghp", "LOG_LEVEL": "info"},
        }
    )
    data["test_cases"][0]["turns"][2]["expected_tools"] = [
        {"name": "lookup", "args": {"key": "revenue", "year": {"regex": "20\\d\\d"}}}
    ]
    snapshot = load_agent(make_agent_dir(tmp_path, data), environ={}).redacted_snapshot()

    assert snapshot["model"]["api_key"] == "***"
    assert snapshot["model"]["max_tokens"] == 50
    assert snapshot["tools"][2]["env"] == {"GITHUB_TOKEN": "***", "LOG_LEVEL": "info"}
    expected = snapshot["test_cases"][0]["turns"][2]["expected_tools"][0]
    assert expected["args"] == {"key": "revenue", "year": {"regex": "20\\d\\d"}}
    json.dumps(snapshot)  # JSON-safe


def test_convfinqa_fixtures_load_as_test_cases_files(tmp_path: Path, shared_dir: Path) -> None:
    for name in ("convfinqa_subset_inline.yaml", "convfinqa_subset_retrieval.yaml"):
        data = base_agent()
        del data["test_cases"]
        data["test_cases_file"] = str(shared_dir / "fixtures" / "convfinqa" / name)
        agent_dir = tmp_path / name.removesuffix(".yaml")
        data["tools"].append({"type": "mcp", "name": "convfinqa_archive", "command": "archive"})

        cases = load_agent(make_agent_dir(agent_dir, data), environ={}).config.test_cases

        assert len(cases) == 133, name
        assert sum(len(c.as_turns()) for c in cases) == 485, name
        assert all(c.is_multi_turn for c in cases)
        assert all("turn_program" in (t.turn_config or {}) for c in cases for t in c.as_turns())
