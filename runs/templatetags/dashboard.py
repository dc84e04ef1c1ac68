"""Filters for the run pages: safe Markdown, pretty JSON, nested JSON trees, number formats.

Everything an agent, a tool or a grader wrote is untrusted. Markdown is rendered with raw HTML
disabled (so ``<script>`` shows as text) and the result is sanitized with nh3 on top; every other
value goes through Django's escaping.
"""

from __future__ import annotations

import json
from typing import Any

import markdown
import nh3
from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from runs import selectors

register = template.Library()

# Longer values are collapsed behind a <details> toggle.
COLLAPSE_CHARS = 400
# Inputs, responses and ground truths longer than this are capped in height ("show more").
LONG_TEXT_CHARS = 1200
# Errors longer than this are collapsed behind their first line.
LONG_ERROR_CHARS = 300
TREE_MAX_DEPTH = 12


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


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON text (escaped later by the template); strings are shown as they are."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=False)


@register.filter
def compact_json(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, default=str)


@register.filter
def is_long(value: Any) -> bool:
    return len(pretty_json(value)) > COLLAPSE_CHARS


def _leaf(value: Any) -> SafeString:
    if value is None:
        return mark_safe('<span class="j-null">null</span>')
    if isinstance(value, bool):
        return format_html('<span class="j-bool">{}</span>', "true" if value else "false")
    if isinstance(value, int | float):
        return format_html('<span class="j-num">{}</span>', value)
    text = str(value)
    if len(text) > COLLAPSE_CHARS:
        return format_html(
            '<details class="long"><summary>{}… ({} chars)</summary><pre>{}</pre></details>',
            text[:80],
            len(text),
            text,
        )
    return format_html('<span class="j-str">{}</span>', text)


def _tree(value: Any, depth: int) -> SafeString:
    if depth > TREE_MAX_DEPTH:
        return format_html('<pre class="json">{}</pre>', pretty_json(value))
    if isinstance(value, dict):
        if not value:
            return mark_safe('<span class="j-null">{}</span>')
        items = format_html_join(
            "",
            '<li><span class="j-key">{}</span>: {}</li>',
            ((key, _tree(item, depth + 1)) for key, item in value.items()),
        )
        return format_html('<ul class="tree">{}</ul>', items)
    if isinstance(value, list):
        if not value:
            return mark_safe('<span class="j-null">[]</span>')
        items = format_html_join(
            "",
            '<li><span class="j-key">[{}]</span> {}</li>',
            ((index, _tree(item, depth + 1)) for index, item in enumerate(value)),
        )
        return format_html('<ul class="tree">{}</ul>', items)
    return _leaf(value)


@register.filter
def json_tree(value: Any) -> SafeString:
    """A JSON value as a nested list (every key and leaf escaped)."""
    return _tree(value, 0)


@register.filter
def score(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}"


@register.filter
def percent(value: float | None) -> str:
    """Whole numbers as they are ("90%"), others with one decimal that never lies at the ends:
    99.96 shows as "99.9%" (not "100%") and 0.04 as "0.1%" (not "0%")."""
    if value is None:
        return "–"
    if value == int(value):
        return f"{value:.0f}%"
    shown = min(max(round(value, 1), 0.1), 99.9) if 0 < value < 100 else round(value, 1)
    return f"{shown:.1f}%"


@register.filter
def duration(ms: int | float | None) -> str:
    if ms is None:
        return "–"
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m {rest:02d}s"


@register.filter
def thousands(value: int | None) -> str:
    if value is None:
        return "–"
    return f"{value:,}"


@register.filter
def token_total(usage: dict[str, Any] | None) -> int | None:
    if not usage:
        return None
    total = usage.get("total_tokens")
    return int(total) if isinstance(total, int | float) else None


# outcome -> (css class, symbol, words for screen readers and the tooltip)
MARKS: dict[str, tuple[str, str, str]] = {
    "passed": ("v-ok", "✓", "passed"),
    "failed": ("v-bad", "✗", "failed"),
    "not-graded": ("v-warn", "?", "not graded"),
    "cancelled": ("v-none", "–", "not run (cancelled)"),
    "skipped": ("v-none", "–", "skipped"),
    "none": ("v-none", "–", "no verdict yet"),
}


@register.simple_tag
def mark(outcome: str) -> SafeString:
    """The symbol of an outcome, with visually-hidden words (a bare ✓/✗ means nothing aloud)."""
    css, symbol, words = MARKS.get(outcome, MARKS["none"])
    return format_html(
        '<span class="v {}" title="{}" aria-hidden="true">{}</span><span class="sr-only">{}</span>',
        css,
        words,
        symbol,
        words,
    )


@register.simple_tag
def verdict(passed: bool | None) -> SafeString:
    """✓ / ✗ / – with a colour class."""
    return mark("none" if passed is None else "passed" if passed else "failed")


@register.filter
def case_outcome(case: Any) -> str:
    return selectors.case_outcome(case)


@register.filter
def turn_outcome(turn: Any) -> str:
    return selectors.turn_outcome(turn)


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
        parts.append(duration(metric.evaluation_time_ms))
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
def shortsha(commit: str | None) -> str:
    return (commit or "")[:8]


@register.filter
def pass_rate(run: Any) -> str:
    """The run's stored pass rate (kept current as its cases finish), as a percentage."""
    return percent(run.pass_rate) if run.pass_rate is not None else "–"
