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

register = template.Library()

# Longer values are collapsed behind a <details> toggle.
COLLAPSE_CHARS = 400
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
    if value is None:
        return "–"
    return f"{value:.0f}%"


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


@register.simple_tag
def verdict(passed: bool | None) -> SafeString:
    """✓ / ✗ / – with a colour class."""
    if passed is None:
        return mark_safe('<span class="v v-none">–</span>')
    if passed:
        return mark_safe('<span class="v v-ok" title="passed">✓</span>')
    return mark_safe('<span class="v v-bad" title="failed">✗</span>')


@register.filter
def shortsha(commit: str | None) -> str:
    return (commit or "")[:8]


@register.filter
def pass_rate(run: Any) -> str:
    """Passed cases over graded cases as a percentage, from the run's counters."""
    graded = (run.passed_cases or 0) + (run.failed_cases or 0)
    return percent(run.passed_cases * 100 / graded) if graded else "–"
