"""The whole agent.yaml (``AgentConfig``) and its ``execution`` block."""

from __future__ import annotations

from typing import Self

from pydantic import Field, field_validator, model_validator

from runs.spec.common import StrictModel, non_empty, spec_error
from runs.spec.limits import ParallelTestCases, TimeoutSeconds
from runs.spec.metrics import EvaluationConfig
from runs.spec.model import ClaudeConfig, Instructions, ModelConfig
from runs.spec.test_cases import TestCase
from runs.spec.tool_config import Tool, duplicate_tool_names


class ExecutionConfig(StrictModel):
    """Timeouts (seconds), the file cache and test-case concurrency."""

    llm_timeout: TimeoutSeconds = 60
    file_timeout: TimeoutSeconds = 30
    download_timeout: TimeoutSeconds = 30
    cache_enabled: bool = True
    cache_dir: str = ".holodeck/cache"
    parallel_test_cases: ParallelTestCases | None = None


class AgentConfig(StrictModel):
    """The whole agent.yaml."""

    name: str
    description: str | None = None
    model: ModelConfig
    instructions: Instructions
    tools: list[Tool] = Field(default_factory=list)
    evaluations: EvaluationConfig | None = None
    test_cases: list[TestCase] = Field(default_factory=list)
    test_cases_file: str | None = None
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    claude: ClaudeConfig | None = None

    @field_validator("name")
    @classmethod
    def _name_not_empty(cls, value: str) -> str:
        non_empty(value, "name")
        return value

    @model_validator(mode="after")
    def _unique_tool_names(self) -> Self:
        problems = duplicate_tool_names([tool.name for tool in self.tools])
        if problems:
            raise spec_error(problems[0][1], problems[0][0])
        return self
