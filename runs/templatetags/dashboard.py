"""Filters for the run pages: safe Markdown, pretty JSON, nested JSON trees, verdicts, numbers
and summaries.

Everything an agent, a tool or a grader wrote is untrusted. Markdown is rendered with raw HTML
disabled (so ``<script>`` shows as text) and the result is sanitized with nh3 on top; every other
value goes through Django's escaping.

Verdicts are drawn from the stored outcome (``runs.core.verdicts.outcomes.Outcome``: its words,
mark and CSS class) and numbers are formatted by ``runs.core.verdicts.numbers``; nothing here names
a verdict or formats a pass rate its own way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import groupby
from typing import Any

import markdown
import nh3
from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from runs.core.comparison.query import MAX_RUNS
from runs.core.pricing.prices import Cost, SplitCost, format_cost, format_usd, split_text
from runs.core.verdicts.kinds import KIND_LABELS, kind_order
from runs.core.verdicts.numbers import (
    case_text,
    format_duration,
    format_rate,
    format_score,
    format_thousands,
    ordinal,
    turn_text,
)
from runs.core.verdicts.outcomes import (
    COUNTED_OUTCOMES,
    MAIN_OUTCOMES,
    CaseState,
    Outcome,
    RunState,
)
from runs.core.verdicts.summary import MetricSummary, OutcomeCounts
from runs.core.wire import times
from runs.core.wire.times import CaseTimes, TurnTimes
from runs.selectors.costs import Pricing, case_row_cost, turn_row_cost
from runs.shared.marks import (
    ago,
    case_chips,
    mark,
    outcome_label,
    shortsha,
    tools_chip,
    unpassed_counts,
)
from runs.templatetags import json_html

register = template.Library()

# The marks and formats the pages draw in Python too (runs/shared/marks.py, and durations and
# counts from runs.core.verdicts.numbers).
register.filter("duration", format_duration)
register.filter("ago", ago)
register.filter("thousands", format_thousands)
register.simple_tag(mark, name="mark")
register.filter("outcome_label", outcome_label)
register.simple_tag(case_chips, name="case_chips")
register.simple_tag(unpassed_counts, name="unpassed_counts")
register.filter("shortsha", shortsha)
register.simple_tag(tools_chip, name="tools_chip")

# Inputs, responses and ground truths longer than this are capped in height ("show more").
LONG_TEXT_CHARS = 1200
# Errors longer than this are collapsed behind their first line.
LONG_ERROR_CHARS = 300


def _markdown() -> markdown.Markdown:
    md = markdown.Markdown(extensions=["fenced_code", "tables", "sane_lists"])
    # Raw HTML passes through Python-Markdown untouched; drop both HTML processors so it is
    # treated (and escaped) as text.
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    return md


def _parse_json(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


@register.filter
def render_response(text: str | None) -> SafeString:
    """An agent response as sanitized Markdown, or formatted JSON when it is a JSON document."""
    if text is None:
        return mark_safe('<p class="muted">(no response)</p>')
    if text == "":
        return mark_safe('<p class="muted">(empty response)</p>')
    parsed = _parse_json(text)
    if parsed is not None:
        return format_html('<pre class="json">{}</pre>', pretty_json(parsed))
    html = _markdown().convert(text)
    return mark_safe(nh3.clean(html))


# JSON as text or as a tree (runs.templatetags.json_html).
pretty_json = register.filter("pretty_json", json_html.pretty_json)
compact_json = register.filter("compact_json", json_html.compact_json)
is_long = register.filter("is_long", json_html.is_long)
json_tree = register.filter("json_tree", json_html.json_tree)


# The one number formatter (runs.core.verdicts.numbers): a score "0.89", a pass rate "33.3%", "–"
# for none (never "0 %" for a run with nothing graded).
score = register.filter("score", format_score)
percent = register.filter("percent", format_rate)


@register.filter
def pass_at(stats: Any, k: int) -> float | None:
    """``{{ stats|pass_at:3 }}``: pass@k in % of a unit's repetitions (``RepeatStats``)."""
    return stats.pass_at(k)  # type: ignore[no-any-return]


@register.filter
def pass_all(stats: Any, k: int) -> float | None:
    """``{{ stats|pass_all:3 }}``: pass^k in % of a unit's repetitions (``RepeatStats``)."""
    return stats.pass_all(k)  # type: ignore[no-any-return]


# Turns and cases for people, from 1 (runs.core.verdicts.numbers): ``{{ turn.index|turn_of:4 }}``
# reads "turn 1 of 4", ``{{ case.index|number }}`` "1"; turn anchors count from 1 too (``#turn-1``
# is turn 1: ``turn-{{ turn.index|number }}``), query parameters (``?turn=``) keep the 0-based
# index.
number = register.filter("number", ordinal)
turn_of = register.filter("turn_of", turn_text)
case_of = register.filter("case_of", case_text)


@register.simple_tag
def turn_place(run: Any, case: Any, turn: Any) -> str:
    """``"turn 2 of 3, refund case 1, run #12"``: which turn a region of a turn's block belongs
    to, in its label. A page may hold one turn of several cases (a run page) or of several runs
    (side by side), so each region's name is unique on the page (axe's landmark-unique)."""
    where = [turn_text(turn.index, case.turn_count), case.label]
    if case.repetition:  # a later repetition (not ``run.repeats``: compare defers the options)
        where.append(f"repetition {case.repetition + 1}")
    return ", ".join([*where, f"run #{run.pk}"])


@register.simple_tag
def field_error(errors: dict[str, str] | None, name: str) -> SafeString:
    """The message of a refused filter value, next to its field (``runs.web.params``): the
    field's ``aria-describedby`` names it (``field_invalid``)."""
    message = (errors or {}).get(name)
    if not message:
        return mark_safe("")
    return format_html('<span class="field-error" id="{}-error">{}</span>', name, message)


@register.simple_tag
def field_invalid(errors: dict[str, str] | None, name: str) -> SafeString:
    """``aria-invalid`` and ``aria-describedby`` for a field whose value was refused."""
    if not (errors or {}).get(name):
        return mark_safe("")
    return format_html(' aria-invalid="true" aria-describedby="{}-error"', name)


@register.simple_tag
def compare_max_runs() -> int:
    """How many runs the compare page takes (the compare tray holds as many)."""
    return MAX_RUNS


@register.filter
def token_total(usage: dict[str, Any] | None) -> int | None:
    if not usage:
        return None
    total = usage.get("total_tokens")
    return int(total) if isinstance(total, int | float) else None


# --- verdicts ----------------------------------------------------------------------------------


@register.filter
def outcome(value: str | None) -> Outcome:
    """A stored or shown outcome as the object a page asks (``is_failed``, ``label``, ``css``,
    ``chip``): ``{% with verdict=turn.outcome|outcome %}``; "" or None is pending, a value that
    is no outcome "not assessed"."""
    return Outcome.shown(value)


@register.filter
def run_state(value: str) -> RunState:
    """A run's stored status as the object a page asks: ``run.status|run_state``."""
    return RunState(value)


@register.filter
def case_state(value: str) -> CaseState:
    """A case's stored status as the object a page asks: ``case.status|case_state``."""
    return CaseState(value)


@register.filter
def row_chip(row: Any) -> str:
    """The class of a case's, repetition's or turn's chip: its verdict's, or while a case has
    none yet (pending, running), its state's."""
    if row.outcome or not hasattr(row, "status"):
        return Outcome.shown(row.outcome).chip
    return CaseState(row.status).css


@register.simple_tag
def run_state_chip(status: str) -> SafeString:
    """A run's status as a chip."""
    state = RunState(status)
    return format_html('<span class="chip {}">{}</span>', state.css, state.label)


@register.simple_tag
def verdict(passed: bool | None) -> SafeString:
    """The mark of a check that holds a bare yes/no (a tool assertion, one argument of it):
    passed, failed, or not assessed (None)."""
    if passed is None:
        return mark(Outcome.NONE)
    return mark(Outcome.PASSED if passed else Outcome.FAILED)


# --- summaries ---------------------------------------------------------------------------------
# Each number of a summary carries ``data-summary`` ("cases.passed", "turns.not_graded", ...):
# the same marks on every page, so tests read what a page says and compare it with the record.

# Passed and failed are shown even when zero.
_ALWAYS = frozenset({Outcome.PASSED, Outcome.FAILED})
# The counts every surface marks (a pass rate is computed from these; the rest are context).
_MARKED = frozenset(MAIN_OUTCOMES)
_COLOURED = frozenset({Outcome.ERROR, Outcome.NOT_GRADED})
_HINTS = {
    Outcome.NOT_GRADED: "only metrics that could not grade failed: neither passed nor failed",
    Outcome.ERROR: "no answer to grade: the agent failed, timed out, or its worker gave up",
}


@register.simple_tag
def outcome_counts(counts: OutcomeCounts, key: str) -> SafeString:
    """``"1 passed · 2 failed · 1 errored · 1 not graded"`` of a summary's cases or turns
    (``key``), zero counts left out but for passed and failed."""
    parts = []
    for outcome in COUNTED_OUTCOMES:
        count = getattr(counts, outcome.value)
        if not count and outcome not in _ALWAYS:
            continue
        number = (
            format_html('<span data-summary="{}.{}">{}</span>', key, outcome.value, count)
            if outcome in _MARKED
            else str(count)
        )
        parts.append(
            format_html(
                '<span class="{}"{}>{} {}</span>',
                f"count-{outcome.value}" + (f" {outcome.css}" if outcome in _COLOURED else ""),
                format_html(' title="{}"', _HINTS[outcome]) if outcome in _HINTS else "",
                number,
                outcome.label,
            )
        )
    return format_html_join(" · ", "{}", ((part,) for part in parts))


@register.filter
def by_kind(metrics: Iterable[MetricSummary]) -> list[tuple[str, list[MetricSummary]]]:
    """A summary's metrics grouped by kind, in ``KINDS`` order, each group with its label."""
    ordered = sorted(metrics, key=lambda metric: (kind_order(metric.kind), metric.name))
    return [
        (KIND_LABELS.get(kind, kind), list(group))
        for kind, group in groupby(ordered, key=lambda metric: metric.kind)
    ]


# --- tool calls, judges, texts -----------------------------------------------------------------


@register.filter
def matching_calls(value: Any) -> str:
    """``[0, 3]`` -> "2 matching calls (#0, #3)"; ``[]`` -> "no matching call"."""
    if isinstance(value, list):
        count, indices = len(value), value
    elif isinstance(value, int) and not isinstance(value, bool):
        count, indices = value, []
    else:
        return ""
    if count == 0:
        return "no matching call"
    label = f"{count} matching call{'s' if count != 1 else ''}"
    if indices:
        shown = ", ".join(f"#{index}" for index in indices[:5])
        label += f" ({shown}{', …' if len(indices) > 5 else ''})"
    return label


@register.filter
def judge_info(metric: Any) -> str:
    """Judge model · retries · evaluation time, whichever are known."""
    parts = [metric.model_used or ""]
    if metric.retry_count:
        parts.append(f"{metric.retry_count} retr{'y' if metric.retry_count == 1 else 'ies'}")
    if metric.evaluation_time_ms is not None:
        parts.append(format_duration(metric.evaluation_time_ms))
    return " · ".join(part for part in parts if part)


@register.filter
def grading_ms(turn: Any) -> int | None:
    """Time spent grading a turn: the sum of its metrics' evaluation times (None if unknown)."""
    times = [m.evaluation_time_ms for m in turn.metrics.all() if m.evaluation_time_ms is not None]
    return sum(times) if times else None


@register.filter
def passed_below_threshold(metric: Any) -> bool:
    """An imported metric marked passed although its score is under its threshold."""
    return bool(
        metric.passed
        and not metric.error
        and metric.score is not None
        and metric.threshold is not None
        and metric.score < metric.threshold
    )


@register.filter
def tool_names(value: Any) -> list[str]:
    """Names of expected tools (bare strings or ``{name, args, count}``) or of tool calls."""
    if not value:
        return []
    names = []
    for item in value:
        name = item.get("name") if isinstance(item, dict) else item
        names.append(str(name))
    return names


@register.filter
def is_long_text(text: str | None) -> bool:
    """Long enough to be capped in height behind a "show more" toggle."""
    return bool(text) and (len(text or "") > LONG_TEXT_CHARS or (text or "").count("\n") > 20)


@register.filter
def is_long_error(text: Any) -> bool:
    value = str(text)
    return len(value) > LONG_ERROR_CHARS or value.count("\n") > 3


@register.filter
def first_line(text: Any) -> str:
    return str(text).strip().split("\n", 1)[0][:160]


@register.filter
def subject(text: str | None) -> SafeString:
    """A commit's subject beside its short sha: cut to the space it has by CSS (an ellipsis),
    whole in its title; "" when the run has none."""
    if not text:
        return mark_safe("")
    return format_html('<span class="commit-subject" title="{}">{}</span>', text, text)


# --- times and cost ----------------------------------------------------------------------------


@register.filter
def turn_times(turn: Any) -> TurnTimes:
    """A stored turn's agent / grading / judge times (its metrics prefetched)."""
    return times.turn_times(
        turn.execution_time_ms,
        [times.MetricTime(m.kind, m.evaluation_time_ms) for m in turn.metrics.all()],
    )


@register.filter
def case_times(case: Any) -> CaseTimes:
    """A stored case's breakdown: session start + agent + grading = its time."""
    return times.case_times(case.execution_time_ms, [turn_times(t) for t in case.turns.all()])


# The one money format (runs.core.pricing.prices.format_usd): "$0.0123", "$0.0000400", "$12.34",
# "$0".
usd = register.filter("usd", format_usd)


@register.filter
def cost_text(cost: Cost | None) -> str:
    """``$0.0123``, ``$0`` (a free model), ``unknown price (model)`` or ``—`` (no tokens
    recorded); never ``$0`` for an unknown price."""
    return "—" if cost is None else format_cost(cost)


@register.filter
def split_cost(cost: SplitCost | None) -> str:
    """``$0.0300 (agent $0.0100 · judge $0.0200)``, or ``unknown: no price for x (agent);
    judge —``: a model without a price said once (``runs.core.pricing.prices.split_text``, as the
    Markdown export says it)."""
    return "—" if cost is None else split_text(cost)


@register.filter
def turn_cost(turn: Any, pricing: Pricing | None) -> SplitCost | None:
    """A stored turn's cost, agent and judge apart (None: the price file is broken)."""
    if pricing is None or pricing.table is None:
        return None
    return turn_row_cost(turn, pricing.model, pricing.table)


@register.filter
def case_cost(case: Any, pricing: Pricing | None) -> SplitCost | None:
    if pricing is None or pricing.table is None:
        return None
    return case_row_cost(case.turns.all(), pricing.model, pricing.table)
