"""HoloDeck-compatible result wire models (the shape of `results/<slug>/<timestamp>.json`).

Field names, order and defaults follow HoloDeck's `holodeck.models.test_result` and
`eval_run` (feature 031) plus the multi-turn additions of feature 032 (seed 000 §8–§11), so a
file HoloDeck wrote loads unchanged and a file we write reads like one of theirs.

Every model uses ``extra="forbid"``, as HoloDeck's do. That is safe for imports because every
key the real files carry is modelled here (the 24 fixture runs load unchanged — a test pins
it), and it is what we want: an unknown key means a file from a HoloDeck version we do not
understand, and silently dropping its data on import-then-export would be worse than a
``ReportFormatError`` that names the file and the key. Free-form blocks (``metadata``,
``agent_config``, ``prompt_version``, ``grader_details``) are plain dicts, so HoloDeck can grow
them without breaking us.

Our extensions are omitted where HoloDeck's exact shape is wanted:

- ``MetricResult.judge_usage`` / ``judge_cost_usd`` (LLM-judge accounting) are omitted from dumps
  when unset, so files without judge accounting keep HoloDeck's exact shape;
- ``outcome`` (metric, turn, case) and ``kind_outcomes`` (turn, case) are the stored verdicts of
  ``runs.core.verdicts.outcomes``, decided here, once, when a result is built (a validator fills
  them when absent, so a HoloDeck file gets them on import and a stored verdict is never
  re-decided);
- ``TestReport.run_summary`` is our summary (``runs.core.verdicts.summary``), ``TestReport.reviews``
  what people concluded about its turns (``runs.core.wire.reviews``);
- ``TestResult.session_start_ms`` is how long the case's agent session took to start (omitted
  from dumps when unset).

``holodeck_dump(model)`` dumps without the verdict extensions (``outcome``, ``kind_outcomes``,
``run_summary``, ``reviews``) and ``session_start_ms``: the shape of a HoloDeck result file,
and what a result file's identity hash is computed over.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from runs.core.verdicts.kinds import MetricKind
from runs.core.verdicts.outcomes import (
    CaseOutcome,
    MetricOutcome,
    TurnOutcome,
    case_kind_outcomes,
    case_outcome,
    metric_outcome,
    turn_kind_outcomes,
    turn_outcome,
)
from runs.core.verdicts.summary import RunSummary
from runs.core.wire.reviews import ReviewWire, review_place_problems
from runs.core.wire.transcripts import valid_events

# A turn's transcript as read from anywhere (a worker, a row, a file): events of known types,
# capped (runs.core.wire.transcripts); anything else is no transcript.
Transcript = Annotated[list[dict[str, Any]] | None, BeforeValidator(valid_events)]

__all__ = ["MetricKind"]

# Names HoloDeck (and we) give deterministic / NLP metrics. HoloDeck's legacy reader knows the
# first five; equality and numeric arrived with feature 032, the rouge variants are spellings
# that appear in older configs.
STANDARD_METRIC_NAMES: frozenset[str] = frozenset(
    {
        "bleu",
        "rouge",
        "rouge1",
        "rouge2",
        "rougel",
        "rouge_l",
        "meteor",
        "equality",
        "numeric",
        "exact_match",
        "f1_score",
    }
)
RAG_METRIC_NAMES: frozenset[str] = frozenset(
    {
        "faithfulness",
        "answer_relevancy",
        "contextual_relevancy",
        "contextual_precision",
        "contextual_recall",
    }
)


def infer_metric_kind(metric_name: str) -> MetricKind:
    """The kind of a metric in a legacy file that predates ``MetricResult.kind``.

    Standard names -> ``standard``, the five RAG metrics -> ``rag``, anything else was a
    custom LLM-as-judge criterion -> ``geval``. ``code`` is never inferred: code graders are
    younger than the ``kind`` field, so their results always carry it.
    """
    key = metric_name.strip().lower().replace("-", "_").replace(" ", "_")
    if key in STANDARD_METRIC_NAMES:
        return "standard"
    if key in RAG_METRIC_NAMES:
        return "rag"
    return "geval"


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # A dumped model is described by its fields (the API's OpenAPI document): the wrap
        # serializers below only drop keys, and their ``dict`` return type would hide them all.
        return handler(_without_serializer(core_schema))


def _without_serializer(schema: Any) -> Any:
    """A model's core schema (under its validators' wrappers) without its serializer."""
    if schema.get("type") == "model":
        return {key: value for key, value in schema.items() if key != "serialization"}
    if isinstance(schema.get("schema"), dict):
        return {**schema, "schema": _without_serializer(schema["schema"])}
    return schema


# Our extensions: left out of a HoloDeck-shaped dump (context {"holodeck": True}): the
# verdicts, the case's session start and each turn's transcript.
_VERDICT_KEYS = (
    "outcome",
    "kind_outcomes",
    "run_summary",
    "session_start_ms",
    "repetitions",
    "cancelled_cases",
    "transcript",
    "reviews",
)

# The key of ``TestReport.environment`` that carries our counts of cases and turns (JSON of
# ``runs.core.verdicts.summary.OutcomeCounts``) in every file we write.
COUNTS_KEY = "holodeck_web_counts"


def _without_verdicts(dumped: dict[str, Any], info: SerializationInfo) -> dict[str, Any]:
    context = info.context if isinstance(info.context, dict) else {}
    if context.get("holodeck"):
        for key in _VERDICT_KEYS:
            dumped.pop(key, None)
    return dumped


def holodeck_dump(model: BaseModel) -> dict[str, Any]:
    """JSON-safe dump in HoloDeck's own shape (no verdict extensions)."""
    return model.model_dump(mode="json", context={"holodeck": True})


class TokenUsage(_Wire):
    """Provider-reported tokens; ``+`` sums every field (multi-turn roll-up, FR-007)."""

    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    total_tokens: int = Field(ge=0)
    cache_creation_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _total_covers_prompt_and_completion(self) -> Self:
        # Relaxed from equality (seed 000 §10a): some providers count cache reads in the total.
        if self.total_tokens < self.prompt_tokens + self.completion_tokens:
            raise ValueError(
                f"total_tokens ({self.total_tokens}) must be >= prompt_tokens "
                f"({self.prompt_tokens}) + completion_tokens ({self.completion_tokens})"
            )
        return self

    def __add__(self, other: object) -> TokenUsage:
        if not isinstance(other, TokenUsage):
            return NotImplemented
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
        )

    @classmethod
    def zero(cls) -> TokenUsage:
        return cls(prompt_tokens=0, completion_tokens=0, total_tokens=0)

    @classmethod
    def counted(
        cls,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        cache_creation_tokens: int = 0,
        cache_read_tokens: int = 0,
    ) -> TokenUsage:
        """Usage from a provider's counts; the total is prompt + completion."""
        return cls(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
            cache_creation_tokens=cache_creation_tokens,
            cache_read_tokens=cache_read_tokens,
        )


class ToolInvocation(_Wire):
    """One tool call with its arguments and outcome (HoloDeck feature 031's record).

    HoloDeck requires ``bytes`` (size of the JSON result, used to collapse large payloads);
    we fill it in when absent so our files stay readable by HoloDeck's dashboard.
    """

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    bytes: int = Field(default=0, ge=0)
    duration_ms: float | None = None
    error: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _fill_bytes(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("bytes") is None:
            data = {**data, "bytes": len(json.dumps(data.get("result"), default=str))}
        return data


class ProcessedFileInput(_Wire):
    """A test-input file converted to Markdown. ``original`` is the FileInput as a dict, so
    this package does not depend on ``runs.core.agentconfig``."""

    original: dict[str, Any]
    markdown_content: str
    metadata: dict[str, Any] | None = None
    cached_path: str | None = None
    processing_time_ms: int | None = None
    error: str | None = None


_EXTENSION_KEYS = ("judge_usage", "judge_cost_usd")


class MetricResult(_Wire):
    """One metric's verdict. ``score`` is None when the metric could not grade (``error``).

    ``passed`` is stored, never re-derived: real HoloDeck files hold ``passed: true`` with a
    score below the threshold, and importing must not rewrite history.
    """

    metric_name: str
    kind: MetricKind
    score: float | None = None
    threshold: float | None = None
    passed: bool
    # HoloDeck writes a string ("0-1"); seed 003 documents an int. Accept both.
    scale: int | str | None = None
    error: str | None = None
    retry_count: int | None = None
    evaluation_time_ms: int | None = None
    model_used: str | None = None
    reasoning: str | None = None
    # Our extensions (LLM-judge accounting); dropped from dumps when None.
    judge_usage: TokenUsage | None = None
    judge_cost_usd: float | None = None
    outcome: MetricOutcome | None = None

    @model_validator(mode="before")
    @classmethod
    def _infer_missing_kind(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("kind") is None and "metric_name" in data:
            name = data["metric_name"]
            if isinstance(name, str):
                data = {**data, "kind": infer_metric_kind(name)}
        return data

    @model_serializer(mode="wrap")
    def _omit_unset_extensions(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        for key in _EXTENSION_KEYS:
            if dumped.get(key) is None:
                dumped.pop(key, None)
        return _without_verdicts(dumped, info)

    @model_validator(mode="after")
    def _decide_outcome(self) -> Self:
        if self.outcome is None:
            self.outcome = metric_outcome(self).value  # type: ignore[assignment]
        return self


class TurnResult(_Wire):
    """The outcome of one turn of a multi-turn case (seed 000 §8)."""

    turn_index: int = Field(ge=0)
    input: str
    response: str | None = None
    ground_truth: str | None = None
    expected_tools: list[str | dict[str, Any]] | None = None
    tool_calls: list[str] = Field(default_factory=list)
    tool_invocations: list[ToolInvocation] = Field(default_factory=list)
    tools_matched: bool | None = None
    # One record per tool assertion: {tool, args_asserted, matched_call_index,
    # unmatched_reason, ...}; the graders define the rest (per-arg verdicts).
    arg_match_details: list[dict[str, Any]] | None = None
    metric_results: list[MetricResult] = Field(default_factory=list)
    passed: bool
    execution_time_ms: int = Field(ge=0)
    token_usage: TokenUsage | None = None
    errors: list[str] = Field(default_factory=list)
    skipped: bool = False
    grader_details: dict[str, Any] | None = None
    outcome: TurnOutcome | None = None
    kind_outcomes: dict[str, str] | None = None
    # Our extension: what the agent was sent and did (runs.core.wire.transcripts events);
    # dropped from dumps when None and from HoloDeck-shaped dumps always.
    transcript: Transcript = None

    @model_validator(mode="after")
    def _decide_outcome(self) -> Self:
        if self.outcome is None:
            self.outcome = turn_outcome(self).value  # type: ignore[assignment]
        if self.kind_outcomes is None:
            self.kind_outcomes = turn_kind_outcomes(self)
        return self

    def changed(self, **changes: Any) -> TurnResult:
        """A copy with ``changes`` and its verdicts decided again (``model_copy`` would keep
        the old ones)."""
        return TurnResult.model_validate(
            {**dict(self), **changes, "outcome": None, "kind_outcomes": None}
        )

    @model_serializer(mode="wrap")
    def _holodeck_shape(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        if dumped.get("transcript") is None:
            dumped.pop("transcript", None)
        return _without_verdicts(dumped, info)


class TestResult(_Wire):
    """One test case's result; ``turns`` is set for multi-turn cases only (seed 000 §9)."""

    __test__ = False  # not a pytest test class

    test_name: str | None = None
    test_input: str
    processed_files: list[ProcessedFileInput] = Field(default_factory=list)
    agent_response: str | None = None
    tool_calls: list[str] = Field(default_factory=list)
    tool_invocations: list[ToolInvocation] = Field(default_factory=list)
    expected_tools: list[str | dict[str, Any]] | None = None
    tools_matched: bool | None = None
    metric_results: list[MetricResult] = Field(default_factory=list)
    ground_truth: str | None = None
    passed: bool
    execution_time_ms: int = Field(ge=0)
    errors: list[str] = Field(default_factory=list)
    timestamp: str
    token_usage: TokenUsage | None = None
    turns: list[TurnResult] | None = None
    outcome: CaseOutcome | None = None
    kind_outcomes: dict[str, str] | None = None
    # Our extension: how long the case's agent session took to start (e.g. a Claude Code CLI
    # process); dropped from dumps when None and from HoloDeck-shaped dumps always.
    session_start_ms: int | None = Field(default=None, ge=0)
    # Our extension: a single-turn case's one transcript (a multi-turn case's are its turns').
    transcript: Transcript = None

    @model_validator(mode="after")
    def _decide_outcome(self) -> Self:
        if self.outcome is None:
            self.outcome = case_outcome(self).value  # type: ignore[assignment]
        if self.kind_outcomes is None:
            if self.turns is not None:
                per_turn = [turn.kind_outcomes or {} for turn in self.turns]
            else:  # a single-turn case: its own fields are its one turn's
                per_turn = [turn_kind_outcomes(self)]  # type: ignore[arg-type]
            self.kind_outcomes = case_kind_outcomes(per_turn)
        return self

    @model_serializer(mode="wrap")
    def _holodeck_shape(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        for key in ("session_start_ms", "transcript"):
            if dumped.get(key) is None:
                dumped.pop(key, None)
        return _without_verdicts(dumped, info)


class ReportSummary(_Wire):
    """Counts test cases, never turns (seed 000 §11).

    ``pass_rate`` is a percentage 0–100 but is not recomputed: HoloDeck rounds it in ways we
    cannot reproduce (a fixture stores 58.0 for 7/12).
    """

    total_tests: int = Field(ge=0)
    passed: int = Field(ge=0)
    failed: int = Field(ge=0)
    pass_rate: float = Field(ge=0, le=100)
    total_duration_ms: int = Field(ge=0)
    metrics_evaluated: dict[str, int] = Field(default_factory=dict)
    average_scores: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _counts_add_up(self) -> Self:
        if self.passed + self.failed != self.total_tests:
            raise ValueError(
                f"passed ({self.passed}) + failed ({self.failed}) must equal "
                f"total_tests ({self.total_tests})"
            )
        return self


class TurnRepetitions(_Wire):
    """One turn of a repeated case over its repetitions."""

    turn_index: int
    passed: int
    failed: int
    pass_rate: float | None
    flaky: bool


class MetricSpread(_Wire):
    """One metric's stored scores over a case's repetitions: their mean and (population)
    standard deviation."""

    metric_name: str
    count: int
    mean: float
    spread: float


class RepetitionSummary(_Wire):
    """One case of a repeated run over its repetitions (``runs.core.verdicts.repeats``): how many
    passed and failed (errored counts as failed), pass@k and pass^k at k = the run's repeats
    (in %; None when fewer were graded), and whether it is flaky (it passed in some and failed
    in others)."""

    test_name: str | None
    case_index: int
    repetitions: int
    passed: int
    failed: int
    pass_rate: float | None
    pass_at_k: float | None
    pass_hat_k: float | None
    flaky: bool
    turns: list[TurnRepetitions] = Field(default_factory=list)
    metrics: list[MetricSpread] = Field(default_factory=list)


class TestReport(_Wire):
    """Everything one run produced: per-case results plus the summary."""

    __test__ = False  # not a pytest test class

    agent_name: str
    agent_config_path: str
    results: list[TestResult]
    summary: ReportSummary
    timestamp: str
    holodeck_version: str
    environment: dict[str, str] = Field(default_factory=dict)
    # Our summary (per-turn metric counts, not graded apart); omitted when unset.
    run_summary: RunSummary | None = None
    # A repeated run's cases over their repetitions; omitted for a run of each case once.
    repetitions: list[RepetitionSummary] | None = None
    # The cases a cancel stopped (they have no result here, and count in ``run_summary``'s
    # ``cases.cancelled``), by name, in order; omitted when none was.
    cancelled_cases: list[str] | None = None
    # What people concluded about its turns (``runs.core.wire.reviews``); omitted when none.
    reviews: list[ReviewWire] | None = None

    @model_serializer(mode="wrap")
    def _holodeck_shape(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        for key in ("run_summary", "repetitions", "cancelled_cases", "reviews"):
            if dumped.get(key) is None:
                dumped.pop(key, None)
        if self.run_summary is not None:
            # HoloDeck's summary calls every case that did not pass "failed"; our counts go
            # beside it in its free ``environment`` block, which HoloDeck readers ignore, so
            # even a HoloDeck-shaped file says what was errored, not graded or cancelled.
            counts = {"cases": self.run_summary.cases, "turns": self.run_summary.turns}
            dumped["environment"] = {
                **dumped.get("environment", {}),
                COUNTS_KEY: json.dumps(
                    {
                        scope: c.model_dump(exclude_computed_fields=True)
                        for scope, c in counts.items()
                    },
                    separators=(",", ":"),
                ),
            }
        return _without_verdicts(dumped, info)

    @model_validator(mode="after")
    def _summary_counts_the_results(self) -> Self:
        if self.summary.total_tests != len(self.results):
            raise ValueError(
                f"summary.total_tests ({self.summary.total_tests}) must equal the number "
                f"of results ({len(self.results)})"
            )
        problems = review_place_problems(
            self.reviews or [], [len(result.turns or [None]) for result in self.results]
        )
        if problems:
            raise ValueError("; ".join(problems))
        return self


class EvalRunMetadata(_Wire):
    """Provenance of a run: the redacted config snapshot, prompt version, CLI, git commit."""

    agent_config: dict[str, Any] = Field(default_factory=dict)
    prompt_version: dict[str, Any] | None = None
    holodeck_version: str
    cli_args: list[str] = Field(default_factory=list)
    git_commit: str | None = None


class EvalRun(_Wire):
    """One persisted ``holodeck test`` invocation: ``{report, metadata}``."""

    report: TestReport
    metadata: EvalRunMetadata
