from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from runs.core.wire.models import (
    EvalRun,
    MetricResult,
    ReportSummary,
    TestReport,
    TokenUsage,
    ToolInvocation,
    holodeck_dump,
    infer_metric_kind,
)
from tests.core.wire.factories import TIMESTAMP, metric, result, usage


def _fixture_documents(shared_dir: Path) -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = json.loads(
        (shared_dir / "fixtures" / "holodeck" / "seed_runs.json").read_text(encoding="utf-8")
    )
    return documents


# ------------------------------------------------------------------ real HoloDeck files


def test_all_24_fixture_runs_load_unchanged(shared_dir: Path) -> None:
    documents = _fixture_documents(shared_dir)

    runs = [EvalRun.model_validate(document) for document in documents]

    assert len(runs) == 24
    assert sum(len(run.report.results) for run in runs) == 288
    kinds = {m.kind for run in runs for r in run.report.results for m in r.metric_results}
    assert kinds == {"standard", "rag", "geval"}


def test_a_fixture_run_dumps_back_to_its_own_json_plus_the_turns_key(shared_dir: Path) -> None:
    documents = _fixture_documents(shared_dir)

    for document in documents:
        dumped = holodeck_dump(EvalRun.model_validate(document))
        for case in dumped["report"]["results"]:
            # feature 032 added TestResult.turns; older files simply lack the key.
            assert case.pop("turns") is None
        assert dumped == document


def test_fixture_quirks_are_kept_not_re_derived(shared_dir: Path) -> None:
    runs = [EvalRun.model_validate(d) for d in _fixture_documents(shared_dir)]
    metrics = [m for run in runs for r in run.report.results for m in r.metric_results]

    assert runs[0].report.summary.pass_rate == 58.0  # 7/12 stored as HoloDeck rounded it
    assert any(m.passed and m.score is not None and m.score < m.threshold for m in metrics)  # type: ignore[operator]
    assert all(m.retry_count is None and m.evaluation_time_ms is None for m in metrics)


# ------------------------------------------------------------------ MetricResult.kind


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("bleu", "standard"),
        ("rouge", "standard"),
        ("ROUGE", "standard"),
        ("meteor", "standard"),
        ("equality", "standard"),
        ("numeric", "standard"),
        ("exact_match", "standard"),
        ("f1_score", "standard"),
        ("faithfulness", "rag"),
        ("answer_relevancy", "rag"),
        ("contextual_relevancy", "rag"),
        ("contextual_precision", "rag"),
        ("Contextual Recall", "rag"),
        ("tone_of_voice", "geval"),
        ("groundedness", "geval"),
    ],
)
def test_a_missing_kind_is_inferred_from_the_metric_name(name: str, kind: str) -> None:
    loaded = MetricResult.model_validate({"metric_name": name, "score": 0.5, "passed": True})

    assert infer_metric_kind(name) == kind
    assert loaded.kind == kind


def test_an_explicit_kind_is_never_overridden_by_inference() -> None:
    loaded = MetricResult.model_validate(
        {"metric_name": "bleu", "kind": "code", "score": 1.0, "passed": True}
    )

    assert loaded.kind == "code"


def test_an_unknown_kind_is_rejected() -> None:
    with pytest.raises(ValidationError, match="kind"):
        MetricResult.model_validate(
            {"metric_name": "bleu", "kind": "fancy", "score": 1.0, "passed": True}
        )


def test_judge_extensions_are_dumped_only_when_set() -> None:
    plain = metric("tone", kind="geval")
    judged = metric("tone", kind="geval", judge_usage=usage(10, 5), judge_cost_usd=0.002)

    assert "judge_usage" not in plain.model_dump()
    assert "judge_cost_usd" not in json.loads(plain.model_dump_json())
    assert judged.model_dump()["judge_usage"]["total_tokens"] == 15
    assert judged.model_dump()["judge_cost_usd"] == 0.002
    assert "reasoning" in plain.model_dump()  # HoloDeck's own null fields stay


def test_unknown_keys_are_rejected_so_no_data_is_dropped_silently() -> None:
    with pytest.raises(ValidationError, match="surprise"):
        MetricResult.model_validate(
            {"metric_name": "bleu", "score": 1.0, "passed": True, "surprise": 1}
        )


# ------------------------------------------------------------------ TokenUsage


def test_token_usage_accepts_a_total_above_prompt_plus_completion() -> None:
    assert usage(10, 5, total_tokens=20).total_tokens == 20


def test_token_usage_rejects_a_total_below_prompt_plus_completion() -> None:
    with pytest.raises(ValidationError, match="total_tokens"):
        usage(10, 5, total_tokens=14)


def test_token_usage_rejects_negative_counts() -> None:
    with pytest.raises(ValidationError):
        TokenUsage(prompt_tokens=-1, completion_tokens=0, total_tokens=0)


def test_token_usage_adds_every_field_including_cache_tokens() -> None:
    left = usage(10, 5, total_tokens=16, cache_creation_tokens=3, cache_read_tokens=7)
    right = usage(1, 2, cache_creation_tokens=4, cache_read_tokens=5)

    total = left + right

    assert total == TokenUsage(
        prompt_tokens=11,
        completion_tokens=7,
        total_tokens=19,
        cache_creation_tokens=7,
        cache_read_tokens=12,
    )


def test_token_usage_zero_is_the_identity_of_addition() -> None:
    some = usage(3, 4, cache_read_tokens=2)

    assert TokenUsage.zero() + some == some
    assert TokenUsage.zero().model_dump() == dict.fromkeys(TokenUsage.model_fields, 0)


def test_legacy_token_usage_without_cache_fields_loads_with_zeros() -> None:
    loaded = TokenUsage.model_validate(
        {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    )

    assert (loaded.cache_creation_tokens, loaded.cache_read_tokens) == (0, 0)


# ------------------------------------------------------------------ ToolInvocation


def test_a_tool_invocation_fills_holodecks_bytes_field_from_the_result() -> None:
    call = ToolInvocation(name="lookup", args={"id": 7}, result={"ok": True})

    assert call.bytes == len(json.dumps({"ok": True}))
    assert ToolInvocation.model_validate(call.model_dump()) == call


# ------------------------------------------------------------------ summary invariants


def _summary(**fields: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "total_tests": 2,
        "passed": 1,
        "failed": 1,
        "pass_rate": 50.0,
        "total_duration_ms": 10,
    }
    values.update(fields)
    return values


def test_a_summary_whose_counts_do_not_add_up_is_rejected() -> None:
    with pytest.raises(ValidationError, match="must equal total_tests"):
        ReportSummary.model_validate(_summary(passed=2))


def test_a_summary_with_a_pass_rate_above_100_is_rejected() -> None:
    with pytest.raises(ValidationError, match="pass_rate"):
        ReportSummary.model_validate(_summary(pass_rate=101))


def test_a_report_whose_summary_does_not_count_its_results_is_rejected() -> None:
    with pytest.raises(ValidationError, match="number of results"):
        TestReport(
            agent_name="a",
            agent_config_path="agent.yaml",
            results=[result("only")],
            summary=ReportSummary.model_validate(_summary()),
            timestamp=TIMESTAMP,
            holodeck_version="0.1.0",
        )
