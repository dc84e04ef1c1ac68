"""Test cases of agent.yaml: single-turn (``input`` ...) or multi-turn (``turns``), their files
and the tool calls they expect."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Any, Literal, Self

from pydantic import (
    Discriminator,
    PlainSerializer,
    PlainValidator,
    Tag,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from graders.matchers import ArgMatcher, matcher_to_config, parse_arg_matcher
from runs.core.agentconfig.common import (
    StrictModel,
    exists_if_local,
    non_empty,
    not_blank,
    spec_error,
)
from runs.core.agentconfig.limits import PageNumber, ToolCount
from runs.core.agentconfig.metrics import Metric, unique_metric_names

MAX_FILES_PER_TURN = 10

FileType = Literal["image", "pdf", "text", "excel", "word", "powerpoint", "csv"]

# --- expected tools --------------------------------------------------------------------------


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


class ExpectedTool(StrictModel):
    """A tool the agent must call in this turn, optionally with asserted args."""

    name: Annotated[str, not_blank("tool name")]
    args: dict[str, ArgMatcherField] | None = None
    count: ToolCount = 1

    @field_validator("count", mode="before")
    @classmethod
    def _count_positive(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 1:
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


def _normalise_expectations(items: list[str | ExpectedTool] | None) -> list[ExpectedTool]:
    return [ExpectedTool(name=i) if isinstance(i, str) else i for i in items or []]


# --- files -----------------------------------------------------------------------------------


class FileInput(StrictModel):
    """A file attached to a turn: local ``path`` (relative to the agent dir) or ``url``."""

    path: str | None = None
    url: str | None = None
    type: FileType
    description: str | None = None
    pages: list[PageNumber] | None = None
    sheet: str | None = None
    range: str | None = None
    cache: bool | None = None

    @model_validator(mode="after")
    def _path_or_url(self, info: ValidationInfo) -> Self:
        if (self.path is None) == (self.url is None):
            raise spec_error("give exactly one of 'path' or 'url'")
        if not exists_if_local(info, self.path):
            raise spec_error(f"file {self.path!r} was not found", "path")
        return self


# --- turns and test cases --------------------------------------------------------------------


class _TurnFieldChecks(StrictModel):
    """The checks of the fields a turn and a single-turn case share (``input``,
    ``ground_truth``, ``expected_tools``, ``files``, ``evaluations``). Each subclass declares
    the fields itself, so their order (and the schema) stays its own."""

    @field_validator("input", "ground_truth", mode="before", check_fields=False)
    @classmethod
    def _numbers_as_text(cls, value: Any) -> Any:
        """YAML reads ``ground_truth: 25587`` as a number; the answer to compare against is
        text."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("input", check_fields=False)
    @classmethod
    def _input_not_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("input must not be empty")
        return value.strip() if value is not None else None

    @field_validator("ground_truth", check_fields=False)
    @classmethod
    def _ground_truth_not_empty(cls, value: str | None) -> str | None:
        return non_empty(value, "ground_truth")

    @field_validator("expected_tools", check_fields=False)
    @classmethod
    def _tool_names_not_empty(cls, value: list[Any] | None) -> list[Any] | None:
        for item in value or []:
            if isinstance(item, str) and not item.strip():
                raise ValueError("an expected tool name must not be empty")
        return value

    @field_validator("files", check_fields=False)
    @classmethod
    def _at_most_ten_files(cls, value: list[Any] | None) -> list[Any] | None:
        if value is not None and len(value) > MAX_FILES_PER_TURN:
            raise ValueError(f"at most {MAX_FILES_PER_TURN} files per turn, got {len(value)}")
        return value

    @field_validator("evaluations", check_fields=False)
    @classmethod
    def _unique_metric_names(cls, value: list[Any] | None) -> list[Any] | None:
        return unique_metric_names(value)


class Turn(_TurnFieldChecks):
    """One exchange of a conversation: what the user says and what to check afterwards."""

    input: str
    ground_truth: str | None = None
    expected_tools: list[ExpectedToolItem] | None = None
    files: list[FileInput] | None = None
    retrieval_context: list[str] | None = None
    evaluations: list[Metric] | None = None
    # Free-form data handed to code graders (e.g. ConvFinQA's turn_program).
    turn_config: dict[str, Any] | None = None

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


class TestCase(_TurnFieldChecks):
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

    @field_validator("name")
    @classmethod
    def _name_not_empty(cls, value: str | None) -> str | None:
        return non_empty(value, "name")

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
        return self.turns if self.turns is not None else self._single_turn

    # Not a private attribute: pydantic would initialise one on every instance.
    @cached_property
    def _single_turn(self) -> list[Turn]:
        return [
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

    def tool_expectations(self) -> list[ExpectedTool]:
        """Legacy case-level ``expected_tools`` normalised (empty for multi-turn cases)."""
        return _normalise_expectations(self.expected_tools)
