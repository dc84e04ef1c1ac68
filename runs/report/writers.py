"""Render a run as JSON (HoloDeck's file), Markdown (for people) or JUnit XML (for CI)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any, Literal

from runs.report.holodeck_io import dump_eval_run, slugify
from runs.report.models import EvalRun, MetricResult, TestReport, TestResult, TurnResult

PASS_MARK = "✅"
FAIL_MARK = "❌"
SKIP_MARK = "⏭️"

# Characters XML 1.0 cannot carry at all (ElementTree escapes <, & and quotes, not these).
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def to_json(run: EvalRun) -> str:
    """The HoloDeck result file (same text as ``holodeck_io.dump_eval_run``)."""
    return dump_eval_run(run)


# ---------------------------------------------------------------------------- Markdown


def to_markdown(report: TestReport, *, max_text: int = 500) -> str:
    """A readable report: header, metric table, one section per test case (with its turns).

    Long inputs and responses (a ConvFinQA turn 0 carries a whole filing) are cut to
    ``max_text`` characters; the JSON file keeps the full text.
    """
    lines = _markdown_header(report) + _markdown_metric_table(report.results)
    lines += ["## Test cases", ""]
    for number, result in enumerate(report.results, start=1):
        lines += _markdown_case(number, result, max_text)
    return "\n".join(lines).rstrip() + "\n"


def _markdown_header(report: TestReport) -> list[str]:
    summary = report.summary
    return [
        f"# Test report: {_inline(report.agent_name)}",
        "",
        f"- **Date**: {report.timestamp}",
        f"- **Agent config**: `{report.agent_config_path}`",
        f"- **HoloDeck version**: {report.holodeck_version}",
        f"- **Tests**: {summary.total_tests} total, {summary.passed} passed, "
        f"{summary.failed} failed ({summary.pass_rate:g}% pass rate)",
        f"- **Duration**: {_seconds(summary.total_duration_ms)}",
        "",
    ]


def _markdown_metric_table(results: Sequence[TestResult]) -> list[str]:
    stats = _metric_stats(results)
    if not stats:
        return ["_No metrics were evaluated._", ""]
    lines = [
        "## Metrics",
        "",
        "| Metric | Kind | Evaluated | Average score | Passed |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for name, (kind, metrics) in stats.items():
        scores = [m.score for m in metrics if m.score is not None]
        average = f"{sum(scores) / len(scores):.3f}" if scores else "—"
        passed = sum(1 for m in metrics if m.passed)
        lines.append(
            f"| {_cell(name)} | {kind} | {len(metrics)} | {average} | {passed}/{len(metrics)} |"
        )
    return [*lines, ""]


def _metric_stats(results: Sequence[TestResult]) -> dict[str, tuple[str, list[MetricResult]]]:
    stats: dict[str, tuple[str, list[MetricResult]]] = {}
    for result in results:
        for metric in result.metric_results:
            stats.setdefault(metric.metric_name, (metric.kind, []))[1].append(metric)
    return stats


def _markdown_case(number: int, result: TestResult, max_text: int) -> list[str]:
    mark, verdict = (PASS_MARK, "PASSED") if result.passed else (FAIL_MARK, "FAILED")
    name = result.test_name or f"Test case {number}"
    lines = [f"### {mark} {number}. {_inline(name)} ({verdict})", ""]
    lines += _quoted("Input", result.test_input, max_text)
    lines += _quoted("Response", result.agent_response, max_text)
    lines += [
        f"**Tools**: {_tools_line(result.tool_calls, result.expected_tools, result.tools_matched)}",
        "",
        f"**Execution time**: {_seconds(result.execution_time_ms)}",
        "",
    ]
    if result.token_usage is not None:
        usage = result.token_usage
        lines += [
            f"**Tokens**: {usage.prompt_tokens} prompt + {usage.completion_tokens} completion "
            f"= {usage.total_tokens} total",
            "",
        ]
    lines += _markdown_metrics(result.metric_results)
    lines += _markdown_errors(result.errors)
    if result.turns:
        lines += _markdown_turns(result.turns, max_text)
    return lines


def _markdown_metrics(metrics: Sequence[MetricResult]) -> list[str]:
    if not metrics:
        return []
    lines = [
        "**Metrics**:",
        "",
        "| Metric | Kind | Score | Threshold | Result | Note |",
        "| --- | --- | ---: | ---: | --- | --- |",
    ]
    for metric in metrics:
        note = f"error: {metric.error}" if metric.error else (metric.reasoning or "")
        lines.append(
            f"| {_cell(metric.metric_name)} | {metric.kind} | {_number(metric.score)} "
            f"| {_number(metric.threshold)} | {PASS_MARK if metric.passed else FAIL_MARK} "
            f"| {_cell(note, 200)} |"
        )
    return [*lines, ""]


def _markdown_errors(errors: Sequence[str]) -> list[str]:
    if not errors:
        return []
    return ["**Errors**:", "", *[f"- {_inline(error)}" for error in errors], ""]


def _markdown_turns(turns: Sequence[TurnResult], max_text: int) -> list[str]:
    lines = [
        "**Turns**:",
        "",
        "| Turn | Result | Input | Response | Tools | Metrics | Time |",
        "| ---: | --- | --- | --- | --- | --- | ---: |",
    ]
    for turn in turns:
        metrics = ", ".join(
            f"{m.metric_name} {_number(m.score)} {PASS_MARK if m.passed else FAIL_MARK}"
            for m in turn.metric_results
        )
        lines.append(
            f"| {turn.turn_index} | {_turn_verdict(turn)} | {_cell(turn.input, 120)} "
            f"| {_cell(turn.response or '', 120)} | {_cell(', '.join(turn.tool_calls) or '—')} "
            f"| {_cell(metrics or '—')} | {_seconds(turn.execution_time_ms)} |"
        )
    lines.append("")
    for turn in turns:
        lines += _markdown_turn_details(turn, max_text)
    return lines


def _markdown_turn_details(turn: TurnResult, max_text: int) -> list[str]:
    """Tool assertions and errors of one turn (the table above has the rest)."""
    details = [_assertion_line(record) for record in turn.arg_match_details or []]
    details += [f"- error: {_inline(error)}" for error in turn.errors]
    if turn.skipped and not turn.errors:
        details.append("- skipped: the session could not continue")
    if not details:
        return []
    heading = f"Turn {turn.turn_index} ({_turn_verdict(turn)})"
    return [f"*{heading}*", "", *details, ""]


def _assertion_line(record: dict[str, Any]) -> str:
    mark = PASS_MARK if _assertion_passed(record) else FAIL_MARK
    return f"- {mark} {_inline(_assertion_text(record, code='`'))}"


def _assertion_text(record: dict[str, Any], code: str) -> str:
    """``tool `lookup` args year: matched call #0`` or ``...: <why it failed>``; a failed
    assertion never names a matched call (its reason names the closest one when it helps)."""
    tool = record.get("tool") or record.get("expected_tool") or record.get("name") or "?"
    args = record.get("args_asserted")
    text = f"tool {code}{tool}{code}" + (f" args {', '.join(map(str, args))}" if args else "")
    if _assertion_passed(record):
        matched = record.get("matched_call_index")
        return text + (f": matched call #{matched}" if _is_index(matched) else ": matched")
    reason = " ".join(str(record.get("unmatched_reason") or "no matching call").split())
    return f"{text}: {reason}"


def _assertion_passed(record: dict[str, Any]) -> bool:
    """A tool assertion's verdict: its ``passed`` flag; a record without one (HoloDeck's)
    passed when it names a matched call (HoloDeck writes -1 for a failed one)."""
    passed = record.get("passed")
    if isinstance(passed, bool):
        return passed
    return _is_index(record.get("matched_call_index"))


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _turn_verdict(turn: TurnResult) -> str:
    if turn.skipped:
        return f"{SKIP_MARK} skipped"
    return f"{PASS_MARK} passed" if turn.passed else f"{FAIL_MARK} failed"


def _tools_line(
    calls: Sequence[str], expected: Sequence[str | dict[str, Any]] | None, matched: bool | None
) -> str:
    called = ", ".join(f"`{name}`" for name in calls) or "none"
    if expected is None:
        return called
    wanted = ", ".join(f"`{_tool_name(tool)}`" for tool in expected) or "none"
    if matched is None:
        verdict = "not checked"
    else:
        verdict = f"{PASS_MARK} matched" if matched else f"{FAIL_MARK} not matched"
    return f"{called} (expected {wanted}: {verdict})"


def _tool_name(tool: str | dict[str, Any]) -> str:
    return tool if isinstance(tool, str) else str(tool.get("name", "?"))


def _quoted(label: str, text: str | None, max_text: int) -> list[str]:
    if text is None:
        return [f"**{label}**: _none_", ""]
    body = _md_text(_truncate(text, max_text)).splitlines() or [""]
    return [f"**{label}**:", "", *[f"> {line}" for line in body], ""]


def _inline(text: str) -> str:
    return " ".join(_md_text(text).split())


def _md_text(text: str) -> str:
    """Agent output is data, not markup: neutralise HTML tags and control characters."""
    return _XML_ILLEGAL.sub("", text).replace("<", "&lt;").replace(">", "&gt;")


def _cell(text: str, limit: int | None = None) -> str:
    text = _inline(text)
    if limit is not None:
        text = _truncate(text, limit)
    return text.replace("|", "\\|")


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.2f}s"


# ---------------------------------------------------------------------------- JUnit XML


def to_junit_xml(report: TestReport) -> str:
    """One ``<testsuite>`` for the agent, one ``<testcase>`` per test case.

    A failed case gets a ``<failure>`` whose message lists its failing turns, metrics, tool
    assertion and errors; every metric is a ``<property>`` so CI dashboards can chart them.
    """
    failures = sum(1 for result in report.results if not result.passed)
    seconds = _xml_seconds(report.summary.total_duration_ms)
    suites = ET.Element(
        "testsuites",
        {"name": "holodeck", "tests": str(len(report.results)), "failures": str(failures)},
    )
    suites.set("errors", "0")
    suites.set("time", seconds)
    suite = ET.SubElement(suites, "testsuite", _xml_attrs(name=report.agent_name))
    for key, value in (
        ("tests", str(len(report.results))),
        ("failures", str(failures)),
        ("errors", "0"),
        ("skipped", "0"),
        ("time", seconds),
        ("timestamp", report.timestamp),
    ):
        suite.set(key, _xml_text(value))
    properties = ET.SubElement(suite, "properties")
    _add_property(properties, "agent_config_path", report.agent_config_path)
    _add_property(properties, "holodeck_version", report.holodeck_version)
    _add_property(properties, "pass_rate", f"{report.summary.pass_rate:g}")
    classname = _classname(report.agent_name)
    for number, result in enumerate(report.results, start=1):
        _junit_case(suite, result, number, classname)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _junit_case(suite: ET.Element, result: TestResult, number: int, classname: str) -> None:
    case = ET.SubElement(
        suite,
        "testcase",
        _xml_attrs(
            name=result.test_name or f"test case {number}",
            classname=classname,
            time=_xml_seconds(result.execution_time_ms),
        ),
    )
    if result.metric_results:
        properties = ET.SubElement(case, "properties")
        for metric in result.metric_results:
            _add_property(properties, f"metric.{metric.metric_name}", _metric_summary(metric))
    if not result.passed:
        reasons = failure_reasons(result)
        failure = ET.SubElement(
            case, "failure", _xml_attrs(message="; ".join(reasons), type="TestCaseFailed")
        )
        failure.text = _xml_text("\n".join(reasons))
    if result.agent_response:
        ET.SubElement(case, "system-out").text = _xml_text(result.agent_response)


def failure_reasons(result: TestResult) -> list[str]:
    """Why a case failed, most specific first: turns, metrics, tools, errors."""
    reasons: list[str] = []
    for turn in result.turns or []:
        if turn.skipped:
            reasons.append(f"turn {turn.turn_index} skipped")
        elif not turn.passed:
            reasons.append(f"turn {turn.turn_index} failed")
    reasons += [
        f"metric {metric.metric_name}: {_metric_summary(metric)}"
        for metric in result.metric_results
        if not metric.passed
    ]
    if result.tools_matched is False:
        reasons.append("expected tools not matched")
    reasons += [
        f"turn {turn.turn_index} {_assertion_text(record, code='')}"
        for turn in result.turns or []
        for record in turn.arg_match_details or []
        if not _assertion_passed(record)
    ]
    reasons += [f"error: {error}" for error in result.errors]
    return reasons or ["test case failed"]


def _metric_summary(metric: MetricResult) -> str:
    verdict = "passed" if metric.passed else "failed"
    text = f"{_number(metric.score)} (threshold {_number(metric.threshold)}, {verdict})"
    if metric.error:
        text += f" error: {metric.error}"
    return text


def _add_property(parent: ET.Element, name: str, value: str) -> None:
    ET.SubElement(parent, "property", _xml_attrs(name=name, value=value))


def _xml_attrs(**values: str) -> dict[str, str]:
    return {key: _xml_text(value) for key, value in values.items()}


def _xml_text(text: str) -> str:
    return _XML_ILLEGAL.sub("\ufffd", text)


def _xml_seconds(ms: int) -> str:
    return f"{ms / 1000:.3f}"


def _classname(agent_name: str) -> str:
    return slugify(agent_name)


# ---------------------------------------------------------------------------- one entry point

ExportFormat = Literal["json", "markdown", "junit"]
EXPORT_SUFFIXES: dict[str, ExportFormat] = {".json": "json", ".md": "markdown", ".xml": "junit"}


def export_text(run: EvalRun, fmt: ExportFormat) -> str:
    """The run as a HoloDeck result file (``json``), Markdown or JUnit XML: what
    ``run_agent --output`` writes, the run page's downloads and the API's export."""
    if fmt == "json":
        return to_json(run)
    if fmt == "markdown":
        return to_markdown(run.report)
    return to_junit_xml(run.report)
