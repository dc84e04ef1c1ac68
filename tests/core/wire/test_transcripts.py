"""What a text search reads of a turn's transcript (``runs.core.wire.transcripts``): the texts
that were sent and said, tool names, the values of args and results, errors; never the JSON's
keys, a model call's figures, or the raw request messages of a ``parts`` event."""

from __future__ import annotations

from runs.core.wire.transcripts import transcript_search_text

EVENTS = [
    {"type": "system", "text": "You answer refunds.", "source": "prompts/system.md"},
    {"type": "user", "text": "Where is order A-1002?"},
    {"type": "model_call", "model": "gpt-4o-mini", "stop_reason": "tool_calls", "attempt": 1},
    {"type": "retry", "error": "429 rate limited", "start_ms": 2.0},
    {
        "type": "tool_call",
        "id": "call_1",
        "name": "orders_lookup",
        "args": {"order_id": "A-1002", "filters": [{"year": 2009, "paid": True}]},
        "result": {"status": "shipped", "carrier": None},
        "error": None,
    },
    {"type": "tool_call", "name": "refund", "args": "raw-args", "error": "LookupError: no"},
    {"type": "assistant", "text": "It shipped."},
    {"type": "error", "text": "the session closed"},
    {"type": "parts", "messages": [{"role": "user", "content": "raw request words"}]},
    {"type": "truncated", "events": 3},
]


def test_it_reads_the_texts_tool_names_arg_and_result_values_and_errors_in_order() -> None:
    assert transcript_search_text(EVENTS).splitlines() == [
        "You answer refunds.",
        "Where is order A-1002?",
        "429 rate limited",
        "orders_lookup",
        "true",  # an object's values in the order of their keys: "filters" ("paid", "year")
        "2009",
        "A-1002",
        "shipped",
        "refund",
        "raw-args",
        "LookupError: no",
        "It shipped.",
        "the session closed",
    ]


def test_it_leaves_out_the_json_keys_the_model_calls_and_the_parts_events() -> None:
    text = transcript_search_text(EVENTS)
    for absent in ("order_id", "filters", "status", "carrier", "gpt-4o", "tool_calls"):
        assert absent not in text, absent
    assert "raw request words" not in text and "role" not in text
    assert "prompts/system.md" not in text and "call_1" not in text


def test_a_transcript_without_searchable_events_has_an_empty_search_text() -> None:
    assert transcript_search_text([]) == ""
    assert transcript_search_text([{"type": "model_call", "model": "m"}, {"text": "no type"}]) == ""


def test_an_objects_values_come_in_the_order_of_their_keys_whatever_order_they_were_stored_in() -> (
    None
):
    """PostgreSQL's jsonb keeps an object's keys in an order of its own: a search text derived
    from the stored events is the one derived when they were written."""
    written = [{"type": "tool_call", "name": "t", "args": {"zone": "Z9", "area": "A1"}}]
    stored = [{"args": {"area": "A1", "zone": "Z9"}, "name": "t", "type": "tool_call"}]
    assert transcript_search_text(written) == transcript_search_text(stored) == "t\nA1\nZ9"
