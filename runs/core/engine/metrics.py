"""Metric dispatch: one metric config + one turn -> one MetricResult.

Graders take plain values; this module maps spec metric configs onto them, applies the skip
rules (no ground truth, no retrieval context) and resolves the judge model
(metric > evaluations > the agent's model).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graders.code import GraderContext, GraderFn, run_code_grader, run_code_grader_sync
from graders.deterministic import grade_equality, grade_numeric
from graders.judges import JudgeCall, JudgeSpec, grade_geval, grade_rag
from graders.result import Grade, error_text
from runs.core.verdicts.kinds import JUDGE_KINDS
from runs.core.wire.models import MetricResult, TokenUsage

if TYPE_CHECKING:
    from runs.core.agentconfig.agent import AgentConfig
    from runs.core.agentconfig.loader import LoadedAgent
    from runs.core.agentconfig.metrics import CodeMetric, GEvalMetric, Metric, RAGMetric
    from runs.core.agentconfig.model import ModelConfig
    from runs.core.agentconfig.test_cases import TestCase, Turn

# RAG metrics whose deepeval implementation compares against the expected output.
RAG_NEEDS_GROUND_TRUTH = {"contextual_precision", "contextual_recall"}
JUDGE_PROVIDERS = {"openai", "azure_openai", "anthropic", "ollama"}


# The options of each standard metric its grader takes (all take threshold and response_path).
STANDARD_OPTIONS: dict[str, tuple[str, ...]] = {
    "equality": ("case_insensitive", "strip_whitespace", "strip_punctuation"),
    "numeric": (
        "absolute_tolerance",
        "relative_tolerance",
        "accept_percent",
        "accept_thousands_separators",
    ),
    "bleu": (),
    "rouge": (),
    "meteor": (),
}


def _standard_grader(name: str) -> Callable[..., Grade]:
    """The grader of a standard metric (the NLP ones import their libraries on first use)."""
    if name == "equality":
        return grade_equality
    if name == "numeric":
        return grade_numeric
    # lazy: graders.nlp loads nltk, rouge_score and sacrebleu (~2.5 s); most runs use none
    from graders import nlp

    return {"bleu": nlp.grade_bleu, "rouge": nlp.grade_rouge, "meteor": nlp.grade_meteor}[name]


@dataclass(frozen=True)
class TurnFacts:
    """What a metric may look at for one turn (the public grading API takes these too)."""

    input: str
    response: str = ""
    ground_truth: str | None = None
    retrieval_context: list[str] | None = None
    # This turn's tool calls: wire ToolInvocation dumps ({name, args, result, error, ...}).
    tool_invocations: list[dict[str, Any]] = field(default_factory=list)
    turn_config: dict[str, Any] | None = None
    case_name: str | None = None
    turn_index: int = 0


def skip_reason(metric: Metric, facts: TurnFacts) -> str | None:
    """Why a metric does not run on this turn (None: it runs). Skipped metrics are not recorded."""
    kind = metric.kind
    if kind == "standard" and facts.ground_truth is None:
        return "no ground truth"
    if kind == "rag":
        if not facts.retrieval_context:
            return "no retrieval context"
        if metric.metric_type in RAG_NEEDS_GROUND_TRUTH and facts.ground_truth is None:  # type: ignore[union-attr]
            return "no ground truth"
    if kind == "geval":
        params = metric.evaluation_params  # type: ignore[union-attr]
        if "expected_output" in params and facts.ground_truth is None:
            return "no ground truth"
        if {"retrieval_context", "context"} & set(params) and not facts.retrieval_context:
            return "no retrieval context"
    return None


class MetricRunner:
    """Grades turns for one agent. ``judge`` overrides every LLM judge (tests, offline demos)."""

    def __init__(self, agent: LoadedAgent | None, *, judge: Any = None) -> None:
        self.agent = agent
        self.judge_override = judge

    async def grade(
        self, metric: Metric, facts: TurnFacts
    ) -> tuple[MetricResult, dict[str, Any] | None]:
        """The metric's result and the grader's ``details`` (code graders), if any."""
        started = time.perf_counter()
        try:
            grade = await self._dispatch(metric, facts)
        except Exception as exc:  # a grader bug must not take the turn down with it
            grade = Grade.could_not_grade(error_text(exc), threshold=metric.threshold)
        return _result(metric, grade, started)

    def grade_sync(
        self, metric: Metric, facts: TurnFacts
    ) -> tuple[MetricResult, dict[str, Any] | None]:
        """``grade`` without an event loop, for deterministic, NLP and code metrics (the same
        results); ValueError for an LLM-judge metric."""
        kind = metric.kind
        if kind in JUDGE_KINDS:
            raise ValueError(f"metric {metric.metric_name!r} needs an LLM judge: await grade()")
        started = time.perf_counter()
        try:
            if kind == "standard":
                grade = self._standard(metric, facts)
            else:
                fn, context, options = _code_call(metric, facts)  # type: ignore[arg-type]
                grade = run_code_grader_sync(fn, context, **options)
        except Exception as exc:  # a grader bug must not take the turn down with it
            grade = Grade.could_not_grade(error_text(exc), threshold=metric.threshold)
        return _result(metric, grade, started)

    async def _dispatch(self, metric: Metric, facts: TurnFacts) -> Grade:
        kind = metric.kind
        if kind == "standard":
            return self._standard(metric, facts)
        if kind == "code":
            fn, context, options = _code_call(metric, facts)  # type: ignore[arg-type]
            return await run_code_grader(fn, context, **options)
        call = self._judge_call(metric, facts)  # an LLM judge grades the rest
        if isinstance(call, Grade):
            return call
        if kind == "geval":
            return await _geval(metric, call)  # type: ignore[arg-type]
        return await _rag(metric, call)  # type: ignore[arg-type]

    def _standard(self, metric: Any, facts: TurnFacts) -> Grade:
        name = metric.metric
        options = {option: getattr(metric, option) for option in STANDARD_OPTIONS[name]}
        return _standard_grader(name)(
            facts.response,
            facts.ground_truth or "",
            threshold=metric.threshold,
            response_path=metric.response_path,
            **options,
        )

    def _judge(self, metric: Metric) -> Any:
        """metric.model > evaluations.model > the agent's model."""
        if self.judge_override is not None:
            return self.judge_override
        model = judge_model(self.agent, metric)
        if model.provider not in JUDGE_PROVIDERS:
            raise JudgeUnavailable(
                f"could not grade: provider {model.provider!r} cannot judge; set a judge "
                "model (openai, azure_openai, anthropic or ollama) on the metric or evaluations"
            )
        return JudgeSpec(
            provider=model.provider,  # type: ignore[arg-type]  # checked just above
            name=model.name,
            endpoint=model.endpoint,
            api_key=model.api_key,
            api_version=model.api_version,
            temperature=model.temperature,
        )

    def _judge_call(self, metric: Metric, facts: TurnFacts) -> JudgeCall | Grade:
        """How the metric's judge grades this turn, or "could not grade" without a judge."""
        try:
            judge = self._judge(metric)
        except JudgeUnavailable as exc:
            return Grade.could_not_grade(str(exc), threshold=metric.threshold)
        return JudgeCall(
            judge=judge,
            input=facts.input,
            actual_output=facts.response,
            expected_output=facts.ground_truth,
            retrieval_context=facts.retrieval_context,
            retries=metric.retry_on_failure or 0,
            timeout_ms=self._judge_timeout_ms(metric),
        )

    def _judge_timeout_ms(self, metric: Metric) -> int:
        """A judge call is bounded by the metric's timeout_ms, else by the agent's llm_timeout."""
        if metric.timeout_ms:
            return metric.timeout_ms
        llm_timeout = self.agent.config.execution.llm_timeout if self.agent else 60.0
        return int(llm_timeout * 1000)


async def _geval(metric: GEvalMetric, call: JudgeCall) -> Grade:
    return await grade_geval(
        call,
        name=metric.name,
        criteria=metric.criteria,
        evaluation_steps=metric.evaluation_steps,
        evaluation_params=list(metric.evaluation_params),
        strict_mode=metric.strict_mode,
        threshold=metric.threshold,
    )


async def _rag(metric: RAGMetric, call: JudgeCall) -> Grade:
    return await grade_rag(call, metric.metric_type, threshold=metric.threshold)


class JudgeUnavailable(Exception):
    pass


def _result(
    metric: Metric, grade: Grade, started: float
) -> tuple[MetricResult, dict[str, Any] | None]:
    elapsed = int((time.perf_counter() - started) * 1000)
    return to_metric_result(metric, grade, elapsed), grade.details


def _code_call(
    metric: CodeMetric, facts: TurnFacts
) -> tuple[GraderFn, GraderContext, dict[str, Any]]:
    """The arguments of ``run_code_grader`` (or its sync twin) for one code metric."""
    context = GraderContext(
        turn_input=facts.input,
        agent_response=facts.response,
        ground_truth=facts.ground_truth,
        tool_invocations=facts.tool_invocations,
        retrieval_context=facts.retrieval_context,
        turn_index=facts.turn_index,
        test_case_name=facts.case_name,
        turn_config=facts.turn_config or {},
    )
    options = {
        "name": metric.metric_name,
        "threshold": metric.threshold,
        "timeout_s": metric.timeout_ms / 1000 if metric.timeout_ms else None,
    }
    return metric.callable, context, options


# Judges that cannot work without a key (ollama runs locally without one).
KEYED_PROVIDERS = {"openai", "azure_openai", "anthropic"}


def judge_model(agent: LoadedAgent | None, metric: Metric) -> ModelConfig:
    """The judge of an LLM metric: metric.model > evaluations.model > the agent's model."""
    if agent is None:
        if metric.model is None:
            raise JudgeUnavailable(
                f"could not grade: metric {metric.metric_name!r} has no judge model (set its "
                "model, or grade with the agent's MetricRunner)"
            )
        return metric.model
    evaluations = agent.config.evaluations
    return metric.model or (evaluations.model if evaluations else None) or agent.config.model


def judge_warnings(agent: LoadedAgent) -> list[str]:
    """What will make LLM metrics "could not grade" before a run starts: a judge whose provider
    cannot judge, or that needs an API key and has none. One line per judge."""
    metrics = list(agent.config.evaluations.metrics if agent.config.evaluations else [])
    for case in agent.config.test_cases:
        metrics += case.evaluations or []
        for turn in case.turns or []:
            metrics += turn.evaluations or []
    warnings: dict[str, str] = {}
    for metric in metrics:
        if metric.kind not in JUDGE_KINDS or not metric.enabled:
            continue
        model = judge_model(agent, metric)
        label = f"{model.provider}/{model.name}"
        if model.provider not in JUDGE_PROVIDERS:
            warnings[label] = (
                f"LLM metrics judged by {label} will not be graded: provider "
                f"{model.provider!r} cannot judge (set evaluations.model)"
            )
        elif model.provider in KEYED_PROVIDERS and not model.api_key:
            warnings[label] = (
                f"LLM metrics judged by {label} will not be graded: the judge has no api_key "
                "(set it, e.g. api_key: ${OPENAI_API_KEY})"
            )
    return list(warnings.values())


def to_metric_result(metric: Metric, grade: Grade, elapsed_ms: int) -> MetricResult:
    """The one place a grader's ``Grade`` becomes the report's ``MetricResult``."""
    usage = grade.judge_usage
    judge_usage = None
    if usage is not None and (usage.prompt_tokens or usage.completion_tokens):
        judge_usage = TokenUsage.counted(usage.prompt_tokens, usage.completion_tokens)
    return MetricResult(
        metric_name=metric.metric_name,
        kind=metric.kind,
        score=grade.score,
        threshold=grade.threshold if grade.threshold is not None else metric.threshold,
        passed=grade.passed and grade.error is None,
        scale=getattr(metric, "scale", None),
        error=grade.error,
        retry_count=grade.retry_count,
        # The time the turn waited for it (a grader's own clock leaves out, e.g., a first
        # judge's import of deepeval), so a turn's grading adds up to what it took.
        evaluation_time_ms=max(grade.evaluation_time_ms, elapsed_ms),
        model_used=grade.model_used,
        reasoning=grade.reason,
        judge_usage=judge_usage,
        judge_cost_usd=usage.cost_usd if usage else None,
    )


def metrics_for(
    turn_metrics: Sequence[Metric] | None,
    case_metrics: Sequence[Metric] | None,
    agent_metrics: Sequence[Metric] | None,
) -> list[Metric]:
    """The first non-empty list of turn > case > agent (replaced, not merged), enabled only."""
    for candidate in (turn_metrics, case_metrics, agent_metrics):
        if candidate:
            return [metric for metric in candidate if metric.enabled]
    return []


def turn_metrics(config: AgentConfig, case: TestCase, turn: Turn) -> list[Metric]:
    """The metrics that grade ``turn`` of ``case``: turn > case (multi-turn) > agent."""
    evaluations = config.evaluations
    return metrics_for(
        turn.evaluations,
        case.evaluations if case.is_multi_turn else None,
        evaluations.metrics if evaluations else None,
    )
