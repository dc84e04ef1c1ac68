"""The whole agent.yaml (``AgentConfig``) and its ``execution`` block."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Self

from pydantic import Field, model_validator

from runs.core.agentconfig.common import StrictModel, not_blank, spec_error
from runs.core.agentconfig.holodeck import DeploymentConfig, ObservabilityConfig, OpenAIConfig
from runs.core.agentconfig.limits import ParallelTestCases, Repeats, TimeoutSeconds
from runs.core.agentconfig.metrics import EvaluationConfig
from runs.core.agentconfig.model import ClaudeConfig, Instructions, ModelConfig
from runs.core.agentconfig.test_cases import TestCase
from runs.core.agentconfig.tool_config import Tool, duplicate_tool_names


class ExecutionConfig(StrictModel):
    """Timeouts (seconds), the file cache, test-case concurrency and repetitions."""

    holodeck_ignored: ClassVar[dict[str, str]] = {
        "quiet": "set the output on the command line",
        "verbose": "set the output on the command line",
    }

    llm_timeout: TimeoutSeconds = 60
    file_timeout: TimeoutSeconds = 30
    download_timeout: TimeoutSeconds = 30
    cache_enabled: bool = True
    cache_dir: str = ".holodeck/cache"
    parallel_test_cases: ParallelTestCases | None = None
    # Each case runs this many times, as independent sessions, inside one run (not HoloDeck's).
    repeats: Repeats = 1
    # HoloDeck 0.7.1
    quiet: bool | None = None
    verbose: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_is_default(cls, data: Any) -> Any:
        """HoloDeck writes an unset execution option as null: the default applies."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data


_DEFAULTED = frozenset({"tools", "execution"})


class AgentConfig(StrictModel):
    """The whole agent.yaml (HoloDeck 0.7.1's fields included: see ``holodeck_ignored``)."""

    holodeck_ignored: ClassVar[dict[str, str]] = {
        "response_format": "the response is graded as the model returns it",
        "observability": "",
        "deployment": "",
        "embedding_provider": "vectorstore tools are not supported",
        "openai": "",
    }

    name: Annotated[str, not_blank("name")]
    description: str | None = None
    author: str | None = None
    model: ModelConfig
    instructions: Instructions
    tools: list[Tool] = Field(default_factory=list)
    evaluations: EvaluationConfig | None = None
    test_cases: list[TestCase] = Field(default_factory=list)
    test_cases_file: str | None = None
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    claude: ClaudeConfig | None = None
    # HoloDeck 0.7.1 blocks with no effect here
    response_format: dict[str, Any] | str | None = None
    observability: ObservabilityConfig | None = None
    deployment: DeploymentConfig | None = None
    embedding_provider: ModelConfig | None = None
    openai: OpenAIConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_blocks_are_defaults(cls, data: Any) -> Any:
        """HoloDeck allows ``tools: null`` and ``execution: null``: the defaults apply."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None or k not in _DEFAULTED}
        return data

    @model_validator(mode="after")
    def _unique_tool_names(self) -> Self:
        problems = duplicate_tool_names([tool.name for tool in self.tools])
        if problems:
            raise spec_error(problems[0][1], problems[0][0])
        return self
