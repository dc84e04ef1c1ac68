"""The JSON Schema of agent.yaml describes the models editors should check against."""

from __future__ import annotations

import json

from runs.core.agentconfig.schema import agent_json_schema, agent_json_schema_text


def test_schema_describes_the_agent_and_its_nested_models() -> None:
    schema = agent_json_schema()
    assert schema["title"] == "HoloDeck agent.yaml"
    assert {"name", "model", "instructions"} <= set(schema["required"])
    assert {"Turn", "TestCase", "ExpectedTool", "CodeMetric", "McpTool"} <= set(schema["$defs"])
    assert schema["$defs"]["Turn"]["additionalProperties"] is False


def test_schema_describes_the_three_arg_matcher_shapes() -> None:
    args = agent_json_schema()["$defs"]["ExpectedTool"]["properties"]["args"]
    matcher = next(s for s in args["anyOf"] if s.get("type") == "object")["additionalProperties"]
    fuzzy, regex, literal = matcher["anyOf"]
    assert fuzzy["required"] == ["fuzzy"] and regex["required"] == ["regex"]
    assert "not" in literal


def test_schema_text_is_valid_json() -> None:
    assert json.loads(agent_json_schema_text()) == agent_json_schema()
