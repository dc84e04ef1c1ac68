from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from graders.matchers import LiteralMatcher
from graders.tool_calls import ToolExpectation, assert_tools
from runs.core.wire.build import rollup_turns, summarize, summary_of_results
from runs.core.wire.holodeck_io import load_eval_runs
from runs.core.wire.models import EvalRun, EvalRunMetadata, TestReport, ToolInvocation
from runs.core.writers.results import to_json, to_junit_xml, to_markdown
from tests.core.wire.factories import TIMESTAMP, metric, result, turn

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


def test_markdown_header_states_agent_date_case_and_turn_counts_rate_and_duration() -> None:
    text = to_markdown(_report())

    assert text.startswith("# Test report: Fin Agent\n")
    assert f"**Date**: {TIMESTAMP}" in text
    assert (
        "- **Test cases**: 2 total: 1 passed, 1 failed, 0 errored, 0 not graded "
        "(pass rate 50%)" in text
    )
    assert "- **Turns**: 4 total: 2 passed, 0 failed, 1 errored, 0 not graded, 1 skipped" in text
    assert "**Duration**: 4.50s" in text


def test_markdown_has_a_metric_table_counted_per_turn() -> None:
    text = to_markdown(_report())

    assert "## Metrics (per turn)" in text
    assert (
        "| Metric | Kind | Turns graded | Passed | Failed | Not graded | Pass rate "
        "| Average score |" in text
    )
    assert "| numeric | standard | 2 | 1 | 1 | 0 | 50% | 0.50 |" in text
    assert "| tone | geval | 1 | 1 | 0 | 0 | 100% | 0.90 |" in text
    assert text.index("| numeric |") < text.index("| tone |")  # the kinds' order


def test_markdown_reads_the_reports_summary_when_it_has_one() -> None:
    report = _report()
    report.run_summary = summary_of_results(report.results, unfinished=["", ""])

    text = to_markdown(report)

    assert (
        "- **Test cases**: 4 total: 1 passed, 1 failed, 0 errored, 0 not graded, 2 pending" in text
    )


def test_markdown_has_a_section_per_case_with_verdict_and_metrics() -> None:
    text = to_markdown(_report())

    assert "### ✅ 1. refund | eligible (PASSED)" in text
    assert "### ❌ 2. revenue_dialogue (FAILED)" in text
    assert "> What was revenue in 2009?" in text
    assert "| tone | geval | 0.90 | 0.40 | ✅ passed | polite |" in text


def test_markdown_lists_every_turn_including_the_skipped_one_numbered_from_one() -> None:
    text = to_markdown(_report())

    assert "| 1 | ✅ passed | What was revenue in 2009? | 206,588 |" in text
    assert "| 2 | 💥 errored | And the change? | 12% |" in text
    assert "| 3 | ⏭️ skipped | And in percent? |" in text
    assert "*Turn 2 of 3 (💥 errored)*" in text
    assert "*Turn 3 of 3 (⏭️ skipped)*" in text


def test_the_json_export_keeps_the_stored_0_based_turn_index() -> None:
    run = EvalRun(report=_report(), metadata=EvalRunMetadata(holodeck_version="0.1.0"))
    data = json.loads(to_json(run))

    (case,) = [r for r in data["report"]["results"] if r["test_name"] == "revenue_dialogue"]
    assert [turn["turn_index"] for turn in case["turns"]] == [0, 1, 2]


def test_markdown_shows_tool_assertion_outcomes_and_turn_errors() -> None:
    text = to_markdown(_report())

    assert "- ✅ tool `convfinqa_archive` args year: matched call #0" in text
    assert "- ❌ tool `calculator` args a: arg a: expected 206588, got 181001" in text
    assert "- error: timeout after 60s" in text
    assert "[turn 2] timeout after 60s" in text  # the case-level, prefixed error (from 1)


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
    counts = [suite.get(key) for key in ("tests", "failures", "errors", "skipped")]
    assert counts == ["2", "1", "0", "0"]
    cases = suite.findall("testcase")
    assert [case.get("name") for case in cases] == ["refund | eligible", "revenue_dialogue"]
    assert cases[0].find("failure") is None
    assert cases[1].get("time") == "0.300"


def test_junit_failure_message_lists_failing_turns_metrics_and_errors() -> None:
    root = ET.fromstring(to_junit_xml(_report()))

    failure = root.find("testsuite/testcase[@name='revenue_dialogue']/failure")
    assert failure is not None
    message = failure.get("message", "")
    assert "turn 2 of 3 errored" in message
    assert "turn 3 of 3 skipped" in message
    assert "metric numeric: 0.50 (threshold 1.00, failed)" in message
    assert "expected tools not matched" in message
    assert "error: [turn 2] timeout after 60s" in message


def test_junit_records_each_metric_as_a_property() -> None:
    root = ET.fromstring(to_junit_xml(_report()))

    prop = root.find("testsuite/testcase[@name='refund | eligible']/properties/property")
    assert prop is not None
    assert prop.get("name") == "metric.tone"
    assert prop.get("value") == "0.90 (threshold 0.40, passed)"


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
        passed = [c for c in suite.findall("testcase") if not _marked(c)]
        assert len(passed) == run.report.summary.passed
        assert f": {run.report.summary.passed} passed, " in to_markdown(run.report)


def _marked(case: ET.Element) -> list[str]:
    """The JUnit elements that say a test case did not pass."""
    return [child.tag for child in case if child.tag in ("failure", "error", "skipped")]


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
    assert "turn 1 of 1 tool subtract args a: 1 of 2 required calls matched" in message
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


# ------------------------------------------------------------------ verdicts that are not failures


def _graded_and_not_report() -> TestReport:
    """A passed case, a case whose judge gave no verdict on its second turn, and a case whose
    execution failed (the recorder's ``error``: no result)."""
    judge_down = metric("tone", None, passed=False, kind="geval", error="judge timed out")
    not_graded = rollup_turns(
        [turn(0, metric_results=[metric("bleu", 0.9)]), turn(1, metric_results=[judge_down],
         passed=False)],
        test_name="judge down",
        timestamp=TIMESTAMP,
    )  # fmt: skip
    results = [
        result("fine", metric_results=[metric("bleu", 0.8)]),
        not_graded,
        result("crashed", passed=False, outcome="error", errors=["worker lost"]),
    ]
    return TestReport(
        agent_name="Fin Agent",
        agent_config_path="agent.yaml",
        results=results,
        summary=summarize(results, total_duration_ms=100),
        timestamp=TIMESTAMP,
        holodeck_version="0.1.0",
    )


def test_a_not_graded_case_is_skipped_in_junit_never_a_failure() -> None:
    report = _graded_and_not_report()
    assert [r.outcome for r in report.results] == ["passed", "not_graded", "error"]

    suite = ET.fromstring(to_junit_xml(report)).find("testsuite")

    assert suite is not None
    counts = [suite.get(key) for key in ("tests", "failures", "errors", "skipped")]
    assert counts == ["3", "0", "1", "1"]
    [case] = suite.findall("testcase[@name='judge down']")
    assert _marked(case) == ["skipped"]
    message = case.findall("skipped")[0].get("message", "")
    assert message.startswith("not graded: turn 2 of 2 not graded")
    assert "metric tone: – (threshold 0.40, not graded) error: [turn 2] judge timed out" in message


def test_an_errored_case_is_a_junit_error() -> None:
    suite = ET.fromstring(to_junit_xml(_graded_and_not_report())).find("testsuite")

    assert suite is not None
    [case] = suite.findall("testcase[@name='crashed']")
    assert _marked(case) == ["error"]
    assert case.findall("error")[0].get("message") == "error: worker lost"


def test_markdown_names_a_not_graded_case_and_turn_and_an_errored_case() -> None:
    text = to_markdown(_graded_and_not_report())

    assert "### ⚠️ 2. judge down (NOT GRADED)" in text
    assert "| 2 | ⚠️ not graded | question 1 |" in text
    assert "### 💥 3. crashed (ERRORED)" in text
    assert "- **Test cases**: 3 total: 1 passed, 0 failed, 1 errored, 1 not graded" in text
    assert "(pass rate 50%)" in text  # passed over graded: the not graded case is left out


def test_junit_suite_properties_carry_the_runs_summary() -> None:
    suite = ET.fromstring(to_junit_xml(_graded_and_not_report())).find("testsuite")

    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert properties["pass_rate"] == "50%"
    cases = {key: properties[f"cases.{key}"] for key in ("passed", "failed", "error")}
    assert cases == {"passed": "1", "failed": "0", "error": "1"}
    assert properties["cases.not_graded"] == "1"
    assert properties["turns.total"] == "4"  # two single-turn cases and two turns
    tone = {key: properties[f"metric.tone.{key}"] for key in ("evaluated", "passed", "failed")}
    assert tone == {"evaluated": "1", "passed": "0", "failed": "0"}
    assert properties["metric.tone.not_graded"] == "1"
    assert properties["metric.tone.pass_rate"] == "–"
    assert properties["metric.bleu.average"] == "0.85"


def test_a_run_with_nothing_graded_has_no_pass_rate_never_zero() -> None:
    judge_down = metric("tone", None, passed=False, kind="geval", error="no judge")
    results = [result("only", passed=False, metric_results=[judge_down])]
    report = TestReport(
        agent_name="a",
        agent_config_path="agent.yaml",
        results=results,
        summary=summarize(results, total_duration_ms=1),
        timestamp=TIMESTAMP,
        holodeck_version="0.1.0",
    )

    assert "(pass rate –)" in to_markdown(report)
    assert '<property name="pass_rate" value="–" />' in to_junit_xml(report)
