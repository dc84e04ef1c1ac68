"""Render a run as JSON (HoloDeck's file), Markdown (for people) or JUnit XML (for CI).

Markdown and JUnit read the stored verdicts (``outcome`` of each case, turn and metric) and the
run's summary (``TestReport.run_summary``; computed from the results for a file that has none),
never the ``passed`` booleans: a case that could not be graded reads "not graded" (a JUnit
``<skipped>``), one that errored is a JUnit ``<error>``. Numbers read as on every page
(``runs.core.verdicts.numbers``); metrics are counted per turn.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any, Literal

from runs.core.pricing.prices import ReportPrices, SplitCost, format_cost, report_prices, split_text
from runs.core.verdicts.numbers import case_text, format_rate, format_score, ordinal, turn_text
from runs.core.verdicts.outcomes import GRADED, MAIN_OUTCOMES, RARE_OUTCOMES, Outcome
from runs.core.verdicts.summary import OutcomeCounts, RunSummary
from runs.core.wire.build import summary_of_results
from runs.core.wire.holodeck_io import dump_eval_run, slugify
from runs.core.wire.models import EvalRun, MetricResult, TestReport, TestResult, TurnResult

PASS_MARK = Outcome.PASSED.emoji
FAIL_MARK = Outcome.FAILED.emoji

# The mark an outcome gets in Markdown, before its label ("⚠️ not graded").
MARKS: dict[Outcome, str] = {outcome: outcome.emoji for outcome in Outcome if outcome.emoji}
# Counted on every summary line; the others only when some case or turn has them.
SHOWN_OUTCOMES = MAIN_OUTCOMES

# Characters XML 1.0 cannot carry at all (ElementTree escapes <, & and quotes, not these).
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def to_json(run: EvalRun) -> str:
    """The run as an export: the HoloDeck result file with our verdicts (``outcome``,
    ``kind_outcomes``, ``run_summary``); ``holodeck_io.write_eval_run`` writes one without."""
    return dump_eval_run(run)


def report_summary(report: TestReport) -> RunSummary:
    """The run's summary: the report's own, else (a file written before we stored one) its
    results'."""
    return report.run_summary or summary_of_results(report.results)


def counts_text(counts: OutcomeCounts) -> str:
    """``"1 passed, 2 failed, 0 errored, 1 not graded"`` (skipped, cancelled and pending only
    when there are some)."""
    shown = [*SHOWN_OUTCOMES, *(o for o in RARE_OUTCOMES if getattr(counts, o.value))]
    return ", ".join(f"{getattr(counts, outcome.value)} {outcome.label}" for outcome in shown)


def verdict(outcome: str | None) -> str:
    """``"✅ passed"``, ``"⚠️ not graded"``: a stored verdict as the Markdown shows it."""
    shown = Outcome.of(outcome)
    return f"{MARKS.get(shown, '')} {shown.label}".strip()


# ---------------------------------------------------------------------------- Markdown


def to_markdown(
    report: TestReport, *, max_text: int = 500, prices: ReportPrices | None = None
) -> str:
    """A readable report: header, metric table, one section per test case (with its turns).

    Long inputs and responses (a ConvFinQA turn 0 carries a whole filing) are cut to
    ``max_text`` characters; the JSON file keeps the full text. With ``prices`` the header and
    each case say what they cost, agent and judge apart.
    """
    summary = report_summary(report)
    lines = _markdown_header(report, summary) + _cost_lines(prices, report)
    lines += _markdown_metric_table(summary)
    lines += _markdown_repetitions(report)
    lines += ["## Test cases", ""]
    for number, result in enumerate(report.results, start=1):
        lines += _markdown_case(number, result, max_text)
        lines += _case_cost_lines(prices, result)
    return "\n".join(lines).rstrip() + "\n"


def _markdown_repetitions(report: TestReport) -> list[str]:
    """A repeated run's cases over their repetitions (``report.repetitions``)."""
    if not report.repetitions:
        return []
    flaky = sum(1 for case in report.repetitions if case.flaky)
    repeats = max(case.repetitions for case in report.repetitions)
    lines = [
        "## Repetitions",
        "",
        f"Each case ran {repeats} times; {flaky} of {len(report.repetitions)} "
        f"case{'' if len(report.repetitions) == 1 else 's'} flaky (passed in some repetitions, "
        "failed in others).",
        "",
        f"| Case | Passed | Pass rate | pass@{repeats} | pass^{repeats} | Flaky |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for case in report.repetitions:
        name = case.test_name or case_text(case.case_index)
        lines.append(
            f"| {_cell(name, 80)} | {case.passed}/{case.passed + case.failed} | "
            f"{format_rate(case.pass_rate)} | {format_rate(case.pass_at_k)} | "
            f"{format_rate(case.pass_hat_k)} | {'flaky' if case.flaky else ''} |"
        )
    return [*lines, ""]


def _cost_lines(prices: ReportPrices | None, report: TestReport) -> list[str]:
    if prices is None:
        return []
    if prices.error is not None:
        return [f"- **Cost**: {_inline(prices.error)}", ""]
    cost = prices.report(report)
    source = prices.table.source if prices.table is not None else ""
    return [f"- **Cost**: {_cost_text(cost)} (prices: {_inline(source)})", ""]


def _case_cost_lines(prices: ReportPrices | None, result: TestResult) -> list[str]:
    if prices is None or prices.error is not None:
        return []
    return [f"**Cost**: {_cost_text(prices.case(result))}", ""]


def _cost_text(cost: SplitCost | None) -> str:
    return "—" if cost is None else _inline(split_text(cost))


def _markdown_header(report: TestReport, summary: RunSummary) -> list[str]:
    return [
        f"# Test report: {_inline(report.agent_name)}",
        "",
        f"- **Date**: {report.timestamp}",
        f"- **Agent config**: `{report.agent_config_path}`",
        f"- **HoloDeck version**: {report.holodeck_version}",
        f"- **Test cases**: {summary.cases.total} total: {counts_text(summary.cases)} "
        f"(pass rate {format_rate(summary.pass_rate)})",
        f"- **Turns**: {summary.turns.total} total: {counts_text(summary.turns)}",
        f"- **HoloDeck's summary** (the JSON file's `summary`): {holodeck_summary_text(report)}",
        f"- **Duration**: {_seconds(report.summary.total_duration_ms)}",
        *_cancelled_lines(report),
        "",
    ]


def holodeck_summary_text(report: TestReport) -> str:
    """How HoloDeck's own summary counts the run: "0 passed, 4 failed of 4 (it has no word for
    errored, not graded or cancelled: every case that ran and did not pass is failed; a
    cancelled case is left out)"."""
    stated = report.summary
    return (
        f"{stated.passed} passed, {stated.failed} failed of {stated.total_tests} (HoloDeck has "
        "no word for errored, not graded or cancelled: every case that ran and did not pass "
        "is failed there, and a cancelled case is left out)"
    )


def _cancelled_lines(report: TestReport) -> list[str]:
    names = report.cancelled_cases or []
    if not names:
        return []
    shown = ", ".join(_inline(name) for name in names[:20])
    more = f" and {len(names) - 20} more" if len(names) > 20 else ""
    return [f"- **Cancelled** ({len(names)}, never finished): {shown}{more}"]


def _markdown_metric_table(summary: RunSummary) -> list[str]:
    if not summary.metrics:
        return ["_No metrics were evaluated._", ""]
    lines = [
        "## Metrics (per turn)",
        "",
        "| Metric | Kind | Turns graded | Passed | Failed | Not graded | Pass rate "
        "| Average score |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for metric in summary.metrics:
        lines.append(
            f"| {_cell(metric.name)} | {metric.kind} | {metric.evaluated} | {metric.passed} "
            f"| {metric.failed} | {metric.not_graded} | {format_rate(metric.pass_rate)} "
            f"| {format_score(metric.average)} |"
        )
    return [*lines, ""]


def _markdown_case(number: int, result: TestResult, max_text: int) -> list[str]:
    outcome = Outcome.of(result.outcome)
    name = result.test_name or f"Test case {number}"
    lines = [
        f"### {MARKS.get(outcome, '')} {number}. {_inline(name)} ({outcome.label.upper()})",
        "",
    ]
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
            f"| {_cell(metric.metric_name)} | {metric.kind} | {format_score(metric.score)} "
            f"| {format_score(metric.threshold)} | {verdict(metric.outcome)} "
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
            f"{m.metric_name} {format_score(m.score)} {MARKS.get(Outcome.of(m.outcome), '')}"
            for m in turn.metric_results
        )
        lines.append(
            f"| {ordinal(turn.turn_index)} | {verdict(turn.outcome)} | {_cell(turn.input, 120)} "
            f"| {_cell(turn.response or '', 120)} | {_cell(', '.join(turn.tool_calls) or '—')} "
            f"| {_cell(metrics or '—')} | {_seconds(turn.execution_time_ms)} |"
        )
    lines.append("")
    for turn in turns:
        lines += _markdown_turn_details(turn, len(turns), max_text)
    return lines


def _markdown_turn_details(turn: TurnResult, total: int, max_text: int) -> list[str]:
    """Tool assertions and errors of one turn (the table above has the rest)."""
    details = [_assertion_line(record) for record in turn.arg_match_details or []]
    details += [f"- error: {_inline(error)}" for error in turn.errors]
    if turn.skipped and not turn.errors:
        details.append("- skipped: the session could not continue")
    if not details:
        return []
    heading = f"{turn_text(turn.turn_index, total).capitalize()} ({verdict(turn.outcome)})"
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


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.2f}s"


# ---------------------------------------------------------------------------- JUnit XML


def to_junit_xml(report: TestReport, *, prices: ReportPrices | None = None) -> str:
    """One ``<testsuite>`` for the agent, one ``<testcase>`` per test case.

    A case's stored outcome decides its element: failed, a ``<failure>``; errored, an
    ``<error>``; not graded (or cancelled), a ``<skipped>`` — never a failure. Each message
    lists the case's turns, metrics, tool assertions and errors that did not pass. The suite's
    properties carry the run's summary (``cases.passed``, ``turns.not_graded``, ``pass_rate``,
    ``metric.<name>.evaluated`` ...) and each case's a property per metric.
    """
    outcomes = [Outcome.of(result.outcome) for result in report.results]
    cancelled = report.cancelled_cases or []
    failures = str(outcomes.count(Outcome.FAILED))
    errors = str(outcomes.count(Outcome.ERROR))
    skipped = str(sum(1 for outcome in outcomes if outcome not in GRADED) + len(cancelled))
    seconds = _xml_seconds(report.summary.total_duration_ms)
    tests = str(len(report.results) + len(cancelled))
    suites = ET.Element(
        "testsuites",
        {"name": "holodeck", "tests": tests, "failures": failures, "errors": errors},
    )
    suites.set("time", seconds)
    suite = ET.SubElement(suites, "testsuite", _xml_attrs(name=report.agent_name))
    for key, value in (
        ("tests", tests),
        ("failures", failures),
        ("errors", errors),
        ("skipped", skipped),
        ("time", seconds),
        ("timestamp", report.timestamp),
    ):
        suite.set(key, _xml_text(value))
    properties = ET.SubElement(suite, "properties")
    _add_property(properties, "agent_config_path", report.agent_config_path)
    _add_property(properties, "holodeck_version", report.holodeck_version)
    for name, value in summary_properties(report_summary(report)):
        _add_property(properties, name, value)
    for name, value in cost_properties(prices, prices.report(report) if prices else None):
        _add_property(properties, name, value)
    classname = _classname(report.agent_name)
    for number, result in enumerate(report.results, start=1):
        _junit_case(suite, result, number, classname, prices)
    for name in cancelled:  # a cancel stopped them: counted, as skipped, never as run
        case = ET.SubElement(suite, "testcase", _xml_attrs(name=name, classname=classname))
        ET.SubElement(case, "skipped", _xml_attrs(message="cancelled: the run was cancelled"))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def summary_properties(summary: RunSummary) -> list[tuple[str, str]]:
    """The summary as JUnit properties: ``pass_rate``, ``cases.<outcome>``,
    ``turns.<outcome>`` and per metric ``metric.<name>.evaluated`` (turns graded), ``.passed``,
    ``.failed``, ``.not_graded``, ``.pass_rate``, ``.average``."""
    fields = ("total", *(outcome.value for outcome in (*SHOWN_OUTCOMES, *RARE_OUTCOMES)))
    found = [("pass_rate", format_rate(summary.pass_rate))]
    for scope, counts in (("cases", summary.cases), ("turns", summary.turns)):
        found += [(f"{scope}.{field}", str(getattr(counts, field))) for field in fields]
    for metric in summary.metrics:
        key = f"metric.{metric.name}"
        found += [
            (f"{key}.kind", metric.kind),
            (f"{key}.evaluated", str(metric.evaluated)),
            (f"{key}.passed", str(metric.passed)),
            (f"{key}.failed", str(metric.failed)),
            (f"{key}.{Outcome.NOT_GRADED.value}", str(metric.not_graded)),
            (f"{key}.pass_rate", format_rate(metric.pass_rate)),
            (f"{key}.average", format_score(metric.average)),
        ]
    return found


def cost_properties(prices: ReportPrices | None, cost: SplitCost | None) -> list[tuple[str, str]]:
    """``cost``, ``cost.agent``, ``cost.judge`` as the pages write them (``$0.0123``, ``unknown
    price (model)``, ``—`` without tokens); ``cost`` holds the price file's error if it has one."""
    if prices is None:
        return []
    if prices.error is not None:
        return [("cost", prices.error)]
    if cost is None:
        return []
    return [
        ("cost", format_cost(cost.both)),
        ("cost.agent", format_cost(cost.agent)),
        ("cost.judge", format_cost(cost.judge)),
    ]


# A case's outcome -> its JUnit element and that element's type (none for a passed case).
_JUNIT_ELEMENTS: dict[Outcome, tuple[str, str]] = {
    Outcome.FAILED: ("failure", "TestCaseFailed"),
    Outcome.ERROR: ("error", "TestCaseError"),
}


def _junit_case(
    suite: ET.Element,
    result: TestResult,
    number: int,
    classname: str,
    prices: ReportPrices | None = None,
) -> None:
    case = ET.SubElement(
        suite,
        "testcase",
        _xml_attrs(
            name=result.test_name or f"test case {number}",
            classname=classname,
            time=_xml_seconds(result.execution_time_ms),
        ),
    )
    costs = cost_properties(prices, prices.case(result) if prices else None)
    if result.metric_results or costs:
        properties = ET.SubElement(case, "properties")
        for metric in result.metric_results:
            _add_property(properties, f"metric.{metric.metric_name}", _metric_text(metric))
        for name, value in costs:
            _add_property(properties, name, value)
    outcome = Outcome.of(result.outcome)
    if outcome is not Outcome.PASSED:
        reasons = failure_reasons(result)
        if outcome in _JUNIT_ELEMENTS:
            tag, kind = _JUNIT_ELEMENTS[outcome]
            element = ET.SubElement(case, tag, _xml_attrs(message="; ".join(reasons), type=kind))
            element.text = _xml_text("\n".join(reasons))
        else:  # not graded, cancelled: not a verdict on the agent
            message = f"{outcome.label}: {'; '.join(reasons)}"
            ET.SubElement(case, "skipped", _xml_attrs(message=message))
    if result.agent_response:
        ET.SubElement(case, "system-out").text = _xml_text(result.agent_response)


def failure_reasons(result: TestResult) -> list[str]:
    """Why a case did not pass, most specific first: turns, metrics, tools, errors."""
    turns = result.turns or []
    reasons = [
        f"{turn_text(turn.turn_index, len(turns))} {Outcome.of(turn.outcome).label}"
        for turn in turns
        if Outcome.of(turn.outcome) is not Outcome.PASSED
    ]
    reasons += [
        f"metric {metric.metric_name}: {_metric_text(metric)}"
        for metric in result.metric_results
        if Outcome.of(metric.outcome) not in (Outcome.PASSED, Outcome.SKIPPED)
    ]
    if result.tools_matched is False:
        reasons.append("expected tools not matched")
    reasons += [
        f"{turn_text(turn.turn_index, len(turns))} {_assertion_text(record, code='')}"
        for turn in turns
        for record in turn.arg_match_details or []
        if not _assertion_passed(record)
    ]
    reasons += [f"error: {error}" for error in result.errors]
    return reasons or [f"test case {Outcome.of(result.outcome).label}"]


def _metric_text(metric: MetricResult) -> str:
    """``"0.50 (threshold 1.00, failed)"``, with the grader's error when it could not grade."""
    label = Outcome.of(metric.outcome).label
    text = f"{format_score(metric.score)} (threshold {format_score(metric.threshold)}, {label})"
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
    prices = report_prices(run.metadata.agent_config)
    if fmt == "markdown":
        return to_markdown(run.report, prices=prices)
    return to_junit_xml(run.report, prices=prices)
