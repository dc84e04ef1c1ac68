"""Marks and formats drawn by the template tags (``runs.templatetags.dashboard`` registers each)
and by the views that draw rows in Python (``runs.web.row_html``): one
definition, below both, so tags and views never import each other."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince

from runs.core.verdicts.kinds import TOOLS_KIND
from runs.core.verdicts.outcomes import CaseState, Outcome
from runs.core.verdicts.summary import OutcomeCounts


def ago(moment: datetime | None, now: datetime | None = None) -> str:
    """How long ago ``moment`` was, for people: "3 minutes ago", "2 days, 4 hours ago"; "just
    now" under a minute (never "0 minutes ago", nor a time ahead of the clock); "" for none.
    The one way a page says how long ago something happened."""
    if moment is None:
        return ""
    now = now or timezone.now()
    if now - moment < timedelta(minutes=1):
        return "just now"
    return f"{timesince(moment, now)} ago"


def mark(outcome: str | None) -> SafeString:
    """The symbol of an outcome (any ``Outcome`` value; ``""`` or None: pending), with
    visually-hidden words (a bare ✓/✗ means nothing aloud)."""
    shown = Outcome.shown(outcome)
    return format_html(
        '<span class="v {}" title="{}" aria-hidden="true">{}</span><span class="sr-only">{}</span>',
        shown.css,
        shown.label,
        shown.symbol,
        shown.label,
    )


def outcome_label(outcome: str | None) -> str:
    """The words of an outcome: "errored", "not graded", ..."""
    return Outcome.shown(outcome).label


def case_chips(case: Any, stopping: bool = False) -> SafeString:
    """The chips that sum up a case ("3 turns · 1/3 passed", "not graded", "errored",
    "cancelled · not run", "cancelled · stopped"): the case row of the run page and the case
    page header. Reads the stored outcome as it is ("" while it has none: its status is
    shown); ``stopping``: its run was cancelled, so a running case says "stopping"."""
    verdict = Outcome.of(case.outcome)
    if verdict.is_cancelled and case.started_at is None:
        return mark_safe('<span class="chip chip-cancelled">cancelled · not run</span>')
    if verdict.is_cancelled:
        return mark_safe(
            '<span class="chip chip-cancelled" title="the run was cancelled while this case ran:'
            ' the turns it finished are kept, the rest were skipped">cancelled · stopped</span>'
        )
    state = CaseState(case.status)
    if stopping and state.is_running:
        return mark_safe(
            '<span class="chip chip-cancelled case-stopping" title="the run was cancelled: this'
            ' case stops after its current turn">cancelled · stopping</span>'
        )
    count = case.turn_count
    if verdict is Outcome.PENDING:  # pending or running: nothing passed or failed yet
        return format_html(
            '<span class="chip chip-muted">{} turn{}</span><span class="chip {}">{}</span>',
            count,
            "" if count == 1 else "s",
            state.css,
            state.label,
        )
    chips = format_html(
        '<span class="chip {}">{} turn{} · {}/{} passed</span>',
        verdict.chip,
        count,
        "" if count == 1 else "s",
        case.turns_passed,
        count,
    )
    if verdict.is_not_graded or verdict.is_error:
        chips = format_html('{}<span class="chip {}">{}</span>', chips, verdict.chip, verdict.label)
    return format_html("{}{}", chips, tools_chip(case.kind_outcomes))


def unpassed_counts(counts: OutcomeCounts) -> SafeString:
    """What "0/4 passed" alone hides: " · 1 errored · 1 not graded · 2 cancelled" (the cases
    with no answer to grade, those neither passed nor failed, those a cancel stopped), from a
    run's counters (``Run.counts``)."""
    unpassed = (
        (Outcome.ERROR, counts.error, "err small",
         "cases with no answer to grade: the agent failed, timed out, or its worker gave up"),
        (Outcome.NOT_GRADED, counts.not_graded, "warn small",
         "cases neither passed nor failed: only metrics that could not grade failed"),
        (Outcome.CANCELLED, counts.cancelled, "muted small",
         "cases a cancel stopped before they finished: counted in no pass rate"),
    )  # fmt: skip
    parts = [
        format_html(' <span class="{}" title="{}">· {} {}</span>', css, title, count, outcome.label)
        for outcome, count, css, title in unpassed
        if count
    ]
    return format_html_join("", "{}", ((part,) for part in parts))


def shortsha(commit: str | None) -> str:
    return (commit or "")[:8]


def tools_chip(kind_outcomes: dict[str, str] | None) -> SafeString:
    """A red "tools" chip for a case or turn whose tool assertions failed (``kind_outcomes``:
    its verdicts by kind), so one that failed only on a tool's arguments never looks green;
    nothing otherwise."""
    if (kind_outcomes or {}).get(TOOLS_KIND) != Outcome.FAILED:
        return mark_safe("")
    return _TOOLS_CHIP


_TOOLS_CHIP = mark_safe(
    '<span class="chip chip-failed tools-failed" title="a tool assertion failed">tools'
    ' <span aria-hidden="true">✗</span><span class="sr-only">failed</span></span>'
)
