from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from graders.matchers import LiteralMatcher
from graders.tool_calls import ToolExpectation, assert_tools
from runs.report.build import rollup_turns, summarize
from runs.report.holodeck_io import load_eval_runs
from runs.report.models import EvalRun, EvalRunMetadata, TestReport, ToolInvocation
from runs.report.writers import to_json, to_junit_xml, to_markdown
from tests.report.factories import TIMESTAMP, metric, result, turn

NASTY = 'a <b> & "c" \x00\x07 ]]> end'


def _report() -> TestReport:
    conversation = rollup_turns(
        [
            turn(
                0,
                input="What was revenue in 2009?",
                response="206,588",
                tool_calls=["convfinqa_archive"],
                expected_tools=[{"name": "convfinqa_archive", "args": {"year": 2009}}],
                tools_matched=True,
                arg_match_details=[
                    {
                        "tool": "convfinqa_archive",
                        "args_asserted": ["year"],
                        "matched_call_index": 0,
                        "unmatched_reason": None,
                    }
                ],
                metric_results=[metric("numeric", 1.0, threshold=1.0)],
            ),
            turn(
                1,
                input="And the change?",
                response="12%",
                tools_matched=False,
                expected_tools=["calculator"],
                arg_match_details=[
                    {
                        "tool": "calculator",
                        "args_asserted": ["a"],
                        "matched_call_index": None,
                        "unmatched_reason": "arg a: expected 206588, got 181001",
                    }
                ],
                metric_results=[metric("numeric", 0.0, passed=False, threshold=1.0)],
                errors=["timeout after 60s"],
                passed=False,
            ),
            turn(2, input="And in percent?", response=None, skipped=True, passed=False),
        ],
        test_name="revenue_dialogue",
        timestamp=TIMESTAMP,
    )
    results = [
        result(
            "refund | eligible",
            agent_response=NASTY,
            metric_results=[metric("tone", 0.9, kind="geval", reasoning="polite")],
        ),
        conversation,
    ]
    return TestReport(
        agent_name="Fin Agent",
        agent_config_path="examples/fin/agent.yaml",
        results=results,
        summary=summarize(results, total_duration_ms=4500),
        timestamp=TIMESTAMP,
        holodeck_version="0.1.0",
    )


# ------------------------------------------------------------------ JSON


def test_to_json_writes_a_loadable_holodeck_file() -> None:
    run = EvalRun(report=_report(), metadata=EvalRunMetadata(holodeck_version="0.1.0"))

    assert load_eval_runs(json.loads(to_json(run))) == [run]


# ------------------------------------------------------------------ Markdown


def test_markdown_header_states_agent_date_counts_rate_and_duration() -> None:
    text = to_markdown(_report())

    assert text.startswith("# Test report: Fin Agent\n")
    assert f"**Date**: {TIMESTAMP}" in text
    assert "2 total, 1 passed, 1 failed (50% pass rate)" in text
    assert "**Duration**: 4.50s" in text


def test_markdown_has_a_metric_summary_table() -> None:
    text = to_markdown(_report())

    assert "| Metric | Kind | Evaluated | Average score | Passed |" in text
    assert "| tone | geval | 1 | 0.900 | 1/1 |" in text
    assert "| numeric | standard | 1 | 0.500 | 0/1 |" in text


def test_markdown_has_a_section_per_case_with_verdict_and_metrics() -> None:
    text = to_markdown(_report())

    assert "### ✅ 1. refund | eligible (PASSED)" in text
    assert "### ❌ 2. revenue_dialogue (FAILED)" in text
    assert "> What was revenue in 2009?" in text
    assert "| tone | geval | 0.900 | 0.400 | ✅ | polite |" in text


def test_markdown_lists_every_turn_including_the_skipped_one() -> None:
    text = to_markdown(_report())

    assert "| 0 | ✅ passed | What was revenue in 2009? | 206,588 |" in text
    assert "| 1 | ❌ failed | And the change? | 12% |" in text
    assert "| 2 | ⏭️ skipped | And in percent? |" in text


def test_markdown_shows_tool_assertion_outcomes_and_turn_errors() -> None:
    text = to_markdown(_report())

    assert "- ✅ tool `convfinqa_archive` args year: matched call #0" in text
    assert "- ❌ tool `calculator` args a: arg a: expected 206588, got 181001" in text
    assert "- error: timeout after 60s" in text
    assert "[turn 1] timeout after 60s" in text  # the case-level, prefixed error


def test_markdown_escapes_pipes_in_table_cells_and_truncates_long_text() -> None:
    report = _report()
    report.results[0].test_input = "x" * 2000

    text = to_markdown(report, max_text=100)

    assert "> " + "x" * 99 + "…" in text
    assert "x" * 101 not in text


# ------------------------------------------------------------------ JUnit


def test_junit_xml_has_one_testcase_per_case_and_one_failure() -> None:
    root = ET.fromstring(to_junit_xml(_report()))

    suite = root.find("testsuite")
    assert suite is not None
    assert suite.get("name") == "Fin Agent"
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    cases = suite.findall("testcase")
    assert [case.get("name") for case in cases] == ["refund | eligible", "revenue_dialogue"]
    assert cases[0].find("failure") is None
    assert cases[1].get("time") == "0.300"


def test_junit_failure_message_lists_failing_turns_metrics_and_errors() -> None:
    root = ET.fromstring(to_junit_xml(_report()))

    failure = root.find("testsuite/testcase[@name='revenue_dialogue']/failure")
    assert failure is not None
    message = failure.get("message", "")
    assert "turn 1 failed" in message
    assert "turn 2 skipped" in message
    assert "metric numeric: 0.500 (threshold 1.000, failed)" in message
    assert "expected tools not matched" in message
    assert "error: [turn 1] timeout after 60s" in message


def test_junit_records_each_metric_as_a_property() -> None:
    root = ET.fromstring(to_junit_xml(_report()))

    prop = root.find("testsuite/testcase[@name='refund | eligible']/properties/property")
    assert prop is not None
    assert prop.get("name") == "metric.tone"
    assert prop.get("value") == "0.900 (threshold 0.400, passed)"


def test_junit_escapes_markup_and_drops_characters_xml_cannot_hold() -> None:
    text = to_junit_xml(_report())

    out = ET.fromstring(text).find("testsuite/testcase[@name='refund | eligible']/system-out")
    assert out is not None
    assert out.text == 'a <b> & "c" \ufffd\ufffd ]]> end'


def test_junit_is_valid_for_every_fixture_run(shared_dir: Path) -> None:
    runs = load_eval_runs(shared_dir / "fixtures" / "holodeck" / "seed_runs.json")

    for run in runs[:3]:
        suite = ET.fromstring(to_junit_xml(run.report)).find("testsuite")
        assert suite is not None
        assert len(suite.findall("testcase")) == run.report.summary.total_tests
        failed = [c for c in suite.findall("testcase") if c.find("failure") is not None]
        assert len(failed) == run.report.summary.failed
        assert f"{run.report.summary.passed} passed" in to_markdown(run.report)


def test_markdown_neutralises_html_in_agent_output() -> None:
    text = to_markdown(_report())

    assert '> a &lt;b&gt; & "c"  ]]&gt; end' in text
    assert "<b>" not in text


# ------------------------------------------------------------------ tool assertion verdicts


def _count_report(records: list[dict[str, Any]]) -> TestReport:
    calls = ["subtract", "subtract"]
    case = rollup_turns(
        [turn(0, tool_calls=calls, tools_matched=False, arg_match_details=records, passed=False)],
        test_name="needs two subtractions",
        timestamp=TIMESTAMP,
    )
    return TestReport(
        agent_name="Fin Agent",
        agent_config_path="agent.yaml",
        results=[case],
        summary=summarize([case], total_duration_ms=100),
        timestamp=TIMESTAMP,
        holodeck_version="0.1.0",
    )


def _failed_count_record() -> dict[str, Any]:
    """What the graders record for `count: 2` when one of two calls matched."""
    calls = [
        ToolInvocation(name="subtract", args={"a": 206588}),
        ToolInvocation(name="subtract", args={"a": 5}),
    ]
    expectation = ToolExpectation("subtract", {"a": LiteralMatcher(206588)}, count=2)
    [verdict] = assert_tools([expectation], calls)
    return verdict.to_wire()


def test_a_failed_count_assertion_shows_as_failed_in_markdown() -> None:
    record = _failed_count_record()
    assert (record["passed"], record["matched_call_index"]) == (False, None)

    text = to_markdown(_count_report([record]))

    assert "- ❌ tool `subtract` args a: 1 of 2 required calls matched" in text
    assert "✅ tool" not in text
    assert "matched call #" not in text


def test_a_failed_count_assertion_shows_as_a_failure_in_junit() -> None:
    root = ET.fromstring(to_junit_xml(_count_report([_failed_count_record()])))

    failure = root.find("testsuite/testcase/failure")
    assert failure is not None
    message = failure.get("message", "")
    assert "turn 0 tool subtract args a: 1 of 2 required calls matched" in message
    assert "matched call #" not in (failure.text or "")


@pytest.mark.parametrize(
    ("record", "mark"),
    [
        # stored before matched_call_index was cleared on failure: `passed` decides
        ({"tool": "subtract", "matched_call_index": 0, "passed": False}, "❌"),
        ({"tool": "subtract", "matched_call_index": 0, "passed": True}, "✅"),
        # HoloDeck's own records: no `passed`, -1 for a failed assertion
        ({"expected_tool": "subtract", "matched_call_index": -1, "unmatched_reason": "x"}, "❌"),
        ({"expected_tool": "subtract", "matched_call_index": 1, "unmatched_reason": None}, "✅"),
    ],
)
def test_markdown_takes_an_assertion_verdict_from_passed_else_from_the_matched_call(
    record: dict[str, Any], mark: str
) -> None:
    text = to_markdown(_count_report([record]))

    assert f"- {mark} tool `subtract`" in text
