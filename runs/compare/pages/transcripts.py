"""Two runs' transcripts of the same turn, side by side: their events aligned by order and type
(a tool call by its tool), each pair marked with what differs (a text as a word diff, a tool
call's args, result or error, a model call's model, stop reason or tokens), and what the model
was given (the system prompt, the user message) as word diffs."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from typing import Any

from django.utils.safestring import SafeString

from runs.shared.transcript_events import EventView
from runs.web.diffs import tool_call_diff, word_diff


@dataclass(frozen=True)
class EventPair:
    """One line of the side by side: an event of each run (None: that run has none there)."""

    left: EventView | None
    right: EventView | None
    changes: tuple[str, ...]

    @property
    def same(self) -> bool:
        return not self.changes


@dataclass(frozen=True)
class SeenDiff:
    """One text the model was given, in both runs: ``diff`` marks what the right one changed."""

    label: str
    left: str | None
    right: str | None
    diff: SafeString

    @property
    def same(self) -> bool:
        return self.left == self.right


def _key(view: EventView) -> tuple[str, str]:
    name = view.event.get("name") if view.kind == "tool_call" else ""
    return view.kind, str(name or "")


def aligned(
    left: list[EventView], right: list[EventView], names: tuple[str, str] = ("left", "right")
) -> list[EventPair]:
    """The events paired where their order and kinds agree; a replaced stretch pairs events of
    the same kind in turn (a call of another tool: a pair whose tool differs). ``names``: the
    two runs, as an event found in one only says ("only in #12")."""
    only = (f"only in {names[0]}",), (f"only in {names[1]}",)
    matcher = difflib.SequenceMatcher(
        a=[_key(v) for v in left], b=[_key(v) for v in right], autojunk=False
    )
    rows: list[EventPair] = []
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op == "equal" or op == "replace":
            rows.extend(_paired(left[a1:a2], right[b1:b2], only))
        elif op == "delete":
            rows.extend(EventPair(view, None, only[0]) for view in left[a1:a2])
        else:
            rows.extend(EventPair(None, view, only[1]) for view in right[b1:b2])
    return rows


def _paired(
    left: list[EventView], right: list[EventView], only: tuple[tuple[str], tuple[str]]
) -> list[EventPair]:
    rows: list[EventPair] = []
    rest = list(right)
    for view in left:
        twin = next((other for other in rest if other.kind == view.kind), None)
        if twin is None:
            rows.append(EventPair(view, None, only[0]))
            continue
        # What the right run had before the twin has no counterpart on the left.
        while rest[0] is not twin:
            rows.append(EventPair(None, rest.pop(0), only[1]))
        rest.pop(0)
        rows.append(_pair(view, twin))
    rows.extend(EventPair(None, view, only[1]) for view in rest)
    return rows


_MODEL_FIELDS = (
    ("model", "model"),
    ("stop_reason", "stop reason"),
    ("attempt", "attempt"),
    ("input_tokens", "input tokens"),
    ("output_tokens", "output tokens"),
    ("cached_tokens", "cached tokens"),
)


def _pair(left: EventView, right: EventView) -> EventPair:
    a, b = left.event, right.event
    if left.kind == "tool_call":
        changes = _call_changes(a, b)
        marked = {_field_of(change) for change in changes}
        return EventPair(_mark(left, marked), _mark(right, marked), tuple(changes))
    if left.kind == "model_call":
        changes = [label for key, label in _MODEL_FIELDS if a.get(key) != b.get(key)]
        return EventPair(left, right, tuple(changes))
    if left.kind in ("system", "user", "assistant", "error"):
        if a.get("text") == b.get("text"):
            return EventPair(left, right, ())
        diff = word_diff(_text(a.get("text")), _text(b.get("text")))
        right = replace(_mark(right, {"text"}), text_diff=diff)
        return EventPair(_mark(left, {"text"}), right, ("text",))
    changes = [key for key in ("error", "events") if a.get(key) != b.get(key)]
    return EventPair(left, right, tuple(changes))


def _call_changes(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What differs between two tool calls (args cut to their JSON's start are compared as
    text, by ``tool_call_diff`` itself)."""
    return tool_call_diff([a], [b])[0].changes


def _field_of(change: str) -> str:
    """``arg x``, ``arg x added``/``removed`` -> args; ``result``, ``error`` as they are."""
    return "args" if change.startswith("arg") else change


def _mark(view: EventView, names: set[str]) -> EventView:
    fields = tuple(replace(f, changed=f.name in names) for f in view.fields)
    return replace(view, fields=fields, changes=tuple(sorted(names)))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def seen_diffs(left: list[EventView], right: list[EventView]) -> list[SeenDiff]:
    """The system prompt (when either turn has it: a case's first) and the user message."""
    out = []
    for kind, label in (("system", "System prompt"), ("user", "User message")):
        a, b = _first_text(left, kind), _first_text(right, kind)
        if a is None and b is None:
            continue
        out.append(SeenDiff(label, a, b, word_diff(a, b)))
    return out


def _first_text(views: list[EventView], kind: str) -> str | None:
    for view in views:
        if view.kind == kind:
            return _text(view.event.get("text"))
    return None
