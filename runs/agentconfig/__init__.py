"""The agent.yaml language: pydantic models, the loader and its errors (Django-free)."""

from runs.agentconfig.agent import AgentConfig, ExecutionConfig
from runs.agentconfig.errors import ConfigError, ConfigProblem
from runs.agentconfig.loader import LoadedAgent, load_agent
from runs.agentconfig.metrics import (
    CodeMetric,
    EvaluationConfig,
    GEvalMetric,
    Metric,
    RAGMetric,
    StandardMetric,
)
from runs.agentconfig.model import Instructions, ModelConfig
from runs.agentconfig.schema import agent_json_schema
from runs.agentconfig.test_cases import ExpectedTool, FileInput, TestCase, Turn, case_label
from runs.agentconfig.tool_config import FunctionTool, McpTool, Tool

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
