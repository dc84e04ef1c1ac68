"""LLM-judge metrics (G-Eval and the five RAG metrics) through deepeval's real metric classes.

Each grade builds a fresh deepeval metric, runs ``a_measure`` on one ``LLMTestCase`` and turns
the outcome into a ``Grade``. A judge that raises, times out after every retry, or answers
something deepeval cannot parse gives ``Grade.could_not_grade("could not grade: ...")`` - never
an exception and never a low score, so a broken judge cannot pass or fail a turn by accident.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from graders.judge_models import (
    JudgeConfigError,
    JudgeSpec,
    deepeval_api,
    judge_model_for,
    quiet_deepeval,
)
from graders.result import Grade, JudgeUsage

if TYPE_CHECKING:
    from deepeval.metrics import BaseMetric
    from deepeval.models import DeepEvalBaseLLM
    from deepeval.test_case import LLMTestCase

__all__ = [
    "DEFAULT_THRESHOLD",
    "GEVAL_PARAMS",
    "RAG_METRICS",
    "JudgeCall",
    "JudgeSpec",
    "RagMetricType",
    "grade_geval",
    "grade_rag",
    "judge_model_for",
]

quiet_deepeval()

# deepeval's own default, and HoloDeck's: used when a metric sets no threshold.
DEFAULT_THRESHOLD = 0.5

RagMetricType = Literal[
    "faithfulness",
    "answer_relevancy",
    "contextual_relevancy",
    "contextual_precision",
    "contextual_recall",
]
RAG_METRICS: tuple[str, ...] = get_args(RagMetricType)
# The agent.yaml names of G-Eval's evaluation_params (the values of deepeval's SingleTurnParams).
GEVAL_PARAMS: tuple[str, ...] = (
    "input",
    "actual_output",
    "expected_output",
    "context",
    "retrieval_context",
)
_MAX_ERROR_CHARS = 500


@dataclass
class _Attempts:
    metric: BaseMetric | None
    retry_count: int
    error: str | None


@dataclass(frozen=True)
class JudgeCall:
    """What a judge grades (one turn's texts) and how it is called: the judge, the retries
    after a failed call and the time limit of each call."""

    judge: JudgeSpec | DeepEvalBaseLLM
    input: str
    actual_output: str
    expected_output: str | None = None
    retrieval_context: list[str] | None = None
    retries: int = 0
    timeout_ms: int | None = None

    def test_case(self, context: list[str] | None = None) -> LLMTestCase:
        """deepeval's test case of the turn, with ``context`` for its ``context`` param."""
        retrieval = self.retrieval_context
        test_case: LLMTestCase = deepeval_api().test_case.LLMTestCase(
            input=self.input,
            actual_output=self.actual_output,
            expected_output=self.expected_output,
            retrieval_context=list(retrieval) if retrieval is not None else None,
            context=list(context) if context is not None else None,
        )
        return test_case


async def grade_geval(
    call: JudgeCall,
    *,
    name: str,
    criteria: str | None,
    evaluation_steps: list[str] | None,
    evaluation_params: list[str],
    strict_mode: bool,
    threshold: float | None,
    context: list[str] | None = None,
) -> Grade:
    """Grade one answer with deepeval's ``GEval`` (criteria and/or evaluation steps).

    ``context`` feeds the ``context`` evaluation param; without it the retrieval context does.
    In ``strict_mode`` deepeval scores 0 or 1 and the threshold becomes 1.
    """
    effective_threshold = 1.0 if strict_mode else _threshold(threshold)
    started = _start_clock()
    try:
        model = _resolve_judge(call.judge)
        params = _geval_params(evaluation_params)
    except _JudgeUnavailable as exc:
        return _errored(str(exc), call.judge, effective_threshold, started)

    def build() -> BaseMetric:
        metric: BaseMetric = deepeval_api().metrics.GEval(
            name=name,
            criteria=criteria,
            evaluation_steps=evaluation_steps or None,
            evaluation_params=params,
            model=model,
            threshold=_threshold(threshold),
            strict_mode=strict_mode,
            async_mode=True,
            verbose_mode=False,
        )
        return metric

    test_case = call.test_case(context if context is not None else call.retrieval_context)
    attempts = await _measure(build, test_case, retries=call.retries, timeout_ms=call.timeout_ms)
    return _grade_from(attempts, model, call.judge, effective_threshold, started, _geval_details)


async def grade_rag(
    call: JudgeCall,
    metric_type: RagMetricType,
    *,
    threshold: float | None,
    include_reason: bool = True,
    strict_mode: bool = False,
) -> Grade:
    """Grade one answer with one of deepeval's five RAG metrics."""
    effective_threshold = 1.0 if strict_mode else _threshold(threshold)
    started = _start_clock()
    if metric_type not in RAG_METRICS:
        message = f"unknown RAG metric {metric_type!r} (expected one of {', '.join(RAG_METRICS)})"
        return _errored(message, call.judge, effective_threshold, started)
    try:
        model = _resolve_judge(call.judge)
    except _JudgeUnavailable as exc:
        return _errored(str(exc), call.judge, effective_threshold, started)

    def build() -> BaseMetric:
        metric_class = _rag_metric_class(metric_type)
        metric: BaseMetric = metric_class(
            threshold=_threshold(threshold),
            model=model,
            # "llm": the judge model decides everything; never deepeval's hosted System One.
            eval_mode="llm",
            include_reason=include_reason,
            async_mode=True,
            strict_mode=strict_mode,
            verbose_mode=False,
        )
        return metric

    test_case = call.test_case()
    attempts = await _measure(build, test_case, retries=call.retries, timeout_ms=call.timeout_ms)
    return _grade_from(attempts, model, call.judge, effective_threshold, started, _rag_details)


# --- building blocks -------------------------------------------------------------------------


class _JudgeUnavailable(Exception):
    """The judge or the metric options are unusable before any model call."""


def _start_clock() -> float:
    """Import deepeval (once, ~3 s) before timing, so the first grade's time is the judge's."""
    deepeval_api()

    return time.monotonic()


def _threshold(threshold: float | None) -> float:
    return DEFAULT_THRESHOLD if threshold is None else float(threshold)


def _resolve_judge(judge: JudgeSpec | DeepEvalBaseLLM) -> DeepEvalBaseLLM:
    if not isinstance(judge, JudgeSpec):
        return judge
    try:
        return judge_model_for(judge)
    except JudgeConfigError as exc:
        raise _JudgeUnavailable(str(exc)) from exc
    except Exception as exc:  # deepeval refuses the settings or misses a provider package
        raise _JudgeUnavailable(f"judge {judge.label}: {_describe(exc)}") from exc


def _geval_params(names: list[str]) -> list[Any]:
    if not names:
        raise _JudgeUnavailable("G-Eval needs at least one evaluation_param")
    unknown = [name for name in names if name not in GEVAL_PARAMS]
    if unknown:
        raise _JudgeUnavailable(
            f"unknown G-Eval evaluation_params {unknown} (expected {', '.join(GEVAL_PARAMS)})"
        )
    single_turn_params = deepeval_api().test_case.SingleTurnParams
    return [single_turn_params(name) for name in names]


def _rag_metric_class(metric_type: str) -> Callable[..., BaseMetric]:
    metrics = deepeval_api().metrics
    classes: dict[str, Callable[..., BaseMetric]] = {
        "faithfulness": metrics.FaithfulnessMetric,
        "answer_relevancy": metrics.AnswerRelevancyMetric,
        "contextual_relevancy": metrics.ContextualRelevancyMetric,
        "contextual_precision": metrics.ContextualPrecisionMetric,
        "contextual_recall": metrics.ContextualRecallMetric,
    }
    return classes[metric_type]


async def _measure(
    build: Callable[[], BaseMetric],
    test_case: LLMTestCase,
    *,
    retries: int,
    timeout_ms: int | None,
) -> _Attempts:
    """Run ``a_measure`` up to ``1 + retries`` times; each attempt is bounded by ``timeout_ms``.

    A fresh metric per attempt, so a failed attempt's half-filled state never leaks into the
    next one.
    """
    missing_params_error = deepeval_api().errors.MissingTestCaseParamsError
    retries = max(0, retries)
    timeout = timeout_ms / 1000 if timeout_ms else None
    error = "no attempt made"
    for attempt in range(retries + 1):
        try:
            metric = build()
        except Exception as exc:  # invalid metric options: another attempt builds the same
            return _Attempts(None, attempt, _describe(exc))
        try:
            await asyncio.wait_for(metric.a_measure(test_case, _show_indicator=False), timeout)
        except TimeoutError:
            error = f"TimeoutError: the judge gave no verdict within {timeout_ms} ms"
        except missing_params_error as exc:
            return _Attempts(None, attempt, _describe(exc))
        except Exception as exc:
            error = _describe(exc)
        else:
            return _Attempts(metric, attempt, None)
    attempts_note = f" (after {retries + 1} attempts)" if retries else ""
    return _Attempts(None, retries, error + attempts_note)


def _describe(exc: BaseException) -> str:
    exc = _unwrap_retry_error(exc)
    message = " ".join(str(exc).split()) or repr(exc)
    if len(message) > _MAX_ERROR_CHARS:
        message = message[: _MAX_ERROR_CHARS - 3] + "..."
    return f"{type(exc).__name__}: {message}"


def _unwrap_retry_error(exc: BaseException) -> BaseException:
    """deepeval's tenacity wrapper raises ``RetryError``; the provider's error is inside."""
    last_attempt = getattr(exc, "last_attempt", None)
    inner = last_attempt.exception() if last_attempt is not None else None
    return inner if isinstance(inner, BaseException) else exc


def _model_used(judge: JudgeSpec | DeepEvalBaseLLM) -> str | None:
    if isinstance(judge, JudgeSpec):
        return judge.name
    name = getattr(judge, "name", None)
    return str(name) if name else str(judge.get_model_name())


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _errored(
    message: str,
    judge: JudgeSpec | DeepEvalBaseLLM,
    threshold: float,
    started: float,
    retry_count: int = 0,
) -> Grade:
    return Grade.could_not_grade(
        f"could not grade: {message}",
        threshold=threshold,
        model_used=_model_used(judge),
        retry_count=retry_count,
        evaluation_time_ms=_elapsed_ms(started),
    )


def _grade_from(
    attempts: _Attempts,
    model: DeepEvalBaseLLM,
    judge: JudgeSpec | DeepEvalBaseLLM,
    threshold: float,
    started: float,
    details: Callable[[BaseMetric], dict[str, Any]],
) -> Grade:
    metric = attempts.metric
    if metric is None or attempts.error is not None:
        return _errored(
            attempts.error or "no verdict", judge, threshold, started, attempts.retry_count
        )
    if metric.score is None:
        return _errored(
            "the judge returned no score", judge, threshold, started, attempts.retry_count
        )
    score = float(metric.score)
    passed = metric.is_successful()
    return Grade(
        score=score,
        passed=bool(score >= threshold if passed is None else passed),
        threshold=threshold,
        reason=metric.reason,
        details=details(metric),
        model_used=_model_used(judge),
        retry_count=attempts.retry_count,
        evaluation_time_ms=_elapsed_ms(started),
        judge_usage=_usage(metric, model),
    )


def _usage(metric: BaseMetric, model: DeepEvalBaseLLM) -> JudgeUsage | None:
    """Tokens and cost as deepeval reports them for its native models.

    deepeval attaches token counts to the cost of each request, and only for models in its
    price table; custom judge objects and servers that send no ``usage`` report no tokens, so we
    record nothing rather than zeros (a cost computed from zero tokens means nothing either).
    """
    prompt_tokens = metric.input_tokens or 0
    completion_tokens = metric.output_tokens or 0
    if not prompt_tokens and not completion_tokens:
        return None
    model_data = getattr(model, "model_data", None)
    priced = getattr(model_data, "input_price", None) is not None
    cost = metric.evaluation_cost if priced else None
    return JudgeUsage(
        prompt_tokens=int(prompt_tokens),
        completion_tokens=int(completion_tokens),
        cost_usd=float(cost) if cost is not None else None,
    )


def _geval_details(metric: BaseMetric) -> dict[str, Any]:
    steps = getattr(metric, "evaluation_steps", None) or []
    return {"metric": metric.__name__, "evaluation_steps": [str(step) for step in steps]}


def _rag_details(metric: BaseMetric) -> dict[str, Any]:
    verdicts: list[Any] = list(getattr(metric, "verdicts", None) or [])
    for group in getattr(metric, "verdicts_list", None) or []:  # contextual relevancy
        verdicts.extend(group.verdicts)
    return {
        "metric": metric.__name__,
        "verdicts": [_verdict_json(verdict) for verdict in verdicts],
    }


def _verdict_json(verdict: Any) -> dict[str, Any]:
    data = verdict.model_dump(mode="json") if hasattr(verdict, "model_dump") else {}
    return {key: value for key, value in data.items() if value is not None}
