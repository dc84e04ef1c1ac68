"""The agent.yaml language: pydantic models, the loader and its errors (Django-free)."""

from runs.core.agentconfig.agent import AgentConfig, ExecutionConfig
from runs.core.agentconfig.errors import ConfigError, ConfigProblem
from runs.core.agentconfig.loader import LoadedAgent, load_agent
from runs.core.agentconfig.metrics import (
    CodeMetric,
    EvaluationConfig,
    GEvalMetric,
    Metric,
    RAGMetric,
    StandardMetric,
)
from runs.core.agentconfig.model import Instructions, ModelConfig
from runs.core.agentconfig.schema import agent_json_schema
from runs.core.agentconfig.test_cases import ExpectedTool, FileInput, TestCase, Turn, case_label
from runs.core.agentconfig.tool_config import FunctionTool, McpTool, Tool

__all__ = [
    "AgentConfig",
    "CodeMetric",
    "ConfigError",
    "ConfigProblem",
    "EvaluationConfig",
    "ExecutionConfig",
    "ExpectedTool",
    "FileInput",
    "FunctionTool",
    "GEvalMetric",
    "Instructions",
    "LoadedAgent",
    "McpTool",
    "Metric",
    "ModelConfig",
    "RAGMetric",
    "StandardMetric",
    "TestCase",
    "Tool",
    "Turn",
    "agent_json_schema",
    "case_label",
    "load_agent",
]
