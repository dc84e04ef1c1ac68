"""The agent.yaml language: pydantic models, the loader and its errors (Django-free)."""

from runs.spec.agent import AgentConfig, ExecutionConfig
from runs.spec.errors import ConfigError, ConfigProblem
from runs.spec.loader import LoadedAgent, load_agent
from runs.spec.metrics import (
    CodeMetric,
    EvaluationConfig,
    GEvalMetric,
    Metric,
    RAGMetric,
    StandardMetric,
)
from runs.spec.model import Instructions, ModelConfig
from runs.spec.schema import agent_json_schema
from runs.spec.test_cases import ExpectedTool, FileInput, TestCase, Turn, case_label
from runs.spec.tool_config import FunctionTool, McpTool, Tool

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
