"""The agent.yaml language: pydantic models, the loader and its errors (Django-free)."""

from runs.spec.errors import ConfigError, ConfigProblem
from runs.spec.loader import LoadedAgent, load_agent
from runs.spec.models import (
    AgentConfig,
    CodeMetric,
    EvaluationConfig,
    ExecutionConfig,
    ExpectedTool,
    FileInput,
    FunctionTool,
    GEvalMetric,
    Instructions,
    McpTool,
    Metric,
    ModelConfig,
    RAGMetric,
    StandardMetric,
    TestCase,
    Tool,
    Turn,
)
from runs.spec.schema import agent_json_schema

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
    "load_agent",
]
