"""A turn's transcript: what its agent was sent and did, as ordered events.

Backends capture the events from their SDK's own hooks and messages while a turn runs
(:class:`TurnTrace`); the engine adds what it sent (the system prompt, on a case's first turn,
and the user message). Each event is a JSON object whose ``type`` is one of:

- ``system``: ``text`` (the instructions as the session was given them), ``source`` (the file
  of the agent directory they came from, or ``agent.yaml``);
- ``user``: ``text`` (the message sent, its files' Markdown included);
- ``model_call``: ``model``, ``start_ms``, ``duration_ms``, ``input_tokens``,
  ``output_tokens``, ``cached_tokens``, ``stop_reason``, ``attempt`` (1, then 2... when the
  call was retried), ``messages`` (how many messages it was sent, where the backend knows),
  ``request`` and ``response`` (the request as sent, with the parts of it no earlier call of
  the case sent, and the response as received, where the backend captured them:
  ``runs.core.wire.requests``);
- ``assistant``: ``text`` (what the model said: the reply, or its words before a tool call);
- ``tool_call``: ``id``, ``name``, ``args``, ``result`` or ``error``, ``start_ms``,
  ``duration_ms``;
- ``retry``: ``error``, ``start_ms``, ``duration_ms`` (a model request that failed; the SDK
  sends again the ones it can, and the call that then answers has ``attempt`` 2, 3...);
- ``error``: ``text`` (the turn's failure, as the backend reported it);
- ``truncated``: ``events`` (how many more events the turn had: a turn keeps at most
  ``MAX_EVENTS``).

``start_ms`` counts from the start of the turn's send. A text, a tool result or tool args
longer than ``TEXT_CAP`` characters keep their first ``TEXT_CAP`` and say so: the event gets
``truncated: {field: full size in bytes}``. So a transcript's memory is bounded whatever the
session does. Costs are not stored: readers price ``model_call`` tokens with the price table
(``transcript_costs``), as every other cost of the dashboard.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from graders.matchers import json_safe

TEXT_CAP = 16_000
# A system prompt's ``source`` when a replay edited it (no file of the agent holds it).
EDITED_PROMPT_SOURCE = "the replay's edited prompt"
MAX_EVENTS = 400
EVENT_TYPES = (
    "system",
    "user",
    "model_call",
    "assistant",
    "tool_call",
    "retry",
    "error",
    "truncated",
)
# The fields a cap applies to: texts, and tool args/results as their JSON.
_CAPPED = ("text", "result", "args", "error")

Event = dict[str, Any]


def capped(event: Mapping[str, Any], cap: int = TEXT_CAP) -> Event:
    """``event`` with each long field cut to ``cap`` characters and marked ``truncated``
    (``{field: full size in bytes}``). Args and results that are not strings are kept as they
    are when their JSON fits, else replaced by the first ``cap`` characters of that JSON."""
    out: Event = {}
    truncated: dict[str, int] = {}
    for key, value in event.items():
        if key in _CAPPED and value is not None:
            value, size = _cap_value(value, cap)
            if size is not None:
                truncated[key] = size
        out[key] = value
    if truncated:
        out["truncated"] = truncated
    return out


def _cap_value(value: Any, cap: int) -> tuple[Any, int | None]:
    if isinstance(value, str):
        if len(value) <= cap:
            return value, None
        return value[:cap], len(value.encode())
    safe = json_safe(value)
    text = json.dumps(safe, ensure_ascii=False)
    if len(text) <= cap:
        return safe, None
    return text[:cap], len(text.encode())


class TurnTrace:
    """The events of one turn as a backend captures them, capped as they come (at most
    ``MAX_EVENTS`` kept; the rest only counted), with times from the turn's start."""

    def __init__(self, *, max_events: int = MAX_EVENTS, cap: int = TEXT_CAP) -> None:
        self.started = time.perf_counter()
        self.events: list[Event] = []
        self.dropped = 0
        self._max = max_events
        self._cap = cap

    def now_ms(self) -> float:
        """Milliseconds since the turn started."""
        return round((time.perf_counter() - self.started) * 1000, 3)

    def add(self, event_type: str, **fields: Any) -> int | None:
        """Append an event; returns its position (for ``update``), None when it was dropped."""
        if len(self.events) >= self._max:
            self.dropped += 1
            return None
        self.events.append(capped({"type": event_type, **fields}, self._cap))
        return len(self.events) - 1

    def update(self, position: int | None, **fields: Any) -> None:
        """Complete an event added earlier (a tool call's result, a model call's usage)."""
        if position is None:
            return
        event = {k: v for k, v in self.events[position].items() if k != "truncated"}
        merged = {**event, **fields}
        self.events[position] = capped(merged, self._cap)

    def finished(self) -> list[Event]:
        """The events, with a ``truncated`` marker when some were dropped."""
        if not self.dropped:
            return list(self.events)
        return [*self.events, {"type": "truncated", "events": self.dropped}]


def turn_events(
    *,
    user_text: str,
    backend_events: Sequence[Event] | None,
    system_text: str | None = None,
    system_source: str | None = None,
) -> list[Event]:
    """A turn's whole transcript: the system prompt (first turn of a case), the user message,
    then what the backend captured."""
    events: list[Event] = []
    if system_text is not None:
        events.append(capped({"type": "system", "text": system_text, "source": system_source}))
    events.append(capped({"type": "user", "text": user_text}))
    events.extend(backend_events or [])
    return events


def transcript_size(events: Sequence[Event]) -> int:
    """Bytes of the events' JSON as stored."""
    return len(json.dumps(events, ensure_ascii=False, separators=(",", ":")).encode())


def model_calls(events: Iterable[Event]) -> list[Event]:
    return [event for event in events if event.get("type") == "model_call"]


def transcript_tokens(events: Iterable[Event]) -> tuple[int, int, int]:
    """(input, output, cached) tokens summed over the model calls."""
    calls = model_calls(events)
    return (
        sum(int(c.get("input_tokens") or 0) for c in calls),
        sum(int(c.get("output_tokens") or 0) for c in calls),
        sum(int(c.get("cached_tokens") or 0) for c in calls),
    )


def valid_events(value: Any) -> list[Event] | None:
    """Events read from a file (an import): a list of objects with a known ``type``, else None
    (a transcript that is not one is dropped, never half kept)."""
    if not isinstance(value, list):
        return None
    events: list[Event] = []
    for item in value:
        if not isinstance(item, dict) or item.get("type") not in EVENT_TYPES:
            return None
        events.append(capped(item))
    return events


# What a text search reads of a transcript (``transcript_search_text``): the events that say
# what was sent and done, and in them the fields a person wrote or a tool answered. A type left
# out (``model_call``'s figures, ``truncated``, raw request messages) is never searched.
SEARCHED_TYPES = ("system", "user", "assistant", "tool_call", "retry", "error")
SEARCHED_FIELDS = ("text", "name", "args", "result", "error")


def transcript_search_text(events: Iterable[Event]) -> str:
    """The text a search of the run's cases finds in a turn's transcript
    (``runs.selectors.text_search``): the system prompt, the user message, the assistant's
    texts, each tool call's name, args and result, and every error, one value a line; of args
    and results that are JSON, their values (strings, numbers, booleans), never their keys."""
    lines: list[str] = []
    for event in events:
        if not isinstance(event, Mapping) or event.get("type") not in SEARCHED_TYPES:
            continue
        for field in SEARCHED_FIELDS:
            lines.extend(_searched_values(event.get(field)))
    return "\n".join(line for line in lines if line)


def _searched_values(value: Any) -> Iterable[str]:
    """The values of a field's JSON, keys left out: a list's in order, an object's in the
    order of their keys (PostgreSQL's ``jsonb`` gives an object's keys back in an order of its
    own, and a row filled by migration 0024 reads them from there)."""
    if value is None:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool):
        yield "true" if value else "false"
    elif isinstance(value, int | float):
        yield json.dumps(value)
    elif isinstance(value, Mapping):  # by key: the same text whatever order a database keeps
        for key in sorted(value, key=str):
            yield from _searched_values(value[key])
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _searched_values(item)
    else:
        yield str(value)
