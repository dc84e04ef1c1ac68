"""A HoloDeck 0.7.1 agent.yaml loads unchanged: fields with a meaning here are honoured, the
others are accepted with one warning each, tools that cannot run are clear errors, and fields
HoloDeck does not have either are still errors."""

from __future__ import annotations

import asyncio
import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from pydantic import BaseModel

from runs.core.agentconfig import holodeck
from runs.core.agentconfig.agent import AgentConfig, ExecutionConfig
from runs.core.agentconfig.errors import ConfigError
from runs.core.agentconfig.loader import load_agent
from runs.core.agentconfig.metrics import (
    CodeMetric,
    EvaluationConfig,
    GEvalMetric,
    RAGMetric,
    StandardMetric,
)
from runs.core.agentconfig.model import ClaudeConfig, Instructions, ModelConfig
from runs.core.agentconfig.test_cases import ExpectedTool, FileInput, TestCase, Turn
from runs.core.agentconfig.tool_config import FunctionTool, McpTool
from runs.core.agentconfig.validate import validate_agent_file
from runs.core.engine.executor import Engine
from tests.core.agentconfig.agent_dirs import GRADER_SOURCE, TOOLS_SOURCE

# Under ../shared beside the checkout (the ``shared_dir`` fixture skips, or fails in CI, without).
SCHEMA = Path("fixtures") / "holodeck" / "agent_schema_0.7.1.json"

# A HoloDeck user's agent.yaml, written from the fields of HoloDeck 0.7.1's schema.
HOLODECK_AGENT_YAML = """\
name: ledger-agent
description: Answers questions about a ledger
author: Jane Doe
model:
  provider: anthropic
  name: claude-sonnet-4-5
  temperature: 0.3
  max_tokens: 1000
  top_p: 0.9
  api_key: sk-test
  auth_provider: oauth_token
instructions:
  file: instructions.md
response_format:
  type: object
  properties:
    answer: {type: string}
tools:
  - type: function
    name: subtract
    description: Subtract b from a
    file: tools.py
    function: subtract
    parameters:
      a: {type: number}
      b: {type: number}
    defer_loading: false
  - type: mcp
    name: ledger
    description: The ledger MCP server
    transport: stdio
    command: npx
    args: ["-y", "@example/ledger-mcp"]
    env: {LEDGER_REGION: eu}
    env_file: ledger.env
    encoding: utf-8
    config: {readonly: true}
    load_tools: true
    load_prompts: false
    registry_name: example/ledger
    request_timeout: 30
    timeout: 10
    sse_read_timeout: 300
    terminate_on_close: true
    is_retrieval: true
    defer_loading: true
evaluations:
  model:
    provider: openai
    name: gpt-4o-mini
    auth_provider: api_key
  optimizer:
    loss: {bleu: 1.0}
    axes:
      numeric:
        - {path: model.temperature, type: float, range: [0.0, 1.0]}
      textual:
        - {path: instructions.inline, max_chars: 4000}
    numeric_phase: {max_trials: 5, patience: 2}
    textual_phase: {max_trials: 3, patience: 1}
    max_cycles: 2
    min_delta: 0.02
    seed: 7
  metrics:
    - metric: bleu
      threshold: 0.1
    - metric: groundedness
      threshold: 0.7
    - type: geval
      name: helpful
      criteria: The answer is helpful
      enabled: false
    - type: rag
      metric_type: faithfulness
      include_reason: false
      enabled: false
    - type: code
      grader: graders:check
test_cases:
  - name: difference
    input: What is 206588 minus 181001?
    ground_truth: "25587"
    expected_tools:
      - name: subtract
        args: {a: 206588, b: 181001}
  - name: conversation
    turns:
      - input: Subtract 181001 from 206588
        ground_truth: "25587"
        expected_tools: [subtract]
        evaluations:
          - type: rag
            metric_type: answer_relevancy
            include_reason: true
            enabled: false
      - input: And as a percentage?
        ground_truth: "14.1%"
        turn_config: {program: "divide(#0, 181001)"}
execution:
  parallel_test_cases: 2
  llm_timeout: 30
  file_timeout: null
  download_timeout: null
  cache_enabled: true
  cache_dir: null
  quiet: false
  verbose: true
observability:
  enabled: true
  service_name: ledger-agent
  resource_attributes: {team: finance}
  disable_provider_tracing: false
  traces:
    enabled: true
    sample_rate: 1.0
    capture_content: false
    redaction_patterns: ["sk-[a-z]+"]
  metrics: {enabled: true, export_interval_ms: 5000}
  logs: {enabled: true, level: INFO, filter_namespaces: [holodeck]}
  exporters:
    console: {enabled: true, pretty_print: true}
    otlp: {enabled: false, endpoint: "http://localhost:4317", protocol: grpc, headers: {}}
    prometheus: {enabled: false, port: 8889}
    azure_monitor: {enabled: false}
deployment:
  registry:
    url: ghcr.io
    repository: example/ledger-agent
    tag_strategy: git_sha
  target:
    provider: aws
    aws: {region: eu-west-1, cpu: 1, memory: 2048}
  runtime: container
  protocol: rest
  port: 8080
  environment: {LOG_LEVEL: info}
embedding_provider:
  provider: openai
  name: text-embedding-3-small
claude:
  max_turns: 8
  allowed_tools: [Read]
  disallowed_tools: [WebFetch]
  permission_mode: manual
  extended_thinking: {enabled: true, budget_tokens: 4000}
  bash: {enabled: true, excluded_commands: [rm], allow_unsafe: false}
  file_system: {read: true, write: false, edit: true}
  web_search: false
  agents:
    reviewer: {description: Reviews answers, model: haiku, tools: [Read]}
  setting_sources: [project]
  working_directory: /srv/agent
  disable_default_hooks: true
  disable_subprocess_env_scrub: true
  effort: high
  fallback_model: claude-haiku-4-5
  max_budget_usd: 2.5
  max_concurrent_sessions: 4
  session_memory_estimate_mib: 500
  i_understand_this_is_unsafe: false
openai:
  max_turns: 10
  effort: low
  permissions: {allowed_tools: [subtract]}
  disable_subprocess_env_scrub: false
"""

IGNORED = "accepted for HoloDeck compatibility; has no effect in HoloDeck Web"

# Every field of the file above that has no effect here: the path each warning starts with.
IGNORED_PATHS = [
    "model.auth_provider",
    "tools[0].defer_loading",
    "tools[0].parameters",
    "tools[1].defer_loading",
    "tools[1].config",
    "tools[1].encoding",
    "tools[1].load_prompts",
    "tools[1].load_tools",
    "tools[1].registry_name",
    "tools[1].request_timeout",
    "tools[1].sse_read_timeout",
    "tools[1].terminate_on_close",
    "tools[1].timeout",
    "evaluations.metrics[1].metric",  # groundedness: skipped
    "evaluations.metrics[3].include_reason",
    "evaluations.optimizer",
    "execution.quiet",
    "execution.verbose",
    "claude.agents",
    "claude.disable_default_hooks",
    "claude.disable_subprocess_env_scrub",
    "claude.effort",
    "claude.fallback_model",
    "claude.i_understand_this_is_unsafe",
    "claude.max_budget_usd",
    "claude.max_concurrent_sessions",
    "claude.session_memory_estimate_mib",
    "claude.setting_sources",
    "claude.working_directory",
    "claude.bash.allow_unsafe",
    "response_format",
    "observability",
    "deployment",
    "embedding_provider",
    "openai",
    "test_cases[1].turns[0].evaluations[0].include_reason",
]


def write_holodeck_agent(root: Path, text: str = HOLODECK_AGENT_YAML) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "agent.yaml").write_text(text, encoding="utf-8")
    (root / "instructions.md").write_text("Answer with a number.\n", encoding="utf-8")
    (root / "tools.py").write_text(TOOLS_SOURCE, encoding="utf-8")
    (root / "graders.py").write_text(GRADER_SOURCE, encoding="utf-8")
    (root / "ledger.env").write_text(
        "# the ledger's settings\nexport LEDGER_TOKEN='abc'\nLEDGER_REGION=us\n", encoding="utf-8"
    )
    return root / "agent.yaml"


def with_changes(text: str, change: Any) -> str:
    data = yaml.safe_load(text)
    change(data)
    return yaml.safe_dump(data, sort_keys=False)


def warned_paths(warnings: list[str]) -> list[str]:
    return [line.partition(": ")[0] for line in warnings]


def test_a_holodeck_agent_yaml_loads_unchanged_and_warns_once_per_ignored_field(
    tmp_path: Path,
) -> None:
    agent = load_agent(write_holodeck_agent(tmp_path), environ={})

    assert warned_paths(agent.warnings) == IGNORED_PATHS
    for line in agent.warnings:
        if not line.startswith(("model.auth_provider", "evaluations.metrics[1].metric")):
            assert IGNORED in line, line
    assert "observability: " + IGNORED in agent.warnings
    assert "claude.disable_subprocess_env_scrub: " + IGNORED in " ".join(agent.warnings)
    assert "metric 'groundedness' is accepted for HoloDeck compatibility but not computed" in (
        " ".join(agent.warnings)
    )


def test_the_holodeck_fields_with_a_meaning_here_are_honoured(tmp_path: Path) -> None:
    config = load_agent(write_holodeck_agent(tmp_path), environ={}).config

    assert config.author == "Jane Doe"
    claude = config.claude
    assert claude is not None
    assert claude.permission_mode == "default"  # manual: unapproved tools are denied
    assert claude.max_thinking_tokens == 4000  # extended_thinking
    assert claude.allowed_tools == ["Read", "Bash", "Glob", "Grep", "Edit"]
    assert claude.disallowed_tools == ["WebFetch", "Bash(rm:*)"]
    mcp = config.tools[1]
    assert isinstance(mcp, McpTool)
    # env_file is read at load; the tool's own env wins.
    assert mcp.env == {"LEDGER_TOKEN": "abc", "LEDGER_REGION": "eu"}
    assert mcp.is_retrieval
    assert config.execution.file_timeout == 30  # null: the default
    assert config.execution.cache_dir == ".holodeck/cache"
    assert config.execution.llm_timeout == 30
    assert config.evaluations is not None
    groundedness = config.evaluations.metrics[1]
    assert isinstance(groundedness, StandardMetric) and not groundedness.enabled


def test_the_holodeck_agent_runs_with_the_scripted_provider(tmp_path: Path) -> None:
    def scripted(data: dict[str, Any]) -> None:
        data["model"]["provider"] = "scripted"
        data["model"]["name"] = "scripted-test"

    path = write_holodeck_agent(tmp_path, with_changes(HOLODECK_AGENT_YAML, scripted))
    agent = load_agent(path, environ={})
    assert warned_paths(agent.warnings) == IGNORED_PATHS

    report = asyncio.run(Engine(agent).run())

    difference, conversation = report.results
    assert difference.passed, difference.errors
    assert difference.agent_response == "25587"
    assert difference.tool_calls == ["subtract"]
    names = [m.metric_name for m in difference.metric_results]
    assert names == ["bleu", "check"]  # groundedness is skipped, geval/rag are disabled
    assert conversation.turns is not None and len(conversation.turns) == 2
    assert conversation.passed, conversation.errors


def test_validate_agent_prints_the_warnings_after_the_ok_line(tmp_path: Path) -> None:
    path = write_holodeck_agent(tmp_path)
    code, lines = validate_agent_file(path, environ={})
    assert code == 0
    assert lines[0] == "OK: ledger-agent: 2 test cases, 3 turns"
    assert warned_paths([line.removeprefix("warning: ") for line in lines[1:]]) == IGNORED_PATHS
    assert all(line.startswith("warning: ") for line in lines[1:])

    out = StringIO()
    call_command("validate_agent", str(path), stdout=out)
    printed = out.getvalue().splitlines()
    assert printed[0] == "OK: ledger-agent: 2 test cases, 3 turns"
    assert "warning: observability: " + IGNORED in printed


def test_an_agent_without_holodeck_fields_has_no_warnings(tmp_path: Path) -> None:
    def plain(data: dict[str, Any]) -> None:
        for key in ("response_format", "observability", "deployment", "embedding_provider"):
            del data[key]
        del data["openai"], data["claude"], data["evaluations"]["optimizer"]
        del data["model"]["auth_provider"]
        data["tools"] = data["tools"][:1]
        del data["tools"][0]["parameters"], data["tools"][0]["defer_loading"]
        data["evaluations"]["metrics"] = [data["evaluations"]["metrics"][0]]
        data["execution"] = {"parallel_test_cases": 2}
        del data["test_cases"][1]["turns"][0]["evaluations"]

    agent = load_agent(write_holodeck_agent(tmp_path, with_changes(HOLODECK_AGENT_YAML, plain)))
    assert agent.warnings == []


@pytest.mark.parametrize(
    "tool",
    [
        {"type": "vectorstore", "name": "docs", "description": "d", "source": "data/"},
        {"type": "prompt", "name": "summarise", "description": "d", "parameters": {}},
        {"type": "hierarchical_document", "name": "laws", "description": "d", "source": "x"},
    ],
)
def test_a_tool_type_holodeck_web_cannot_run_is_a_clear_error(
    tmp_path: Path, tool: dict[str, Any]
) -> None:
    text = with_changes(HOLODECK_AGENT_YAML, lambda data: data["tools"].append(tool))
    with pytest.raises(ConfigError) as raised:
        load_agent(write_holodeck_agent(tmp_path, text), environ={})
    assert raised.value.lines() == [
        f"agent.yaml: tools[2].type: tool {tool['name']!r}: tool type {tool['type']!r} is not "
        "supported by HoloDeck Web; remove it or replace it with an mcp tool"
    ]


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (
            lambda d: d["claude"].update(not_a_field=1),
            "agent.yaml: claude.not_a_field: unknown field",
        ),
        (
            lambda d: d["observability"]["traces"].update(colour="red"),
            "agent.yaml: observability.traces.colour: unknown field",
        ),
        (
            lambda d: d["model"].update(auth_provider="kerberos"),
            "agent.yaml: model.auth_provider: Input should be 'api_key', 'oauth_token', "
            "'bedrock', 'vertex', 'foundry' or 'custom', got 'kerberos'",
        ),
        (
            lambda d: d["tools"][1].update(transport="sse", url="http://x"),
            "agent.yaml: tools[1].transport: MCP transport 'sse' is not supported by HoloDeck "
            "Web; use stdio or http",
        ),
        (
            lambda d: d["deployment"].pop("registry"),
            "agent.yaml: deployment.registry: required field is missing",
        ),
        (
            lambda d: d["tools"][1].update(env_file="missing.env"),
            "agent.yaml: tools[1].env_file: env_file 'missing.env' was not found",
        ),
    ],
)
def test_fields_holodeck_does_not_have_are_still_errors(
    tmp_path: Path, change: Any, line: str
) -> None:
    text = with_changes(HOLODECK_AGENT_YAML, change)
    with pytest.raises(ConfigError) as raised:
        load_agent(write_holodeck_agent(tmp_path, text), environ={})
    assert raised.value.lines() == [line]


def test_accept_all_runs_as_accept_edits_with_a_warning(tmp_path: Path) -> None:
    text = with_changes(
        HOLODECK_AGENT_YAML, lambda d: d["claude"].update(permission_mode="acceptAll")
    )
    agent = load_agent(write_holodeck_agent(tmp_path, text), environ={})
    assert agent.config.claude is not None
    assert agent.config.claude.permission_mode == "acceptEdits"
    assert any(w.startswith("claude.permission_mode: 'acceptAll' runs as") for w in agent.warnings)


# --- every field of HoloDeck 0.7.1's schema has a home here ------------------------------------

# HoloDeck's model -> ours; its tool types we cannot run are refused (tested above).
OURS: dict[str, type[BaseModel]] = {
    "LLMProvider": ModelConfig,
    "Instructions": Instructions,
    "FunctionTool": FunctionTool,
    "MCPTool": McpTool,
    "EvaluationConfig": EvaluationConfig,
    "EvaluationMetric": StandardMetric,
    "GEvalMetric": GEvalMetric,
    "RAGMetric": RAGMetric,
    "CodeMetric": CodeMetric,
    "TestCaseModel": TestCase,
    "Turn": Turn,
    "ExpectedTool": ExpectedTool,
    "FileInput": FileInput,
    "ExecutionConfig": ExecutionConfig,
    "ClaudeConfig": ClaudeConfig,
}
REFUSED = {"VectorstoreTool", "PromptTool", "HierarchicalDocumentToolConfig"}
# Only reachable from the refused tools.
UNREACHABLE = {"DatabaseConfig", "KeywordIndexConfig"}


def test_every_field_of_holodeck_0_7_1_agent_schema_is_a_field_here(shared_dir: Path) -> None:
    schema = json.loads((shared_dir / SCHEMA).read_text(encoding="utf-8"))
    missing = sorted(set(schema["properties"]) - set(AgentConfig.model_fields))
    for name, definition in schema["$defs"].items():
        if "properties" not in definition or name in REFUSED | UNREACHABLE:
            continue
        ours = OURS.get(name) or getattr(holodeck, name)
        missing += [
            f"{name}.{field}"
            for field in definition["properties"]
            if field not in ours.model_fields
        ]
        if definition.get("additionalProperties") is False:
            assert ours.model_config.get("extra") == "forbid", name
    assert missing == []


def test_the_launch_form_preview_lists_the_warnings(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from runs.web.launch import _agent_preview

    project: Any = SimpleNamespace(agent_path=str(write_holodeck_agent(tmp_path)))
    preview, problems = _agent_preview(project)
    assert problems == []
    assert preview is not None
    assert "observability: " + IGNORED in preview.warnings
    assert "claude.disable_subprocess_env_scrub: " in " ".join(preview.warnings)
