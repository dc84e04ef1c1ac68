"""Each model call's request as sent, stored without repeating the conversation.

A model call sends the whole conversation so far, so storing each request whole would grow a
case quadratically with its turns. Instead a session keeps a :class:`RequestLog` per case: each
piece of a request (a message, the system prompt, the list of tools offered) is a *part*,
numbered the first time it is sent and stored once, in the ``model_call`` event of the call
that first sent it. The event keeps (:func:`RequestLog.request`)::

    "request": {"format": "openai" | "anthropic" | "scripted",
                "messages": [[0, 5], [7, 7]],   # part numbers, as inclusive ranges
                "system": 6 | None, "tools": 1 | None,
                "params": {"model": ..., "temperature": ..., ...},   # everything else
                "parts": {"7": {...}}},        # the parts this call sent first
    "response": {...}                          # the response as received (JSON; an SSE
                                               # stream as its assembled message)

so a call costs a few dozen bytes plus what it added. :func:`request_body` puts the request
back together from the parts of the case's transcripts up to the call's turn
(:func:`parts_of`). A part larger
than ``PART_CAP`` bytes of JSON is kept as ``{"truncated": bytes, "head": "<first chars>"}``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

PART_CAP = 64_000
RESPONSE_CAP = 64_000
# The top-level keys that are parts of a request; every other key is a parameter.
_PART_KEYS = ("messages", "system", "tools")

Part = Any
Parts = dict[str, Part]


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def capped_json(value: Any, cap: int) -> Any:
    """``value``, or ``{"truncated": bytes, "head": ...}`` when its JSON is over ``cap``."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= cap:
        return json.loads(text) if not isinstance(value, str | int | float | bool) else value
    return {"truncated": len(text.encode()), "head": text[:cap]}


def ranges(numbers: Sequence[int]) -> list[list[int]]:
    """``[0, 1, 2, 5]`` -> ``[[0, 2], [5, 5]]``."""
    out: list[list[int]] = []
    for number in numbers:
        if out and out[-1][1] == number - 1:
            out[-1][1] = number
        else:
            out.append([number, number])
    return out


def expand(spans: Iterable[Sequence[int]]) -> list[int]:
    return [n for start, end in spans for n in range(int(start), int(end) + 1)]


class RequestLog:
    """One case's request parts, numbered as first sent."""

    def __init__(self) -> None:
        self._numbers: dict[str, int] = {}
        self.pending: Parts = {}

    def reset(self) -> None:
        """A new case on the same session (a reused process): number from 0 again."""
        self._numbers.clear()
        self.pending = {}

    def part(self, value: Any, place: str) -> int:
        """The number of ``value`` sent at ``place`` (``m<slot>`` for the slot-th message,
        ``system``, ``tools``): the same message at another place is another part, so a
        request's messages stay one run of numbers (a reply said twice is stored twice)."""
        key = f"{place}:{_digest(value)}"
        number = self._numbers.get(key)
        if number is None:
            number = self._numbers[key] = len(self._numbers)
            self.pending[str(number)] = capped_json(value, PART_CAP)
        return number

    def request(self, body: Mapping[str, Any], *, fmt: str) -> dict[str, Any]:
        """What a ``model_call`` keeps of a request body sent as ``fmt``: references, and the
        parts no earlier request of the case sent."""
        messages = body.get("messages")
        system, tools = body.get("system"), body.get("tools")
        # The system prompt and tools first: the messages' numbers then run on from call to
        # call, one range.
        system_part = self.part(system, "system") if system is not None else None
        tools_part = self.part(tools, "tools") if tools is not None else None
        ref = {
            "format": fmt,
            "messages": ranges([self.part(m, f"m{n}") for n, m in enumerate(messages or [])]),
            "system": system_part,
            "tools": tools_part,
            "params": capped_json({k: v for k, v in body.items() if k not in _PART_KEYS}, PART_CAP),
            **({"no_messages": True} if messages is None else {}),
        }
        if self.pending:
            ref["parts"], self.pending = self.pending, {}
        return ref


def parts_of(events: Iterable[Mapping[str, Any]]) -> Parts:
    """Every part the model calls (and retries) of some transcripts first sent."""
    found: Parts = {}
    for event in events:
        request = event.get("request")
        if isinstance(request, dict) and isinstance(request.get("parts"), dict):
            found.update(request["parts"])
    return found


def request_body(ref: Mapping[str, Any], parts: Mapping[str, Part]) -> dict[str, Any]:
    """The request a ``model_call``'s ``request`` reference names, put back together; a part
    the transcripts do not hold (dropped past a turn's event cap) reads as
    ``{"missing_part": n}``."""

    def get(number: Any) -> Any:
        return parts.get(str(number), {"missing_part": number})

    body: dict[str, Any] = dict(ref.get("params") or {})
    if ref.get("system") is not None:
        body["system"] = get(ref["system"])
    if not ref.get("no_messages"):
        body["messages"] = [get(n) for n in expand(ref.get("messages") or [])]
    if ref.get("tools") is not None:
        body["tools"] = get(ref["tools"])
    return body
