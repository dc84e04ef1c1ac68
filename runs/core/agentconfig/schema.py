"""JSON Schema of agent.yaml, for editors (e.g. the YAML language server's ``$schema``)."""

from __future__ import annotations

import json
from typing import Any

from runs.core.agentconfig.agent import AgentConfig

SCHEMA_ID = "https://holodeck-web.local/schemas/agent.schema.json"


def agent_json_schema() -> dict[str, Any]:
    """The schema of an agent.yaml as pydantic describes ``AgentConfig`` (validation mode)."""
    schema = AgentConfig.model_json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "HoloDeck agent.yaml",
        **{k: v for k, v in schema.items() if k != "title"},
    }


def agent_json_schema_text() -> str:
    return json.dumps(agent_json_schema(), indent=2, sort_keys=False) + "\n"
