from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from runs.core.agentconfig.loader import load_agent
from runs.core.backends.base import BackendError, backend_for
from runs.core.backends.scripted import ScriptedBackend, build_transcript, load_transcript
from runs.core.engine.executor import Engine
from tests.core.engine.agents import make_agent

ARCHIVE = Path(__file__).with_name("mcp_archive_server.py")


def send_all(backend: ScriptedBackend, name: str, messages: list[str]) -> list[Any]:
    async def go() -> list[Any]:
        session = await backend.create_session(case_name=name, case_index=0)
        try:
            return [await session.send(message) for message in messages]
        finally:
            await session.close()

    return asyncio.run(go())


def test_the_registry_builds_the_scripted_backend_for_its_provider(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, [{"name": "c", "input": "q"}])
    assert isinstance(backend_for(agent), ScriptedBackend)


def test_it_replays_tool_calls_through_the_real_tools_then_answers(tmp_path: Path) -> None:
    transcript = {
        "c": [{"tool_calls": [{"name": "subtract", "args": {"a": 5, "b": 3}}], "response": "2"}]
    }
    agent = make_agent(tmp_path, [{"name": "c", "input": "q"}], transcript)
    (output,) = send_all(ScriptedBackend(agent), "c", ["q"])
    assert output.response == "2" and not output.is_error
    call = output.tool_calls[0]
    assert (call.name, call.args, call.result, call.error) == (
        "subtract",
        {"a": 5, "b": 3},
        2,
        None,
    )
    assert output.usage.prompt_tokens >= 1


def test_an_unknown_tool_is_a_tool_error_not_a_crash(tmp_path: Path) -> None:
    transcript = {"c": [{"tool_calls": [{"name": "nope", "args": {}}], "response": "x"}]}
    agent = make_agent(tmp_path, [{"name": "c", "input": "q"}], transcript)
    (output,) = send_all(ScriptedBackend(agent), "c", ["q"])
    assert output.tool_calls[0].error == "unknown tool 'nope'"
    assert output.response == "x"


def test_a_missing_case_or_turn_is_a_session_error(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, [{"name": "c", "input": "q"}], {"c": [{"response": "a"}]})
    backend = ScriptedBackend(agent)
    first, second = send_all(backend, "c", ["q", "again"])
    assert not first.is_error
    assert second.is_error and "has no turn 1" in second.error
    (missing,) = send_all(backend, "other", ["q"])
    assert missing.is_error and "no case 'other'" in missing.error


def test_the_generated_transcript_answers_ground_truth_and_calls_expected_tools(
    tmp_path: Path,
) -> None:
    cases = [
        {
            "name": "c",
            "turns": [
                {
                    "input": "a",
                    "ground_truth": "25587",
                    "expected_tools": [
                        {
                            "name": "subtract",
                            "args": {"a": 206588, "b": {"fuzzy": "181,001"}, "c": {"regex": "^x$"}},
                            "count": 2,
                        }
                    ],
                },
                {"input": "b"},
            ],
        }
    ]
    agent = make_agent(tmp_path, cases)
    transcript = build_transcript(agent.config.test_cases)
    first, second = transcript["c"]
    assert first["response"] == "25587"
    assert first["tool_calls"] == [{"name": "subtract", "args": {"a": 206588, "b": "181,001"}}] * 2
    assert second == {"tool_calls": [], "response": ""}


def test_latency_is_added_to_every_model_call(tmp_path: Path) -> None:
    transcript = {
        "c": [{"tool_calls": [{"name": "subtract", "args": {"a": 1, "b": 1}}], "response": "0"}]
    }
    agent = make_agent(tmp_path, [{"name": "c", "input": "q"}], transcript, latency_ms=50)
    started = time.perf_counter()
    send_all(ScriptedBackend(agent), "c", ["q"])
    assert time.perf_counter() - started >= 0.1  # a tool round and the answer: two calls


def test_a_malformed_transcript_is_reported_clearly(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(["not", "a", "mapping"]))
    with pytest.raises(BackendError, match="must be a mapping with a 'cases' mapping"):
        load_transcript(path)


def mcp_agent(tmp_path: Path, transcript: dict[str, Any], metrics: list[dict[str, Any]]) -> Any:
    config = {
        "name": "mcp-agent",
        "model": {"provider": "scripted", "name": "s", "transcript": "t.yaml"},
        "instructions": {"inline": "Look filings up."},
        "tools": [
            {
                "type": "mcp",
                "name": "archive",
                "command": sys.executable,
                "args": [str(ARCHIVE)],
                "is_retrieval": True,
            }
        ],
        "evaluations": {"metrics": metrics},
        "test_cases": [
            {
                "name": "c",
                "turns": [
                    {
                        "input": "find it",
                        "ground_truth": "206588",
                        "expected_tools": ["convfinqa_archive"],
                    },
                    {"input": "and again?", "ground_truth": "206588"},
                ],
            }
        ],
    }
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"cases": transcript}))
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(config))
    return load_agent(tmp_path / "agent.yaml")


def test_mcp_tools_run_over_stdio_and_feed_retrieval_context_to_rag_metrics(
    tmp_path: Path,
) -> None:
    from tests.graders.scripted_judge import ScriptedJudge

    transcript = {
        "c": [
            {
                "tool_calls": [
                    {
                        "name": "mcp__archive__convfinqa_archive",
                        "args": {"document": "Double_AAL/2014/page_18.pdf"},
                    },
                    {"name": "archive.broken", "args": {"x": 1}},
                ],
                "response": "206588",
            },
            {"response": "206588"},
        ]
    }
    judge = ScriptedJudge(
        {
            "faithfulness.Truths": {"truths": ["cash was 206588"]},
            "faithfulness.Claims": {"claims": ["it is 206588"]},
            "faithfulness.Verdicts": {"verdicts": [{"verdict": "yes"}]},
            "faithfulness.FaithfulnessScoreReason": {"reason": "Supported by the filing."},
        }
    )
    agent = mcp_agent(tmp_path, transcript, [{"type": "rag", "metric_type": "faithfulness"}])
    result = asyncio.run(Engine(agent, judge=judge).run()).results[0]
    first, second = result.turns
    archive, broken = first.tool_invocations
    assert archive.name == "mcp__archive__convfinqa_archive"
    assert "206588" in archive.result
    assert broken.error and "archive offline" in broken.error
    assert first.tools_matched is True
    # The second turn had no retrieval of its own: the session's earlier retrieval counts.
    for turn in (first, second):
        (metric,) = turn.metric_results
        assert (metric.metric_name, metric.kind, metric.score) == ("faithfulness", "rag", 1.0)
    prompts = [prompt for _, prompt in judge.calls]
    assert any("net cash from operating activities" in prompt for prompt in prompts)


def test_rag_metrics_are_skipped_without_retrieval_context(tmp_path: Path) -> None:
    agent = mcp_agent(
        tmp_path,
        {"c": [{"response": "1"}, {"response": "2"}]},
        [{"type": "rag", "metric_type": "faithfulness"}],
    )
    result = asyncio.run(Engine(agent).run()).results[0]
    assert [t.metric_results for t in result.turns] == [[], []]


def test_mcp_tools_run_over_streamable_http(tmp_path: Path, http_archive: str) -> None:
    config = {
        "name": "mcp-http",
        "model": {"provider": "scripted", "name": "s", "transcript": "t.yaml"},
        "instructions": {"inline": "x"},
        "tools": [{"type": "mcp", "name": "archive", "transport": "http", "url": http_archive}],
        "test_cases": [{"name": "c", "input": "q", "expected_tools": ["convfinqa_archive"]}],
    }
    transcript = {
        "c": [
            {
                "tool_calls": [
                    {
                        "name": "archive.convfinqa_archive",
                        "args": {"document": "Double_AAL/2014/page_18.pdf"},
                    }
                ],
                "response": "206588",
            }
        ]
    }
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"cases": transcript}))
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(config))
    result = asyncio.run(Engine(load_agent(tmp_path / "agent.yaml")).run()).results[0]
    (call,) = result.tool_invocations
    assert call.name == "mcp__archive__convfinqa_archive" and call.error is None
    assert "206588" in call.result
    assert result.tools_matched is True
