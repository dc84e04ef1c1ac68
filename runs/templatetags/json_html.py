"""JSON for the run pages, every key and leaf escaped: indented text, one line, or a nested
list whose long strings fold behind a toggle. Registered as filters by ``dashboard``."""

from __future__ import annotations

import json
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

# Longer values are collapsed behind a <details> toggle.
COLLAPSE_CHARS = 400
TREE_MAX_DEPTH = 12


def pretty_json(value: Any) -> str:
    """Indented JSON text (escaped later by the template); strings are shown as they are."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=False)


def compact_json(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, default=str)


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
    if isinstance(value, dict | list):
        return _branch(value, depth)
    return _leaf(value)


def _branch(value: dict[Any, Any] | list[Any], depth: int) -> SafeString:
    """An object's keys or an array's indices, each with its value's tree."""
    keyed = isinstance(value, dict)
    if not value:
        return format_html('<span class="j-null">{}</span>', "{}" if keyed else "[]")
    row = (
        '<li><span class="j-key">{}</span>: {}</li>'
        if keyed
        else '<li><span class="j-key">[{}]</span> {}</li>'
    )
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    items = format_html_join("", row, ((key, _tree(item, depth + 1)) for key, item in pairs))
    return format_html('<ul class="tree">{}</ul>', items)


def json_tree(value: Any) -> SafeString:
    """A JSON value as a nested list (every key and leaf escaped)."""
    return _tree(value, 0)
