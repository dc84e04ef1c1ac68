"""The metrics of agent.yaml (standard, geval, rag, code) and the agent-wide ``evaluations``."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from graders.deterministic import is_valid_response_path
from graders.judges import RagMetricType
from runs.core.agentconfig.common import (
    NotedModel,
    StrictModel,
    context_resolver,
    not_blank,
    spec_error,
)
from runs.core.agentconfig.holodeck import OptimizerConfig
from runs.core.agentconfig.limits import Scale, TimeoutMs, Tolerance, shown_number
from runs.core.agentconfig.model import ModelConfig
from runs.core.agentconfig.resolve import GRADER_PATH_RE, ResolveError
from runs.core.wire.models import MetricKind

# HoloDeck's AI-assisted standard metrics: accepted, but not computed here (disabled, with a
# warning).
HOLODECK_AI_METRICS = ("groundedness", "relevance", "coherence", "fluency")
StandardMetricName = Literal[
    "bleu",
    "rouge",
    "meteor",
    "equality",
    "numeric",
    "groundedness",
    "relevance",
    "coherence",
    "fluency",
]

GEvalParam = Literal[
    "input",
    "actual_output",
    "expected_output",
    "context",
    "retrieval_context",
    "tools_called",
    "expected_tools",
]


class _MetricBase(StrictModel):
    # Every score is 0..1: a threshold outside [0, 1] (or NaN) could never pass or always
    # would, so it is refused naming the metric (``_threshold_in_range``).
    threshold: float | None = Field(default=None, json_schema_extra={"minimum": 0, "maximum": 1})
    enabled: bool = True
    fail_on_error: bool = False
    model: ModelConfig | None = None
    retry_on_failure: int | None = None
    timeout_ms: TimeoutMs | None = None
    scale: Scale | None = None
    custom_prompt: str | None = None

    @field_validator("retry_on_failure")
    @classmethod
    def _retry_range(cls, value: int | None) -> int | None:
        if value is not None and not 1 <= value <= 3:
            raise ValueError(f"retry_on_failure must be between 1 and 3, got {value}")
        return value

    @model_validator(mode="after")
    def _threshold_in_range(self) -> Self:
        value = self.threshold
        if value is not None and not 0 <= value <= 1:  # NaN fails both comparisons
            name = getattr(self, "metric_name", None)
            raise spec_error(
                f"threshold of metric {name!r} must be between 0 and 1 (scores are 0..1), "
                f"got {shown_number(value)}",
                "threshold",
            )
        return self


class StandardMetric(_MetricBase, NotedModel):
    """NLP (bleu, rouge, meteor) or deterministic (equality, numeric) metric."""

    type: Literal["standard"] = "standard"
    metric: StandardMetricName
    name: str | None = None
    # equality
    case_insensitive: bool = False
    strip_whitespace: bool = False
    strip_punctuation: bool = False
    # numeric
    absolute_tolerance: Tolerance = 1e-6
    relative_tolerance: Tolerance = 0.0
    accept_percent: bool = False
    accept_thousands_separators: bool = False
    # Grade one JSON leaf of the response (dotted path) instead of the whole text.
    response_path: str | None = None

    @field_validator("response_path")
    @classmethod
    def _valid_path(cls, value: str | None) -> str | None:
        if value is not None and not is_valid_response_path(value):
            raise ValueError(
                f"response_path {value!r} must be keys joined by dots with optional [index], "
                "e.g. result.items[0].value"
            )
        return value

    @model_validator(mode="after")
    def _skip_holodeck_ai_metric(self) -> Self:
        if self.metric in HOLODECK_AI_METRICS and self.enabled:
            self.enabled = False
            self.compat_note(
                "metric",
                f"metric {self.metric!r} is accepted for HoloDeck compatibility but not "
                "computed by HoloDeck Web; it is skipped (use a geval metric instead)",
            )
        return self

    @property
    def metric_name(self) -> str:
        return self.name or self.metric

    @property
    def kind(self) -> MetricKind:
        return "standard"


def _default_params() -> list[GEvalParam]:
    return ["actual_output"]


class GEvalMetric(_MetricBase):
    """An LLM-judged custom criterion (deepeval G-Eval)."""

    type: Literal["geval"] = "geval"
    name: Annotated[str, not_blank("name")]
    criteria: Annotated[str, not_blank("criteria")]
    evaluation_steps: list[str] | None = None
    evaluation_params: list[GEvalParam] = Field(default_factory=lambda: _default_params())
    strict_mode: bool = False

    @property
    def metric_name(self) -> str:
        return self.name

    @property
    def kind(self) -> MetricKind:
        return "geval"


class RAGMetric(_MetricBase):
    """An LLM-judged retrieval metric (deepeval)."""

    holodeck_ignored: ClassVar[dict[str, str]] = {
        "include_reason": "the judge's reason is always kept"
    }

    type: Literal["rag"] = "rag"
    metric_type: RagMetricType
    include_reason: bool | None = None  # HoloDeck 0.7.1

    @property
    def metric_name(self) -> str:
        return self.metric_type

    @property
    def kind(self) -> MetricKind:
        return "rag"


class CodeMetric(_MetricBase):
    """A user-supplied Python grader ``module.path:callable``, imported at load."""

    type: Literal["code"] = "code"
    grader: str
    name: str | None = None
    _callable: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _resolve(self, info: ValidationInfo) -> Self:
        if not GRADER_PATH_RE.match(self.grader):
            raise spec_error(
                f"grader {self.grader!r} must look like 'module.path:callable'", "grader"
            )
        resolver = context_resolver(info)
        if resolver is not None:
            try:
                self._callable = resolver.grader(self.grader)
            except ResolveError as exc:
                raise spec_error(str(exc), "grader") from None
        return self

    @property
    def callable(self) -> Any:
        if self._callable is None:
            raise RuntimeError(
                f"grader {self.grader!r} not resolved: load the agent with load_agent()"
            )
        return self._callable

    @property
    def metric_name(self) -> str:
        return self.name or self.grader.rpartition(":")[2]

    @property
    def kind(self) -> MetricKind:
        return "code"


def _metric_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        kind = value.get("type")
        if kind is None and "metric" in value:
            return "standard"  # HoloDeck's shape: a bare {metric: bleu} is a standard metric
        return kind if isinstance(kind, str) else None
    kind = getattr(value, "type", None)
    return kind if isinstance(kind, str) else None


Metric = Annotated[
    Annotated[StandardMetric, Tag("standard")]
    | Annotated[GEvalMetric, Tag("geval")]
    | Annotated[RAGMetric, Tag("rag")]
    | Annotated[CodeMetric, Tag("code")],
    Discriminator(
        _metric_tag,
        custom_error_type="metric_type",
        custom_error_message=(
            "a metric needs 'type': standard, geval, rag or code "
            "(a mapping with only 'metric' is standard)"
        ),
    ),
]


def unique_metric_names(metrics: list[Any] | None) -> list[Any] | None:
    """Results are keyed by metric name (roll-up, summary, grader details), so two metrics of
    one list need different names: e.g. two ``numeric`` metrics with their own tolerances."""
    seen: set[str] = set()
    for metric in metrics or []:
        name = metric.metric_name
        if name in seen:
            raise ValueError(
                f"two metrics are named {name!r}; give each its own 'name' so their results "
                "stay apart"
            )
        seen.add(name)
    return metrics


class EvaluationConfig(StrictModel):
    """Agent-wide metrics and the default judge model for LLM metrics."""

    holodeck_ignored: ClassVar[dict[str, str]] = {"optimizer": "prompt optimisation is not run"}

    model: ModelConfig | None = None
    metrics: list[Metric]
    optimizer: OptimizerConfig | None = None  # HoloDeck 0.7.1

    @field_validator("metrics")
    @classmethod
    def _at_least_one(cls, value: list[Any]) -> list[Any]:
        if not value:
            raise ValueError("metrics must list at least one metric")
        unique_metric_names(value)
        return value
