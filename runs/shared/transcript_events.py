"""A turn's transcript as a timeline to draw: each event with its place on the turn's time
axis (a bar scaled to the turn's duration), its texts ready to show, and, for a tool call, the
arg-match assertion it links to in the expanded turn.

Events are the stored ones (``runs.core.wire.transcripts``); nothing here reads a row.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.safestring import SafeString

from runs.core.verdicts.numbers import ordinal
from runs.core.wire.transcripts import Event

# A text longer than this (characters or lines) is shown collapsed, behind "show all".
LONG_CHARS = 1_200
LONG_LINES = 16
# The narrowest bar drawn (in % of the turn), so an instant call still shows.
MIN_BAR = 0.6


@dataclass(frozen=True)
class Bar:
    """Where an event sits on the turn's time axis, in % of the turn's duration."""

    left: float
    width: float


@dataclass(frozen=True)
class Field:
    """A text of an event as shown: ``text`` (JSON pretty-printed), collapsed when long, with
    the full size when the stored text was cut."""

    name: str
    label: str  # what it is, for people: "system prompt", "arguments", "result"...
    text: str
    truncated_bytes: int | None = None
    changed: bool = False  # the side by side: differs from the other run's

    @property
    def long(self) -> bool:
        return len(self.text) > LONG_CHARS or self.text.count("\n") > LONG_LINES


@dataclass(frozen=True)
class EventView:
    position: int
    kind: str
    event: Event
    bar: Bar | None = None
    call: int | None = None  # a tool call's index among the turn's calls (tool_invocations)
    model_call: int | None = None  # a model call's index among the turn's model calls
    request_url: str | None = None  # where its full request loads from (it kept one)
    diff_anchor: str | None = None  # the id of its arg-match assertion in the turn
    diff_passed: bool | None = None
    fields: tuple[Field, ...] = ()
    # The side by side: what differs from the other run's event, and a text's word diff.
    changes: tuple[str, ...] = ()
    text_diff: SafeString | None = None

    @property
    def start_ms(self) -> float | None:
        return _number(self.event.get("start_ms"))

    @property
    def duration_ms(self) -> float | None:
        return _number(self.event.get("duration_ms"))


@dataclass(frozen=True)
class Timeline:
    events: list[EventView]
    total_ms: float
    model_calls: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cost_usd: float | None  # None: no model call, or one without a price
    unpriced: bool  # some model call has no price


def shown(value: Any) -> str:
    """A field's value as text: a string as it is, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def ms_text(ms: float | None) -> str:
    """``0.21 ms``, ``12 ms``, ``1.4 s``: a transcript's times are often under a millisecond."""
    if ms is None:
        return "–"
    if ms < 10:
        return f"{ms:.2f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.1f} s"


# The texts of each kind of event, and what each is called.
_TEXT_FIELDS = {
    "system": (("text", "system prompt"),),
    "user": (("text", "user message"),),
    "assistant": (("text", "assistant text"),),
    "error": (("text", "error"),),
    "tool_call": (("args", "arguments"), ("result", "result"), ("error", "error")),
    "retry": (("error", "error"),),
}


def _fields(event: Event) -> tuple[Field, ...]:
    truncated = event.get("truncated")
    sizes = truncated if isinstance(truncated, dict) else {}
    out = []
    for name, label in _TEXT_FIELDS.get(str(event.get("type")), ()):
        value = event.get(name)
        if value is None or (name == "args" and value == {}):
            continue
        size = sizes.get(name)
        out.append(Field(name, label, shown(value), size if isinstance(size, int) else None))
    return tuple(out)


def turn_total_ms(events: Sequence[Event], turn_ms: float = 0) -> float:
    """The time axis of a turn: its recorded time, or its last event's end if later."""
    ends = [
        (_number(e.get("start_ms")) or 0) + (_number(e.get("duration_ms")) or 0) for e in events
    ]
    return max([float(turn_ms or 0), *ends])


def _bar(event: Event, total: float) -> Bar | None:
    start = _number(event.get("start_ms"))
    if start is None or total <= 0:
        return None
    duration = _number(event.get("duration_ms")) or 0
    left = min(100.0, max(0.0, start * 100 / total))
    width = min(100.0 - left, max(MIN_BAR, duration * 100 / total))
    return Bar(round(left, 2), round(width, 2))


def call_anchors(details: Iterable[Any] | None) -> list[int | None]:
    """Per arg-match assertion, the tool call it is about (the call it matched, else the
    closest one), None where an earlier assertion is about the same call: each call has one
    anchor, ``turn-<number>-call-<n>`` (the turn from 1)."""
    seen: set[int] = set()
    out: list[int | None] = []
    for assertion in details or []:
        call = _assertion_call(assertion)
        if call is None or call in seen:
            out.append(None)
            continue
        seen.add(call)
        out.append(call)
    return out


def _assertion_call(assertion: Any) -> int | None:
    if not isinstance(assertion, dict):
        return None
    for key in ("matched_call_index", "closest_call_index"):
        value = assertion.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def call_anchor(prefix: str, turn_index: int, call: int) -> str:
    """``turn-1-call-0``: the turn counted from 1 (as every turn anchor), the call from 0 (as
    its "call #0")."""
    return f"{prefix}turn-{ordinal(turn_index)}-call-{call}"


def timeline(
    events: Sequence[Event],
    *,
    turn_index: int,
    turn_ms: float = 0,
    details: Sequence[Any] | None = None,
    prefix: str = "",
) -> Timeline:
    """The turn's events to draw; ``details``: its arg-match assertions (a tool call links to
    the one about it); ``prefix``: the turn's anchor prefix on the page it is drawn in."""
    total = turn_total_ms(events, turn_ms)
    passed = {
        call: bool(assertion.get("passed"))
        for assertion, call in zip(details or [], call_anchors(details), strict=True)
        if call is not None
    }
    views, calls, model_calls = [], 0, 0
    for position, event in enumerate(events):
        kind = str(event.get("type"))
        call = model_call = None
        if kind == "tool_call":
            call, calls = calls, calls + 1
        elif kind == "model_call":
            model_call, model_calls = model_calls, model_calls + 1
        views.append(
            EventView(
                position=position,
                kind=kind,
                event=event,
                bar=_bar(event, total) if kind in ("model_call", "tool_call", "retry") else None,
                call=call,
                model_call=model_call,
                diff_anchor=(call_anchor(prefix, turn_index, call) if call in passed else None),
                diff_passed=passed.get(call) if call is not None else None,
                fields=_fields(event),
            )
        )
    return _summed(views, total)


def _summed(views: list[EventView], total: float) -> Timeline:
    model = [view.event for view in views if view.kind == "model_call"]
    costs = [call.get("cost_usd") for call in model]
    known = [float(cost) for cost in costs if isinstance(cost, int | float)]
    return Timeline(
        events=views,
        total_ms=total,
        model_calls=len(model),
        tool_calls=sum(view.kind == "tool_call" for view in views),
        input_tokens=sum(int(c.get("input_tokens") or 0) for c in model),
        output_tokens=sum(int(c.get("output_tokens") or 0) for c in model),
        cached_tokens=sum(int(c.get("cached_tokens") or 0) for c in model),
        cost_usd=round(sum(known), 8) if known else None,
        unpriced=len(known) < len(costs),
    )
