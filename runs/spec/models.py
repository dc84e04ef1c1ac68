"""The agent.yaml language as pydantic v2 models (DESIGN.md §4, seeds 000 and 003).

Every model forbids unknown fields. Validators that need the agent directory (code graders,
function tools, instruction/transcript/input files) read it from the validation context that
``runs.spec.loader`` passes (``{"base_dir": Path, "resolver": CodeResolver}``); without a
context they check only the shape, so a stored config snapshot can be re-validated anywhere.

Validators raise ``spec_error(message, subpath)``: the loader appends ``subpath`` to the
pydantic location so a problem points at the exact field
(``turns[2].expected_tools[1].args.a.regex``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PlainSerializer,
    PlainValidator,
    PositiveInt,
    PrivateAttr,
    Tag,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from graders.deterministic import is_valid_response_path
from graders.judges import RagMetricType
from graders.matchers import ArgMatcher, matcher_to_config, parse_arg_matcher
from runs.report.models import MetricKind
from runs.spec.resolve import GRADER_PATH_RE, CodeResolver, ResolveError

SPEC_ERROR = "holodeck_spec"
MAX_FILES_PER_TURN = 10
TOOL_NAME_RE = re.compile(r"^[0-9A-Za-z_]+$")

Provider = Literal["openai", "azure_openai", "anthropic", "ollama", "scripted"]
StandardMetricName = Literal["bleu", "rouge", "meteor", "equality", "numeric"]

GEvalParam = Literal[
    "input",
    "actual_output",
    "expected_output",
    "context",
    "retrieval_context",
    "tools_called",
    "expected_tools",
]
FileType = Literal["image", "pdf", "text", "excel", "word", "powerpoint", "csv"]

# Tags of the discriminated unions below. Pydantic puts the tag into an error's location; the
# loader drops these so paths read like the YAML (``evaluations[0].grader``).
UNION_TAGS = frozenset(
    {"standard", "geval", "rag", "code", "function", "mcp", "tool-name", "tool-object"}
)


def spec_error(message: str, subpath: str = "") -> PydanticCustomError:
    """A validation error with a human message and an optional field path below the model."""
    return PydanticCustomError(SPEC_ERROR, "{message}", {"message": message, "subpath": subpath})


def _base_dir(info: ValidationInfo) -> Path | None:
    context = info.context
    if isinstance(context, dict) and isinstance(context.get("base_dir"), Path):
        return context["base_dir"]
    return None


def _resolver(info: ValidationInfo) -> CodeResolver | None:
    context = info.context
    if isinstance(context, dict) and isinstance(context.get("resolver"), CodeResolver):
        return context["resolver"]
    return None


def _local_path(base_dir: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else base_dir / path


def _exists_if_local(info: ValidationInfo, value: str | None) -> bool:
    """False only when loading from a directory and ``value`` names no file there."""
    base_dir = _base_dir(info)
    return base_dir is None or value is None or _local_path(base_dir, value).is_file()


def _non_empty(value: str | None, what: str) -> str | None:
    if value is not None and not value.strip():
        raise ValueError(f"{what} must not be empty")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- model -----------------------------------------------------------------------------------


class ModelConfig(_Strict):
    """An LLM: the agent's model, or a judge model for evaluations."""

    provider: Provider
    name: str
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)
    top_p: float | None = Field(default=None, ge=0, le=1)
    endpoint: str | None = None
    api_key: str | None = None
    api_version: str | None = None
    # scripted provider only
    transcript: str | None = None
    latency_ms: float = Field(default=0, ge=0)

    @field_validator("name")
    @classmethod
    def _name_not_empty(cls, value: str) -> str:
        _non_empty(value, "model name")
        return value

    @model_validator(mode="after")
    def _scripted_fields(self, info: ValidationInfo) -> Self:
        if self.provider != "scripted":
            if self.transcript is not None:
                raise spec_error("transcript is only for provider 'scripted'", "transcript")
            if self.latency_ms:
                raise spec_error("latency_ms is only for provider 'scripted'", "latency_ms")
            return self
        if not _exists_if_local(info, self.transcript):
            raise spec_error(f"transcript file {self.transcript!r} was not found", "transcript")
        return self


class Instructions(_Strict):
    """The system prompt: ``inline`` text or a ``file`` relative to the agent directory."""

    inline: str | None = None
    file: str | None = None
    _text: str | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _bare_string_is_inline(cls, data: Any) -> Any:
        return {"inline": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _exactly_one(self, info: ValidationInfo) -> Self:
        if (self.inline is None) == (self.file is None):
            raise spec_error("give exactly one of 'inline' or 'file'")
        base_dir = _base_dir(info)
        if self.file is not None and base_dir is not None:
            path = _local_path(base_dir, self.file)
            try:
                self._text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise spec_error(f"instructions file {self.file!r} was not found", "file") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise spec_error(f"cannot read {self.file!r}: {exc}", "file") from None
        return self

    @property
    def text(self) -> str:
        """The prompt text (for ``file``, as read at load)."""
        if self.inline is not None:
            return self.inline
        if self._text is None:
            raise RuntimeError("instructions file not read: load the agent with load_agent()")
        return self._text


# --- tools -----------------------------------------------------------------------------------


class _ToolBase(_Strict):
    name: str
    description: str = ""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not TOOL_NAME_RE.match(value):
            raise ValueError(f"tool name {value!r} may only use letters, digits and _")
        return value


class FunctionTool(_ToolBase):
    """A Python function in a file of the agent directory; its schema comes from the signature."""

    type: Literal["function"] = "function"
    file: str
    function: str
    _callable: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _resolve(self, info: ValidationInfo) -> Self:
        resolver = _resolver(info)
        if resolver is None:
            return self
        try:
            self._callable = resolver.function(self.file, self.function)
        except ResolveError as exc:
            raise spec_error(str(exc), "function" if exc.part == "attribute" else "file") from None
        return self

    @property
    def callable(self) -> Any:
        if self._callable is None:
            raise RuntimeError(f"tool {self.name!r} not resolved: load the agent with load_agent()")
        return self._callable


class McpTool(_ToolBase):
    """An MCP server: stdio (``command`` + ``args`` + ``env``) or http (``url`` + ``headers``)."""

    type: Literal["mcp"] = "mcp"
    transport: Literal["stdio", "http"] = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # The tool's output counts as retrieval context for RAG metrics.
    is_retrieval: bool = False

    @model_validator(mode="after")
    def _transport_fields(self) -> Self:
        if self.transport == "stdio" and not self.command:
            raise spec_error("a stdio MCP server needs 'command'", "command")
        if self.transport == "http" and not self.url:
            raise spec_error("an http MCP server needs 'url'", "url")
        return self


def _tool_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if isinstance(kind, str) else None


Tool = Annotated[
    Annotated[FunctionTool, Tag("function")] | Annotated[McpTool, Tag("mcp")],
    Discriminator(
        _tool_tag,
        custom_error_type="tool_type",
        custom_error_message="a tool needs 'type': function or mcp",
    ),
]


# --- metrics ---------------------------------------------------------------------------------


class _MetricBase(_Strict):
    threshold: float | None = None
    enabled: bool = True
    fail_on_error: bool = False
    model: ModelConfig | None = None
    retry_on_failure: int | None = None
    timeout_ms: int | None = None
    scale: int | None = None
    custom_prompt: str | None = None

    @field_validator("retry_on_failure")
    @classmethod
    def _retry_range(cls, value: int | None) -> int | None:
        if value is not None and not 1 <= value <= 3:
            raise ValueError(f"retry_on_failure must be between 1 and 3, got {value}")
        return value

    @field_validator("timeout_ms", "scale")
    @classmethod
    def _positive(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value <= 0:
            raise ValueError(f"{info.field_name} must be positive, got {value}")
        return value


class StandardMetric(_MetricBase):
    """NLP (bleu, rouge, meteor) or deterministic (equality, numeric) metric."""

    type: Literal["standard"] = "standard"
    metric: StandardMetricName
    name: str | None = None
    # equality
    case_insensitive: bool = False
    strip_whitespace: bool = False
    strip_punctuation: bool = False
    # numeric
    absolute_tolerance: float = 1e-6
    relative_tolerance: float = 0.0
    accept_percent: bool = False
    accept_thousands_separators: bool = False
    # Grade one JSON leaf of the response (dotted path) instead of the whole text.
    response_path: str | None = None

    @field_validator("absolute_tolerance", "relative_tolerance")
    @classmethod
    def _non_negative(cls, value: float, info: ValidationInfo) -> float:
        if value < 0:
            raise ValueError(f"{info.field_name} must be >= 0, got {value}")
        return value

    @field_validator("response_path")
    @classmethod
    def _valid_path(cls, value: str | None) -> str | None:
        if value is not None and not is_valid_response_path(value):
            raise ValueError(
                f"response_path {value!r} must be keys joined by dots with optional [index], "
                "e.g. result.items[0].value"
            )
        return value

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
    name: str
    criteria: str
    evaluation_steps: list[str] | None = None
    evaluation_params: list[GEvalParam] = Field(default_factory=lambda: _default_params())
    strict_mode: bool = False

    @field_validator("name", "criteria")
    @classmethod
    def _not_empty(cls, value: str, info: ValidationInfo) -> str:
        _non_empty(value, str(info.field_name))
        return value

    @property
    def metric_name(self) -> str:
        return self.name

    @property
    def kind(self) -> MetricKind:
        return "geval"


class RAGMetric(_MetricBase):
    """An LLM-judged retrieval metric (deepeval)."""

    type: Literal["rag"] = "rag"
    metric_type: RagMetricType

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
        resolver = _resolver(info)
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


class EvaluationConfig(_Strict):
    """Agent-wide metrics and the default judge model for LLM metrics."""

    model: ModelConfig | None = None
    metrics: list[Metric]

    @field_validator("metrics")
    @classmethod
    def _at_least_one(cls, value: list[Any]) -> list[Any]:
        if not value:
            raise ValueError("metrics must list at least one metric")
        _unique_metric_names(value)
        return value


def _unique_metric_names(metrics: list[Any] | None) -> list[Any] | None:
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


# --- test cases ------------------------------------------------------------------------------


def _matcher_subpath(value: Any) -> str:
    """Which key of a malformed matcher dict to point at (``regex`` for a bad pattern)."""
    if isinstance(value, dict):
        keys = [k for k in ("fuzzy", "regex") if k in value]
        if len(keys) == 1 and len(value) == 1:
            return keys[0]
    return ""


def _parse_matcher(value: Any) -> ArgMatcher:
    try:
        return parse_arg_matcher(value)
    except ValueError as exc:
        raise spec_error(str(exc), _matcher_subpath(value)) from None


ARG_MATCHER_JSON_SCHEMA: dict[str, Any] = {
    "title": "ArgMatcher",
    "description": (
        "A literal value (compared exactly; int and float equal), {fuzzy: str} (normalised, "
        "numeric-aware) or {regex: str} (anchored full match on str(actual))."
    ),
    "anyOf": [
        {
            "type": "object",
            "properties": {"fuzzy": {"type": "string"}},
            "required": ["fuzzy"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"regex": {"type": "string", "format": "regex"}},
            "required": ["regex"],
            "additionalProperties": False,
        },
        {"not": {"type": "object", "anyOf": [{"required": ["fuzzy"]}, {"required": ["regex"]}]}},
    ],
}

ArgMatcherField = Annotated[
    ArgMatcher,
    PlainValidator(_parse_matcher),
    PlainSerializer(matcher_to_config),
    WithJsonSchema(ARG_MATCHER_JSON_SCHEMA),
]


class ExpectedTool(_Strict):
    """A tool the agent must call in this turn, optionally with asserted args."""

    name: str
    args: dict[str, ArgMatcherField] | None = None
    count: int = 1

    @field_validator("name")
    @classmethod
    def _name_not_empty(cls, value: str) -> str:
        _non_empty(value, "tool name")
        return value

    @field_validator("count")
    @classmethod
    def _count_positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError(
                f"count must be >= 1, got {value} (asserting that a tool is not called "
                "is not supported)"
            )
        return value

    @field_validator("args", mode="before")
    @classmethod
    def _plain_arg_names(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for key in value:
                if not isinstance(key, str) or not key or any(c in key for c in ".[]"):
                    raise ValueError(
                        f"arg name {key!r} must be a plain argument name (no dots or indexing)"
                    )
        return value


def _expected_tool_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "tool-name"
    if isinstance(value, dict | ExpectedTool):
        return "tool-object"
    return None


ExpectedToolItem = Annotated[
    Annotated[str, Tag("tool-name")] | Annotated[ExpectedTool, Tag("tool-object")],
    Discriminator(
        _expected_tool_tag,
        custom_error_type="expected_tool",
        custom_error_message="an expected tool is a tool name or a mapping {name, args?, count?}",
    ),
]


class FileInput(_Strict):
    """A file attached to a turn: local ``path`` (relative to the agent dir) or ``url``."""

    path: str | None = None
    url: str | None = None
    type: FileType
    description: str | None = None
    pages: list[PositiveInt] | None = None
    sheet: str | None = None
    range: str | None = None
    cache: bool | None = None

    @model_validator(mode="after")
    def _path_or_url(self, info: ValidationInfo) -> Self:
        if (self.path is None) == (self.url is None):
            raise spec_error("give exactly one of 'path' or 'url'")
        if not _exists_if_local(info, self.path):
            raise spec_error(f"file {self.path!r} was not found", "path")
        return self


def _number_as_text(value: Any) -> Any:
    """YAML reads ``ground_truth: 25587`` as a number; the answer to compare against is text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def _check_expected_tools(value: list[Any] | None) -> list[Any] | None:
    for item in value or []:
        if isinstance(item, str) and not item.strip():
            raise ValueError("an expected tool name must not be empty")
    return value


def _check_files(value: list[Any] | None) -> list[Any] | None:
    if value is not None and len(value) > MAX_FILES_PER_TURN:
        raise ValueError(f"at most {MAX_FILES_PER_TURN} files per turn, got {len(value)}")
    return value


def _normalise_expectations(items: list[str | ExpectedTool] | None) -> list[ExpectedTool]:
    return [ExpectedTool(name=i) if isinstance(i, str) else i for i in items or []]


class Turn(_Strict):
    """One exchange of a conversation: what the user says and what to check afterwards."""

    input: str
    ground_truth: str | None = None
    expected_tools: list[ExpectedToolItem] | None = None
    files: list[FileInput] | None = None
    retrieval_context: list[str] | None = None
    evaluations: list[Metric] | None = None
    # Free-form data handed to code graders (e.g. ConvFinQA's turn_program).
    turn_config: dict[str, Any] | None = None

    @field_validator("input", "ground_truth", mode="before")
    @classmethod
    def _numbers_as_text(cls, value: Any) -> Any:
        return _number_as_text(value)

    @field_validator("input")
    @classmethod
    def _input_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("input must not be empty")
        return value.strip()

    @field_validator("ground_truth")
    @classmethod
    def _ground_truth_not_empty(cls, value: str | None) -> str | None:
        return _non_empty(value, "ground_truth")

    @field_validator("expected_tools")
    @classmethod
    def _tools(cls, value: list[Any] | None) -> list[Any] | None:
        return _check_expected_tools(value)

    @field_validator("files")
    @classmethod
    def _files(cls, value: list[Any] | None) -> list[Any] | None:
        return _check_files(value)

    @field_validator("evaluations")
    @classmethod
    def _evaluations(cls, value: list[Any] | None) -> list[Any] | None:
        return _unique_metric_names(value)

    def tool_expectations(self) -> list[ExpectedTool]:
        """``expected_tools`` with bare names turned into ``ExpectedTool(name)``."""
        return _normalise_expectations(self.expected_tools)


# Fields of a single-turn case that have no meaning beside ``turns``.
_LEGACY_TURN_FIELDS = ("input", "ground_truth", "expected_tools", "files", "retrieval_context")


def case_label(name: str | None, index: int) -> str:
    """How a test case is named everywhere (transcripts, progress, filters, errors): its name,
    else ``#<index>`` (0-based)."""
    return name or f"#{index}"


def case_shape_problem(present: set[str]) -> tuple[str, str] | None:
    """(field, message) when the keys present mix or miss the two test-case shapes.

    Shared by the model and the loader (which checks the raw keys so a shape mistake is
    reported even when other fields of the case are invalid too).
    """
    if "turns" not in present:
        if "input" not in present:
            return "input", "a test case needs 'input' (single-turn) or 'turns'"
        return None
    clashing = [f for f in _LEGACY_TURN_FIELDS if f in present]
    if clashing:
        return "turns", (
            f"'turns' cannot be combined with {', '.join(clashing)} (move them into a turn)"
        )
    return None


class TestCase(_Strict):
    """A single-turn (legacy: ``input`` ...) or multi-turn (``turns``) test case."""

    __test__ = False  # not a pytest test class

    name: str | None = None
    input: str | None = None
    ground_truth: str | None = None
    expected_tools: list[ExpectedToolItem] | None = None
    files: list[FileInput] | None = None
    retrieval_context: list[str] | None = None
    evaluations: list[Metric] | None = None
    turns: list[Turn] | None = None
    _turns_cache: list[Turn] | None = PrivateAttr(default=None)

    @field_validator("name")
    @classmethod
    def _name_not_empty(cls, value: str | None) -> str | None:
        return _non_empty(value, "name")

    @field_validator("input", "ground_truth", mode="before")
    @classmethod
    def _numbers_as_text(cls, value: Any) -> Any:
        return _number_as_text(value)

    @field_validator("input")
    @classmethod
    def _input_not_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("input must not be empty")
        return value.strip() if value is not None else None

    @field_validator("ground_truth")
    @classmethod
    def _ground_truth_not_empty(cls, value: str | None) -> str | None:
        return _non_empty(value, "ground_truth")

    @field_validator("expected_tools")
    @classmethod
    def _tools(cls, value: list[Any] | None) -> list[Any] | None:
        return _check_expected_tools(value)

    @field_validator("files")
    @classmethod
    def _files(cls, value: list[Any] | None) -> list[Any] | None:
        return _check_files(value)

    @field_validator("evaluations")
    @classmethod
    def _evaluations(cls, value: list[Any] | None) -> list[Any] | None:
        return _unique_metric_names(value)

    @field_validator("turns")
    @classmethod
    def _turns_not_empty(cls, value: list[Turn] | None) -> list[Turn] | None:
        if value is not None and not value:
            raise ValueError(
                "turns must not be empty (give at least one turn, or use 'input' for a "
                "single-turn case)"
            )
        return value

    @model_validator(mode="after")
    def _one_shape(self) -> Self:
        present = {f for f in (*_LEGACY_TURN_FIELDS, "turns") if getattr(self, f) is not None}
        problem = case_shape_problem(present)
        if problem is not None:
            raise spec_error(problem[1], problem[0])
        return self

    @property
    def is_multi_turn(self) -> bool:
        return self.turns is not None

    def as_turns(self) -> list[Turn]:
        """The turns to run; a single-turn case is one turn (same objects on every call)."""
        if self.turns is not None:
            return self.turns
        if self._turns_cache is None:
            self._turns_cache = [
                Turn.model_construct(
                    input=self.input or "",
                    ground_truth=self.ground_truth,
                    expected_tools=self.expected_tools,
                    files=self.files,
                    retrieval_context=self.retrieval_context,
                    evaluations=self.evaluations,
                    turn_config=None,
                )
            ]
        return self._turns_cache

    def tool_expectations(self) -> list[ExpectedTool]:
        """Legacy case-level ``expected_tools`` normalised (empty for multi-turn cases)."""
        return _normalise_expectations(self.expected_tools)


# --- agent -----------------------------------------------------------------------------------


class ExecutionConfig(_Strict):
    """Timeouts (seconds), the file cache and test-case concurrency."""

    llm_timeout: float = Field(default=60, gt=0)
    file_timeout: float = Field(default=30, gt=0)
    download_timeout: float = Field(default=30, gt=0)
    cache_enabled: bool = True
    cache_dir: str = ".holodeck/cache"
    parallel_test_cases: int | None = None

    @field_validator("parallel_test_cases")
    @classmethod
    def _at_least_one(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"parallel_test_cases must be >= 1, got {value}")
        return value


class ClaudeConfig(_Strict):
    """Options of the claude_agent_sdk backend (provider anthropic)."""

    max_turns: int | None = Field(default=None, gt=0)
    allowed_tools: list[str] | None = None
    disallowed_tools: list[str] | None = None
    permission_mode: Literal["default", "acceptEdits", "plan"] = "default"
    max_thinking_tokens: int | None = Field(default=None, gt=0)
    append_system_prompt: str | None = None

    @field_validator("permission_mode", mode="before")
    @classmethod
    def _no_bypass(cls, value: Any) -> Any:
        if value == "bypassPermissions":
            raise ValueError("permission_mode 'bypassPermissions' is not allowed")
        return value


class AgentConfig(_Strict):
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
        _non_empty(value, "name")
        return value

    @model_validator(mode="after")
    def _unique_tool_names(self) -> Self:
        problems = duplicate_tool_names([tool.name for tool in self.tools])
        if problems:
            raise spec_error(problems[0][1], problems[0][0])
        return self


def duplicate_tool_names(names: list[Any]) -> list[tuple[str, str]]:
    """(field path, message) for every tool name already used by an earlier tool."""
    seen: dict[Any, int] = {}
    problems: list[tuple[str, str]] = []
    for index, name in enumerate(names):
        if not isinstance(name, str):
            continue
        if name in seen:
            problems.append(
                (f"tools[{index}].name", f"duplicate tool name {name!r} (also tools[{seen[name]}])")
            )
        else:
            seen[name] = index
    return problems
