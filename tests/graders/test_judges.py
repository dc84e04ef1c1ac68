"""LLM judges through deepeval's real metric code, offline.

Two judges drive deepeval: ``ScriptedJudge`` (a ``DeepEvalBaseLLM`` answering each schema
deepeval asks for) and deepeval's own ``OpenAIModel`` talking real HTTP to a fake
OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from graders.judge_models import JudgeConfigError, JudgeSpec, judge_model_for
from graders.judges import DEFAULT_THRESHOLD, JudgeCall, grade_geval, grade_rag
from graders.result import Grade
from tests.graders.fake_openai_judge import (
    COMPLETION_TOKENS,
    PROMPT_TOKENS,
    FakeOpenAIJudge,
    Reply,
    json_reply,
    metric_routes,
    running_fake_openai_judge,
    scored_reply,
)
from tests.graders.scripted_judge import ScriptedJudge

QUESTION = "What is the capital of France and how many people live there?"
ANSWER = "Paris is the capital of France. About two million people live in Paris."
CONTEXT = ["Paris is the capital of France.", "Bananas are rich in potassium."]

STEPS = {"steps": ["Check the answer names the capital.", "Check the population figure."]}
# A judge this slow never answers within a test: only a timeout can end its grade, so the timeout
# tests assert what happened, not how long a busy machine took.
JUDGE_DELAY_S = 30.0


def geval(judge: Any, **overrides: Any) -> Grade:
    options: dict[str, Any] = {
        "name": "Correctness",
        "criteria": "Is the answer factually correct?",
        "evaluation_steps": None,
        "evaluation_params": ["input", "actual_output"],
        "strict_mode": False,
        "threshold": None,
        "judge": judge,
        "input": QUESTION,
        "actual_output": ANSWER,
        "expected_output": None,
        "retrieval_context": None,
    }
    options.update(overrides)
    call, rest = judge_call(options)
    return asyncio.run(grade_geval(call, **rest))


def rag(metric_type: Any, judge: Any, **overrides: Any) -> Grade:
    options: dict[str, Any] = {
        "threshold": None,
        "judge": judge,
        "input": QUESTION,
        "actual_output": ANSWER,
        "expected_output": "Paris; about 2.1 million inhabitants.",
        "retrieval_context": CONTEXT,
    }
    options.update(overrides)
    call, rest = judge_call(options)
    return asyncio.run(grade_rag(call, metric_type, **rest))


def judge_call(options: dict[str, Any]) -> tuple[JudgeCall, dict[str, Any]]:
    """The options a JudgeCall holds, as one, and the grader's own options."""
    names = {field.name for field in dataclasses.fields(JudgeCall)}
    call = JudgeCall(**{k: v for k, v in options.items() if k in names})
    return call, {k: v for k, v in options.items() if k not in names}


# --- G-Eval with a scripted judge ------------------------------------------------------------


def test_geval_scores_with_the_steps_and_score_the_judge_gives(
    capsys: pytest.CaptureFixture[str],
) -> None:
    judge = ScriptedJudge(
        {"g_eval.Steps": STEPS, "g_eval.ReasonScore": {"reason": "Right city.", "score": 7}}
    )

    grade = geval(judge)

    assert grade.error is None
    assert grade.score == pytest.approx(0.7)  # deepeval maps the 0..10 rubric onto 0..1
    assert grade.passed is True
    assert grade.threshold == DEFAULT_THRESHOLD
    assert grade.reason == "Right city."
    assert grade.model_used == "scripted-judge"
    assert grade.details == {"metric": "Correctness [GEval]", "evaluation_steps": STEPS["steps"]}
    assert grade.judge_usage is None  # a custom judge reports no tokens: record none, not zeros
    assert judge.asked == ["g_eval.Steps", "g_eval.ReasonScore"]
    score_prompt = judge.calls[1][1]
    assert ANSWER in score_prompt and "Check the population figure." in score_prompt
    assert capsys.readouterr().out == ""  # no spinners or tables on stdout


def test_geval_fails_a_score_below_the_threshold() -> None:
    judge = ScriptedJudge({"g_eval.ReasonScore": {"reason": "Wrong population.", "score": 6}})

    grade = geval(judge, evaluation_steps=["Check the population."], threshold=0.7)

    assert grade.score == pytest.approx(0.6)
    assert grade.passed is False
    assert grade.error is None  # a low score is a verdict, not an error
    assert grade.threshold == 0.7
    assert judge.asked == ["g_eval.ReasonScore"]  # given steps are not regenerated


def test_geval_strict_mode_scores_zero_or_one_against_threshold_one() -> None:
    judge = ScriptedJudge(
        {"g_eval.Steps": STEPS, "g_eval.ReasonScore": {"reason": "ok", "score": 1}}
    )

    grade = geval(judge, strict_mode=True, threshold=0.2)

    assert (grade.score, grade.passed, grade.threshold) == (1.0, True, 1.0)


def test_geval_puts_the_requested_evaluation_params_in_the_prompt() -> None:
    judge = ScriptedJudge(
        {"g_eval.Steps": STEPS, "g_eval.ReasonScore": {"reason": "ok", "score": 9}}
    )

    geval(
        judge,
        evaluation_params=["input", "actual_output", "expected_output", "retrieval_context"],
        expected_output="Paris, 2.1 million",
        retrieval_context=["Census 2023: 2.1 million"],
    )

    score_prompt = judge.calls[1][1]
    assert "Paris, 2.1 million" in score_prompt
    assert "Census 2023: 2.1 million" in score_prompt


def test_geval_with_an_unknown_evaluation_param_could_not_grade() -> None:
    judge = ScriptedJudge({})

    grade = geval(judge, evaluation_params=["actual_output", "mood"])

    assert grade.errored and grade.error is not None
    assert grade.error.startswith("could not grade: unknown G-Eval evaluation_params ['mood']")
    assert judge.calls == []


def test_geval_missing_a_required_param_could_not_grade_without_retrying() -> None:
    judge = ScriptedJudge({"g_eval.Steps": STEPS})

    grade = geval(judge, evaluation_params=["actual_output", "expected_output"], retries=2)

    assert grade.error is not None
    assert grade.error.startswith("could not grade: MissingTestCaseParamsError")
    assert grade.retry_count == 0
    assert judge.calls == []


def test_an_empty_response_never_passes_silently() -> None:
    judge = ScriptedJudge({"g_eval.ReasonScore": {"reason": "perfect", "score": 10}})

    grade = geval(judge, evaluation_steps=["Check it."], actual_output="")

    # deepeval refuses an empty actual_output; an errored grade fails the turn visibly.
    assert grade.passed is False
    assert grade.error is not None and "'actual_output' cannot be empty" in grade.error
    assert judge.calls == []


# --- the five RAG metrics with a scripted judge ----------------------------------------------


def relevancy_verdicts(prompt: str) -> dict[str, Any]:
    """One verdict per retrieval node; deepeval asks once per node."""
    relevant = "potassium" not in prompt  # the banana node is the irrelevant one
    return {
        "verdicts": [
            {
                "statement": "Paris is the capital of France." if relevant else "Bananas...",
                "verdict": "yes" if relevant else "no",
                "reason": None if relevant else "Bananas are off topic.",
            }
        ]
    }


RAG_CASES: dict[str, tuple[dict[str, Any], float, bool, list[str]]] = {
    # metric: (scripted answers, expected score, passed at 0.5, schemas asked in order)
    "faithfulness": (
        {
            "faithfulness.Truths": {"truths": ["Paris is the capital of France."]},
            "faithfulness.Claims": {"claims": ["Paris is the capital.", "Two million live there."]},
            "faithfulness.Verdicts": {
                "verdicts": [
                    {"verdict": "yes"},
                    {"verdict": "no", "reason": "No figure in context."},
                ]
            },
            "faithfulness.FaithfulnessScoreReason": {"reason": "The population is unsupported."},
        },
        0.5,
        True,
        [
            "faithfulness.Truths",
            "faithfulness.Claims",
            "faithfulness.Verdicts",
            "faithfulness.FaithfulnessScoreReason",
        ],
    ),
    "answer_relevancy": (
        {
            "answer_relevancy.Statements": {"statements": ["Paris is the capital.", "2M", "Hi!"]},
            "answer_relevancy.Verdicts": {
                "verdicts": [
                    {"verdict": "yes"},
                    {"verdict": "yes"},
                    {"verdict": "no", "reason": "chat"},
                ]
            },
            "answer_relevancy.AnswerRelevancyScoreReason": {"reason": "Mostly on topic."},
        },
        2 / 3,
        True,
        [
            "answer_relevancy.Statements",
            "answer_relevancy.Verdicts",
            "answer_relevancy.AnswerRelevancyScoreReason",
        ],
    ),
    "contextual_relevancy": (
        {
            "contextual_relevancy.ContextualRelevancyVerdicts": relevancy_verdicts,
            "contextual_relevancy.ContextualRelevancyScoreReason": {"reason": "Half is noise."},
        },
        0.5,
        True,
        [
            "contextual_relevancy.ContextualRelevancyVerdicts",
            "contextual_relevancy.ContextualRelevancyVerdicts",
            "contextual_relevancy.ContextualRelevancyScoreReason",
        ],
    ),
    "contextual_precision": (
        {
            "contextual_precision.Verdicts": {
                "verdicts": [
                    {"verdict": "no", "reason": "off topic"},
                    {"verdict": "yes", "reason": "names Paris"},
                ]
            },
            "contextual_precision.ContextualPrecisionScoreReason": {"reason": "Noise ranks first."},
        },
        0.5,  # one relevant node at rank 2: precision@2 = 1/2
        True,
        ["contextual_precision.Verdicts", "contextual_precision.ContextualPrecisionScoreReason"],
    ),
    "contextual_recall": (
        {
            "contextual_recall.Verdicts": {
                "verdicts": [
                    {"verdict": "yes", "reason": "node 1"},
                    {"verdict": "no", "reason": "no population"},
                    {"verdict": "no", "reason": "no date"},
                ]
            },
            "contextual_recall.ContextualRecallScoreReason": {"reason": "Population missing."},
        },
        1 / 3,
        False,
        ["contextual_recall.Verdicts", "contextual_recall.ContextualRecallScoreReason"],
    ),
}


@pytest.mark.parametrize("metric_type", list(RAG_CASES))
def test_each_rag_metric_scores_the_scripted_verdicts(metric_type: str) -> None:
    answers, expected_score, expected_pass, asked = RAG_CASES[metric_type]
    judge = ScriptedJudge(answers, name="rag-judge")

    grade = rag(metric_type, judge)

    assert grade.error is None
    assert grade.score == pytest.approx(expected_score)
    assert grade.passed is expected_pass
    assert grade.threshold == DEFAULT_THRESHOLD
    reason_answer = next(value for key, value in answers.items() if key.endswith("ScoreReason"))
    assert grade.reason == reason_answer["reason"]  # type: ignore[index]
    assert grade.model_used == "rag-judge"
    assert judge.asked == asked


def test_rag_verdicts_are_recorded_in_the_grade_details() -> None:
    answers = RAG_CASES["contextual_relevancy"][0]

    grade = rag("contextual_relevancy", ScriptedJudge(answers))

    assert grade.details is not None
    assert grade.details["metric"] == "Contextual Relevancy"
    assert [v["verdict"] for v in grade.details["verdicts"]] == ["yes", "no"]


def test_rag_threshold_decides_pass_and_fail() -> None:
    answers = RAG_CASES["faithfulness"][0]

    grade = rag("faithfulness", ScriptedJudge(answers), threshold=0.75)

    assert (grade.score, grade.passed, grade.threshold) == (0.5, False, 0.75)


def test_rag_without_reason_asks_no_reason() -> None:
    answers = RAG_CASES["contextual_recall"][0]
    judge = ScriptedJudge(answers)

    grade = rag("contextual_recall", judge, include_reason=False)

    assert grade.reason is None
    assert judge.asked == ["contextual_recall.Verdicts"]


def test_an_unknown_rag_metric_could_not_grade() -> None:
    grade = rag("toxicity", ScriptedJudge({}))

    assert grade.error is not None and grade.error.startswith("could not grade: unknown RAG")


def test_faithfulness_without_retrieval_context_could_not_grade() -> None:
    judge = ScriptedJudge(RAG_CASES["faithfulness"][0])

    grade = rag("faithfulness", judge, retrieval_context=None, retries=1)

    assert grade.error is not None and "MissingTestCaseParamsError" in grade.error
    assert judge.calls == []


# --- invalid verdicts ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps_answer", "error_start"),
    [
        ("The steps look fine to me.", "could not grade: ValueError: Evaluation LLM outputted"),
        ('{"stepz": ["a"]}', "could not grade: KeyError: 'steps'"),
    ],
    ids=["not-json", "wrong-schema"],
)
def test_a_judge_answering_an_invalid_verdict_could_not_grade(
    steps_answer: str, error_start: str
) -> None:
    judge = ScriptedJudge({"g_eval.Steps": steps_answer})

    grade = geval(judge)

    assert grade.score is None
    assert grade.passed is False
    assert grade.error is not None and grade.error.startswith(error_start)
    assert grade.model_used == "scripted-judge"


def test_a_rag_judge_answering_invalid_json_could_not_grade() -> None:
    answers = dict(RAG_CASES["faithfulness"][0])
    answers["faithfulness.Verdicts"] = "yes, no"

    grade = rag("faithfulness", ScriptedJudge(answers))

    assert grade.error is not None
    assert grade.error.startswith("could not grade: ValueError: Evaluation LLM outputted")


# --- timeouts and retries --------------------------------------------------------------------


def test_a_slow_judge_times_out_on_every_attempt_and_counts_the_retries() -> None:
    judge = ScriptedJudge({"g_eval.Steps": STEPS}, delay_s=JUDGE_DELAY_S)

    started = time.monotonic()
    grade = geval(judge, retries=2, timeout_ms=200)

    # Bounded by the timeouts, not by the judge (however busy the machine is).
    assert time.monotonic() - started < JUDGE_DELAY_S
    assert grade.error == (
        "could not grade: TimeoutError: the judge gave no verdict within 200 ms (after 3 attempts)"
    )
    assert grade.retry_count == 2
    assert judge.asked == ["g_eval.Steps"] * 3


def test_a_judge_that_fails_once_is_retried_and_the_retry_recorded() -> None:
    judge = ScriptedJudge(
        {"g_eval.Steps": STEPS, "g_eval.ReasonScore": {"reason": "fine", "score": 8}},
        failures_before_success=1,
    )

    grade = geval(judge, retries=2)

    assert grade.error is None
    assert grade.score == pytest.approx(0.8)
    assert grade.retry_count == 1


def test_a_judge_that_keeps_failing_reports_the_last_error_after_all_retries() -> None:
    judge = ScriptedJudge(RAG_CASES["contextual_recall"][0], failures_before_success=5)

    grade = rag("contextual_recall", judge, retries=1)

    assert grade.error == (
        "could not grade: ConnectionError: scripted judge: connection reset (after 2 attempts)"
    )
    assert grade.retry_count == 1
    assert len(judge.calls) == 2


def test_without_retries_a_failing_judge_is_called_once() -> None:
    judge = ScriptedJudge({}, failures_before_success=1)

    grade = geval(judge)

    assert grade.error == "could not grade: ConnectionError: scripted judge: connection reset"
    assert grade.retry_count == 0
    assert len(judge.calls) == 1


# --- judge specs -----------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "azure_openai", "anthropic"])
def test_a_judge_without_api_key_could_not_grade_with_a_clear_error(
    provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A key in the worker's environment must not be picked up silently.
    for name in ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(name, "sk-from-the-environment")
    spec = JudgeSpec(provider=provider, name="gpt-4o-mini", endpoint="http://127.0.0.1:9/v1")

    geval_grade = geval(spec)
    rag_grade = rag("faithfulness", spec)

    expected = f"could not grade: no API key for judge {provider}/gpt-4o-mini"
    assert geval_grade.error == expected
    assert rag_grade.error == expected
    assert geval_grade.model_used == "gpt-4o-mini"
    with pytest.raises(JudgeConfigError, match="no API key"):
        judge_model_for(spec)


def test_an_azure_judge_needs_an_api_version() -> None:
    spec = JudgeSpec(provider="azure_openai", name="gpt-4o", endpoint="https://x", api_key="k")

    grade = geval(spec)

    assert grade.error == "could not grade: no api_version for judge azure_openai/gpt-4o"


def test_a_judge_spec_never_shows_its_api_key() -> None:
    spec = JudgeSpec(provider="openai", name="gpt-4o-mini", api_key="sk-secret")

    assert "sk-secret" not in repr(spec)
    assert spec.label == "openai/gpt-4o-mini"


def test_judge_model_for_builds_deepevals_native_models_with_explicit_settings() -> None:
    from deepeval.models import AzureOpenAIModel, LocalModel, OllamaModel, OpenAIModel

    openai = judge_model_for(
        JudgeSpec(provider="openai", name="gpt-4o-mini", endpoint="http://h:1/v1/", api_key="k")
    )
    azure = judge_model_for(
        JudgeSpec(
            provider="azure_openai",
            name="gpt-4o",
            endpoint="https://res.openai.azure.com",
            api_key="k",
            api_version="2024-10-21",
            temperature=0.3,
        )
    )
    ollama = judge_model_for(JudgeSpec(provider="ollama", name="llama3.1"))

    assert isinstance(openai, OpenAIModel)
    assert (openai.name, openai.base_url, openai.temperature) == (
        "gpt-4o-mini",
        "http://h:1/v1",
        0.0,
    )
    assert isinstance(azure, AzureOpenAIModel)
    assert (azure.deployment_name, azure.api_version, azure.temperature) == (
        "gpt-4o",
        "2024-10-21",
        0.3,
    )
    assert isinstance(ollama, OllamaModel | LocalModel)
    assert "localhost:11434" in str(ollama.base_url)


@pytest.mark.parametrize(
    "spec",
    [
        # Whether or not the anthropic package is installed, nothing listens on port 9.
        JudgeSpec(
            provider="anthropic",
            name="claude-sonnet-4-5",
            endpoint="http://127.0.0.1:9",
            api_key="k",
        ),
        JudgeSpec(provider="ollama", name="llama3.1", endpoint="http://127.0.0.1:9"),
    ],
    ids=["anthropic", "ollama"],
)
def test_an_unreachable_judge_could_not_grade_naming_the_real_error(spec: JudgeSpec) -> None:
    grade = geval(spec, timeout_ms=5000)

    assert grade.error is not None and grade.error.startswith("could not grade: ")
    assert "RetryError" not in grade.error  # deepeval's retry wrapper is unwrapped


def test_importing_the_judges_loads_no_deepeval_and_switches_its_telemetry_off() -> None:
    code = (
        "import os, sys, graders.judges; "
        "print('deepeval' in sys.modules, os.environ['DEEPEVAL_TELEMETRY_OPT_OUT'], "
        "os.environ['DEEPEVAL_DISABLE_DOTENV'])"
    )
    env = {"PATH": "/usr/bin:/bin"}

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )

    assert result.stdout.split() == ["False", "YES", "1"]


# --- deepeval's OpenAIModel over real HTTP ---------------------------------------------------


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIJudge]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with running_fake_openai_judge() as fake:
        yield fake


def http_judge(fake: FakeOpenAIJudge) -> JudgeSpec:
    return JudgeSpec(provider="openai", name="gpt-4o-mini", endpoint=fake.base_url, api_key="test")


@pytest.fixture(scope="module")
def warm_http_judge() -> None:
    """One full grade over HTTP of every judge metric first: a metric's first grade in a process
    spends seconds importing the OpenAI client's and the metric's modules inside the timed
    attempt, which would make a short ``timeout_ms`` expire before any request is sent (and the
    test prove nothing)."""
    with running_fake_openai_judge() as fake:
        for metric in JUDGE_METRICS:
            fake.routes = metric_routes(metric)
            assert judged(metric, http_judge(fake)).error is None, metric


def test_geval_over_http_weights_the_score_by_the_judges_logprobs(
    fake_openai: FakeOpenAIJudge,
) -> None:
    fake_openai.routes = {
        "Steps": json_reply(STEPS),
        "logprobs": scored_reply("Right city, close figure.", 8, {8: 0.6, 9: 0.4}),
    }

    grade = geval(http_judge(fake_openai))

    assert grade.error is None
    assert grade.score == pytest.approx(0.84)  # (8 * 0.6 + 9 * 0.4) / 10
    assert grade.passed is True
    assert grade.reason == "Right city, close figure."
    assert grade.model_used == "gpt-4o-mini"
    assert fake_openai.routes_called() == ["Steps", "logprobs"]
    steps_request, score_request = fake_openai.requests
    assert steps_request["model"] == "gpt-4o-mini"
    assert steps_request["response_format"]["type"] == "json_schema"
    assert (score_request["logprobs"], score_request["top_logprobs"]) == (True, 20)
    assert ANSWER in json.dumps(score_request["messages"])
    assert fake_openai.headers[0]["authorization"] == "Bearer test"
    assert grade.judge_usage is not None
    assert grade.judge_usage.prompt_tokens == 2 * PROMPT_TOKENS
    assert grade.judge_usage.completion_tokens == 2 * COMPLETION_TOKENS
    # gpt-4o-mini's price in deepeval's table: $0.15 / $0.60 per million tokens.
    expected_cost = 2 * (PROMPT_TOKENS * 0.15 + COMPLETION_TOKENS * 0.60) / 1e6
    assert grade.judge_usage.cost_usd == pytest.approx(expected_cost)


def test_faithfulness_over_http_asks_truths_claims_verdicts_and_reason(
    fake_openai: FakeOpenAIJudge,
) -> None:
    fake_openai.routes = {
        "Truths": json_reply({"truths": ["Paris is the capital of France."]}),
        "Claims": json_reply({"claims": ["Paris is the capital.", "Two million live there."]}),
        "Verdicts": json_reply(
            {"verdicts": [{"verdict": "yes", "reason": None}, {"verdict": "no", "reason": "?"}]}
        ),
        "FaithfulnessScoreReason": json_reply({"reason": "The population is unsupported."}),
    }

    grade = rag("faithfulness", http_judge(fake_openai), threshold=0.6)

    assert (grade.score, grade.passed, grade.error) == (0.5, False, None)
    assert grade.reason == "The population is unsupported."
    assert sorted(fake_openai.routes_called()) == sorted(
        ["Truths", "Claims", "Verdicts", "FaithfulnessScoreReason"]
    )
    assert grade.judge_usage is not None
    assert grade.judge_usage.prompt_tokens == 4 * PROMPT_TOKENS
    assert grade.judge_usage.cost_usd is not None and grade.judge_usage.cost_usd > 0


def test_an_http_judge_answering_invalid_json_could_not_grade(
    fake_openai: FakeOpenAIJudge,
) -> None:
    fake_openai.routes = {"Steps": "Sure! Here are my steps: be accurate."}

    grade = geval(http_judge(fake_openai))

    assert grade.score is None
    assert grade.error is not None and grade.error.startswith("could not grade: ")
    assert fake_openai.routes_called() == ["Steps"]


@pytest.mark.usefixtures("warm_http_judge")
def test_an_http_judge_slower_than_the_timeout_is_called_again_on_retry(
    fake_openai: FakeOpenAIJudge,
) -> None:
    fake_openai.routes = {"Steps": Reply(json.dumps(STEPS), delay_s=JUDGE_DELAY_S)}

    grade = geval(http_judge(fake_openai), retries=1, timeout_ms=1000)

    assert grade.error is not None and "TimeoutError" in grade.error
    assert grade.retry_count == 1
    assert fake_openai.routes_called() == ["Steps", "Steps"]


def test_scored_reply_logprobs_are_real_probabilities() -> None:
    reply = scored_reply("r", 8, {8: 0.6, 9: 0.4})

    assert reply.logprobs is not None
    assert json.loads(reply.content) == {"reason": "r", "score": 8}
    assert math.isclose(sum(p for _, p in reply.logprobs[1][1]), 1.0)


# --- every judge metric over real HTTP, through deepeval's OpenAIModel -----------------------

JUDGE_METRICS = ["geval", *RAG_CASES]
EXPECTED_OVER_HTTP: dict[str, tuple[float, float, list[str]]] = {
    # metric: (score from metric_routes, threshold, the requests deepeval makes, in any order)
    "geval": (0.84, 0.9, ["Steps", "logprobs"]),
    "faithfulness": (0.5, 0.5, ["Truths", "Claims", "Verdicts", "FaithfulnessScoreReason"]),
    "answer_relevancy": (
        2 / 3,
        0.7,
        ["Statements", "Verdicts", "AnswerRelevancyScoreReason"],
    ),
    "contextual_relevancy": (
        0.5,
        0.4,
        [
            "ContextualRelevancyVerdicts",
            "ContextualRelevancyVerdicts",
            "ContextualRelevancyScoreReason",
        ],
    ),
    "contextual_precision": (1.0, 0.8, ["Verdicts", "ContextualPrecisionScoreReason"]),
    "contextual_recall": (0.5, 0.6, ["Verdicts", "ContextualRecallScoreReason"]),
}
# gpt-4o-mini in deepeval's price table: $0.15 / $0.60 per million input / output tokens.
COST_PER_REQUEST = (PROMPT_TOKENS * 0.15 + COMPLETION_TOKENS * 0.60) / 1e6


def judged(metric: str, judge: Any, **overrides: Any) -> Grade:
    if metric == "geval":
        return geval(judge, **overrides)
    return rag(metric, judge, **overrides)


def assert_could_not_grade(grade: Grade) -> None:
    assert grade.errored
    assert grade.error is not None and grade.error.startswith("could not grade: ")
    assert grade.score is None  # never a low score standing in for "no verdict"
    assert grade.passed is False
    assert grade.judge_usage is None
    assert grade.model_used == "gpt-4o-mini"


@pytest.mark.parametrize("metric", JUDGE_METRICS)
def test_every_judge_metric_grades_over_http(metric: str, fake_openai: FakeOpenAIJudge) -> None:
    expected_score, threshold, expected_routes = EXPECTED_OVER_HTTP[metric]
    fake_openai.routes = metric_routes(metric)

    grade = judged(metric, http_judge(fake_openai), threshold=threshold)

    assert grade.error is None
    assert grade.score is not None and 0.0 <= grade.score <= 1.0
    assert grade.score == pytest.approx(expected_score)
    assert grade.threshold == threshold
    assert grade.passed is (grade.score >= threshold)
    assert grade.reason == f"{metric} reason"
    assert grade.model_used == "gpt-4o-mini"
    # The real HTTP path ran: deepeval's client sent every request to the fake server.
    assert fake_openai.request_count > 0
    assert sorted(fake_openai.routes_called()) == sorted(expected_routes)
    assert {request["model"] for request in fake_openai.requests} == {"gpt-4o-mini"}
    assert {h["authorization"] for h in fake_openai.headers} == {"Bearer test"}
    sent = json.dumps([request["messages"] for request in fake_openai.requests])
    assert ANSWER in sent or CONTEXT[0] in sent  # the case itself went over the wire
    # Judge usage: the tokens the server reported on every request, priced by deepeval.
    requests = fake_openai.request_count
    assert grade.judge_usage is not None
    assert grade.judge_usage.prompt_tokens == requests * PROMPT_TOKENS
    assert grade.judge_usage.completion_tokens == requests * COMPLETION_TOKENS
    assert grade.judge_usage.cost_usd == pytest.approx(requests * COST_PER_REQUEST)
    assert grade.details is not None
    if metric == "geval":
        assert grade.details["evaluation_steps"] == ["Check the capital.", "Check the population."]
    else:
        assert grade.details["verdicts"] and all(
            v["verdict"] in ("yes", "no") for v in grade.details["verdicts"]
        )


def test_the_http_metrics_both_pass_and_fail_against_their_thresholds() -> None:
    outcomes = {score >= threshold for score, threshold, _ in EXPECTED_OVER_HTTP.values()}

    assert outcomes == {True, False}


@pytest.mark.parametrize("metric", JUDGE_METRICS)
def test_a_server_without_usage_still_grades_and_records_no_usage(
    metric: str, fake_openai: FakeOpenAIJudge
) -> None:
    # ``usage`` is optional in the OpenAI API; deepeval alone would fail on it (AttributeError).
    fake_openai.routes = metric_routes(metric)
    fake_openai.report_usage = False

    grade = judged(metric, http_judge(fake_openai))

    assert grade.error is None
    assert grade.score == pytest.approx(EXPECTED_OVER_HTTP[metric][0])
    assert grade.judge_usage is None  # nothing reported: nothing recorded, not zeros
    assert fake_openai.request_count > 0


@pytest.mark.usefixtures("warm_http_judge")
@pytest.mark.parametrize("metric", JUDGE_METRICS)
def test_a_judge_slower_than_timeout_ms_could_not_grade_within_the_bound(
    metric: str, fake_openai: FakeOpenAIJudge
) -> None:
    # No answer comes within the test; the fixture's shutdown ends the sleep after the test.
    fake_openai.routes = {
        name: Reply(reply.content if isinstance(reply, Reply) else "{}", delay_s=JUDGE_DELAY_S)
        for name, reply in metric_routes(metric).items()
    }

    started = time.monotonic()
    grade = judged(metric, http_judge(fake_openai), timeout_ms=1000)
    elapsed = time.monotonic() - started

    assert_could_not_grade(grade)
    assert grade.error == "could not grade: TimeoutError: the judge gave no verdict within 1000 ms"
    assert grade.retry_count == 0
    assert 1.0 <= elapsed < JUDGE_DELAY_S  # bounded by timeout_ms, not by the judge
    assert fake_openai.request_count > 0  # the requests reached the judge...
    assert fake_openai.replies == 0  # ...which had not answered when the grade came back


@pytest.mark.parametrize(
    "bad_answer",
    ["Sure! The verdict is yes.", '{"unexpected": "shape"}'],
    ids=["not-json", "wrong-shape"],
)
@pytest.mark.parametrize("metric", [*JUDGE_METRICS, "geval-given-steps"])
def test_a_judge_answering_invalid_json_over_http_could_not_grade(
    metric: str, bad_answer: str, fake_openai: FakeOpenAIJudge
) -> None:
    overrides: dict[str, Any] = {}
    if metric == "geval-given-steps":  # the score request itself is the invalid one
        metric, overrides = "geval", {"evaluation_steps": ["Check the capital."]}
    fake_openai.routes = dict.fromkeys(metric_routes(metric), bad_answer)

    grade = judged(metric, http_judge(fake_openai), **overrides)

    assert_could_not_grade(grade)
    assert fake_openai.request_count > 0
    if overrides:
        assert fake_openai.routes_called() == ["logprobs"]
