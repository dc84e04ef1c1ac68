from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from graders.judges import JudgeSpec
from runs.core.agentconfig.loader import load_agent
from runs.core.engine.executor import Engine
from runs.core.engine.metrics import MetricRunner
from tests.core.engine.agents import make_agent


def run(agent: Any, **kwargs: Any) -> Any:
    return asyncio.run(Engine(agent, **kwargs).run())


def test_two_numeric_metrics_keep_their_own_tolerances(tmp_path: Path) -> None:
    metrics = [
        {"type": "standard", "metric": "numeric", "name": "tight", "absolute_tolerance": 0.001},
        {"type": "standard", "metric": "numeric", "name": "loose", "absolute_tolerance": 0.5},
    ]
    agent = make_agent(
        tmp_path,
        [{"name": "c", "input": "q", "ground_truth": "10"}],
        {"c": [{"response": "10.2"}]},
        metrics=metrics,
    )
    tight, loose = run(agent).results[0].metric_results
    assert (tight.metric_name, tight.passed) == ("tight", False)
    assert (loose.metric_name, loose.passed) == ("loose", True)


def test_disabled_metrics_of_every_type_are_not_run(tmp_path: Path) -> None:
    metrics = [
        {"type": "standard", "metric": "equality", "enabled": False},
        {"type": "code", "grader": "checks.grade:crash", "enabled": False},
        {"type": "geval", "name": "tone", "criteria": "polite", "enabled": False},
        {"type": "rag", "metric_type": "faithfulness", "enabled": False},
        {"type": "standard", "metric": "numeric"},
    ]
    agent = make_agent(
        tmp_path,
        [{"name": "c", "input": "q", "ground_truth": "1", "retrieval_context": ["ctx"]}],
        {"c": [{"response": "1"}]},
        metrics=metrics,
    )
    assert [m.metric_name for m in run(agent).results[0].metric_results] == ["numeric"]


def test_fail_on_error_stops_the_case_for_a_judge_that_cannot_grade(tmp_path: Path) -> None:
    geval = {"type": "geval", "name": "tone", "criteria": "polite", "fail_on_error": True}
    cases = [{"name": "c", "turns": [{"input": "a"}, {"input": "b"}]}]
    agent = make_agent(tmp_path, cases, metrics=[geval])
    first, second = run(agent).results[0].turns
    (metric,) = first.metric_results
    assert metric.kind == "geval" and metric.error.startswith("could not grade")
    assert second.skipped and "fail_on_error" in second.errors[0]
    assert first.outcome == "failed"  # fail_on_error: could not grade fails the turn


def write_agent(tmp_path: Path, metric_model: Any, evaluations_model: Any) -> Any:
    metric: dict[str, Any] = {"type": "geval", "name": "tone", "criteria": "polite"}
    if metric_model:
        metric["model"] = metric_model
    evaluations: dict[str, Any] = {"metrics": [metric]}
    if evaluations_model:
        evaluations["model"] = evaluations_model
    config = {
        "name": "judge-resolution",
        "model": {"provider": "openai", "name": "agent-model", "api_key": "k"},
        "instructions": {"inline": "x"},
        "evaluations": evaluations,
        "test_cases": [{"name": "c", "input": "q"}],
    }
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(config))
    agent = load_agent(tmp_path / "agent.yaml")
    return MetricRunner(agent)._judge(agent.config.evaluations.metrics[0])


def test_the_judge_model_is_the_metrics_then_the_evaluations_then_the_agents(
    tmp_path: Path,
) -> None:
    metric_model = {"provider": "anthropic", "name": "judge-on-metric", "api_key": "k"}
    evaluations_model = {"provider": "ollama", "name": "judge-on-evaluations"}
    assert write_agent(tmp_path, metric_model, evaluations_model).name == "judge-on-metric"
    assert write_agent(tmp_path, None, evaluations_model).name == "judge-on-evaluations"
    judge = write_agent(tmp_path, None, None)
    assert isinstance(judge, JudgeSpec)
    assert (judge.provider, judge.name, judge.api_key) == ("openai", "agent-model", "k")


def test_judges_that_cannot_grade_are_warned_about_before_the_run(tmp_path: Path) -> None:
    from runs.core.engine.metrics import judge_warnings

    geval = {"type": "geval", "name": "tone", "criteria": "polite"}
    keyless = {**geval, "name": "keyless", "model": {"provider": "openai", "name": "gpt-4o-mini"}}
    local = {**geval, "name": "local", "model": {"provider": "ollama", "name": "llama3"}}
    cases = [{"name": "c", "input": "q", "evaluations": [keyless, local]}]
    agent = make_agent(tmp_path, cases, metrics=[geval, {"type": "standard", "metric": "bleu"}])
    assert judge_warnings(agent) == [
        "LLM metrics judged by scripted/scripted-test will not be graded: provider 'scripted' "
        "cannot judge (set evaluations.model)",
        "LLM metrics judged by openai/gpt-4o-mini will not be graded: the judge has no api_key "
        "(set it, e.g. api_key: ${OPENAI_API_KEY})",
    ]


def test_one_runner_grades_without_an_event_loop_as_it_does_with_one(tmp_path: Path) -> None:
    from runs.core.engine.grading import metrics_from_yaml
    from runs.core.engine.metrics import TurnFacts

    (tmp_path / "checks.py").write_text(
        "def share(ctx):\n    return len(ctx.agent_response) / 10\n"
    )
    metrics = metrics_from_yaml(
        [
            {"type": "standard", "metric": "numeric", "absolute_tolerance": 0.5},
            {"type": "standard", "metric": "equality"},
            {"type": "code", "grader": "checks:share", "threshold": 0.2},
        ],
        base_dir=tmp_path,
    )
    runner = MetricRunner(None)
    for facts in (
        TurnFacts(input="q", response="10.2", ground_truth="10"),
        TurnFacts(input="q", response="ten", ground_truth="10"),
    ):
        for metric in metrics:
            (sync, sync_details) = runner.grade_sync(metric, facts)
            (live, live_details) = asyncio.run(runner.grade(metric, facts))
            assert sync_details == live_details
            assert sync.model_copy(update={"evaluation_time_ms": 0}) == live.model_copy(
                update={"evaluation_time_ms": 0}
            )


def test_grading_a_judge_metric_without_an_event_loop_is_refused(tmp_path: Path) -> None:
    from runs.core.engine.grading import metrics_from_yaml
    from runs.core.engine.metrics import TurnFacts

    (geval,) = metrics_from_yaml(
        [{"type": "geval", "name": "tone", "criteria": "polite"}], base_dir=tmp_path
    )
    with pytest.raises(ValueError, match="'tone' needs an LLM judge"):
        MetricRunner(None).grade_sync(geval, TurnFacts(input="q", response="a"))
