"""Each model call's request as sent, stored without repeating the conversation.

A model call sends the whole conversation so far, so storing each request whole would grow a
case quadratically with its turns. Instead a session keeps a :class:`RequestLog` per case: each
piece of a request (a message at its place in the list, the system prompt, the list of tools
offered) is a *part*, numbered the first time it is sent and stored once, in the event of the
call that first sent it. The call's ``model_call`` (or ``retry``) event keeps::

    "request": {"format": "openai" | "anthropic" | "scripted",
                "seq": 3,                      # the case's 4th request
                "messages": {"base": 2, "keep": 14, "add": [[40, 41]]},
                "system": 6 | None, "tools": 1 | None,
                "params": {"model": ..., "temperature": ..., ...},   # everything else
                "parts": {"40": {...}, "41": {...}}},   # the parts this call sent first
    "response": {...}                          # the response as received (JSON; an SSE
                                               # stream as its assembled message)

``messages`` says: the first ``keep`` messages of request ``base`` (the one before), then the
parts ``add`` (inclusive ranges of part numbers); a request that shares no prefix with the one
before lists its parts only (``{"add": [...]}``). A call so costs a few dozen bytes plus what
it added, however long the conversation: a CLI that moves a cache marker from message to
message (Claude Code does) re-sends one changed message per call, not a growing list.
:class:`RequestBook` puts requests back together from the events of a case's transcripts, in
order, up to the call's turn. A part larger than ``PART_CAP`` bytes of JSON is kept as
``{"truncated": bytes, "head": "<first chars>"}``.
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
    """``value`` as JSON values, or ``{"truncated": bytes, "head": ...}`` when its JSON is
    over ``cap`` characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= cap:
        return json.loads(text)
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


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    count = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        count += 1
    return count


class RequestLog:
    """One case's requests: parts numbered as first sent, each request's messages."""

    def __init__(self) -> None:
        self._numbers: dict[str, int] = {}
        self._pending: Parts = {}
        self._last: list[int] | None = None
        self._seq = 0

    def reset(self) -> None:
        """A new case on the same session (a reused process): number from 0 again."""
        self._numbers.clear()
        self._pending = {}
        self._last = None
        self._seq = 0

    def _part(self, value: Any, place: str) -> int:
        """The number of ``value`` sent at ``place`` (``m<slot>`` for a message, ``system``,
        ``tools``): the same text at another place is another part."""
        key = f"{place}:{_digest(value)}"
        number = self._numbers.get(key)
        if number is None:
            number = self._numbers[key] = len(self._numbers)
            self._pending[str(number)] = capped_json(value, PART_CAP)
        return number

    def request(self, body: Mapping[str, Any], *, fmt: str) -> dict[str, Any]:
        """What a ``model_call`` keeps of a request body sent as ``fmt``: references, and the
        parts no earlier request of the case sent."""
        system, tools, messages = body.get("system"), body.get("tools"), body.get("messages")
        ref: dict[str, Any] = {
            "format": fmt,
            "seq": self._seq,
            "system": self._part(system, "system") if system is not None else None,
            "tools": self._part(tools, "tools") if tools is not None else None,
            "params": capped_json({k: v for k, v in body.items() if k not in _PART_KEYS}, PART_CAP),
        }
        if isinstance(messages, list):
            numbers = [self._part(m, f"m{n}") for n, m in enumerate(messages)]
            keep = _common_prefix(numbers, self._last) if self._last is not None else 0
            shared = {"base": self._seq - 1, "keep": keep} if keep else {}
            ref["messages"] = {**shared, "add": ranges(numbers[keep:])}
            self._last = numbers
        self._seq += 1
        if self._pending:
            ref["parts"], self._pending = self._pending, {}
        return ref


class RequestBook:
    """The requests of one case's transcripts put back together: feed it every event of the
    case's turns in order (at least up to the call's), then ask for a call's ``body``."""

    def __init__(self, events: Iterable[Mapping[str, Any]] = ()) -> None:
        self.parts: Parts = {}
        self._messages: dict[int, list[int]] = {}
        self.read(events)

    def read(self, events: Iterable[Mapping[str, Any]]) -> None:
        for event in events:
            ref = event.get("request")
            if not isinstance(ref, dict):
                continue
            if isinstance(ref.get("parts"), dict):
                self.parts.update(ref["parts"])
            numbers = self._numbers(ref)
            if numbers is not None and isinstance(ref.get("seq"), int):
                self._messages[ref["seq"]] = numbers

    def _numbers(self, ref: Mapping[str, Any]) -> list[int] | None:
        """The part numbers of a request's messages; None: it sent none, or its base request
        is not among the events read (a call the turn's transcript did not keep)."""
        messages = ref.get("messages")
        if not isinstance(messages, dict):
            return None
        kept: list[int] = []
        if messages.get("keep"):
            base = self._messages.get(int(messages.get("base", -1)))
            if base is None:
                return None
            kept = base[: int(messages["keep"])]
        return kept + expand(messages.get("add") or [])

    def body(self, ref: Mapping[str, Any]) -> dict[str, Any]:
        """The request ``ref`` names, as sent; a part the transcripts do not hold reads as
        ``{"missing_part": n}``, messages that cannot be rebuilt as ``{"missing": ...}``."""

        def get(number: Any) -> Any:
            return self.parts.get(str(number), {"missing_part": number})

        body: dict[str, Any] = dict(ref.get("params") or {})
        if ref.get("system") is not None:
            body["system"] = get(ref["system"])
        if "messages" in ref:
            numbers = self._messages.get(ref["seq"]) if isinstance(ref.get("seq"), int) else None
            if numbers is None:
                body["messages"] = [{"missing": "an earlier request of the case was not kept"}]
            else:
                body["messages"] = [get(n) for n in numbers]
        if ref.get("tools") is not None:
            body["tools"] = get(ref["tools"])
        return body
