"""The review panels' filters: a turn's panel out of a case's (``review_panels|panel_of:turn.pk``),
a person's verdict in words, and a refused field's message with the ids that tie it to its
field (unique per panel: a page holds the panels of several turns)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from runs.core.reviewing.vocabulary import HumanVerdict

register = template.Library()


@register.filter
def panel_of(panels: dict[int, Any] | None, turn_id: int) -> Any:
    """The review panel of the turn ``turn_id`` (None: the turn has none)."""
    return (panels or {}).get(turn_id)


@register.filter
def human_verdict(value: str | None) -> str:
    """A person's verdict (a ``HumanVerdict`` value) in words; "" for none."""
    try:
        return HumanVerdict(value).label if value else ""
    except ValueError:
        return str(value)


@register.simple_tag
def review_error(panel: Any, name: str) -> SafeString:
    """The message of the panel's refused field ``name``, its field's ``aria-describedby``."""
    message = panel.errors.get(name)
    if not message:
        return mark_safe("")
    return format_html(
        '<span class="field-error" id="{}-{}-error" role="alert">{}</span>',
        panel.dom_id, name, message,
    )  # fmt: skip


@register.simple_tag
def review_invalid(panel: Any, name: str) -> SafeString:
    """``aria-invalid`` and ``aria-describedby`` for the panel's refused field ``name``."""
    if not panel.errors.get(name):
        return mark_safe("")
    return format_html(' aria-invalid="true" aria-describedby="{}-{}-error"', panel.dom_id, name)


@register.simple_tag
def assignee_options(people: list[Any], selected: int | None) -> SafeString:
    """A failure's "assigned to" options (nobody, then each of ``people``), ``selected``'s
    chosen: drawn here, as every item of the review queue has them."""
    options = [format_html('<option value=""{}>nobody</option>', "" if selected else " selected")]
    options.extend(
        format_html(
            '<option value="{}"{}>{}</option>',
            person.pk,
            " selected" if person.pk == selected else "",
            person.get_username(),
        )
        for person in people
    )
    return mark_safe("".join(options))
