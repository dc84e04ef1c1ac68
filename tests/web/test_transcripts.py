"""A run's transcripts as stored (one row per turn, in their own table), served by the API,
exported and imported with their turns, carried by a re-grade, and deleted with their run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.core.wire.holodeck_io import load_eval_runs_bytes
from runs.core.wire.transcripts import MAX_EVENTS, TEXT_CAP, TurnTrace, transcript_size
from runs.models import CaseRow, Run, TurnRow, TurnTranscript
from runs.selectors.export import run_eval_run
from runs.services import launch
from runs.services.history import run_import
from tests.web.services_helpers import example_project
from tests.web.snapshot_helpers import run_here
from tests.web.test_api import bearer, get

pytestmark = pytest.mark.django_db(transaction=True)

INSTRUCTIONS_START = "You are the customer support assistant of Acme Outdoor."


@pytest.fixture
def ran(tmp_path: Path) -> Run:
    """The support-bot example (scripted, with tools) run in this process."""
    run = launch.run_create(project=example_project(tmp_path, "support-bot"))
    run_here(run)
    run.refresh_from_db()
    return run


def events_of(run: Run, case_name: str) -> list[list[dict[str, Any]]]:
    case = CaseRow.objects.get(run=run, name=case_name)
    turns = TurnRow.objects.filter(case=case).order_by("index")
    return [TurnTranscript.objects.get(turn=turn).events for turn in turns]


def test_each_turn_of_a_scripted_run_stores_what_its_agent_was_sent_and_did(ran: Run) -> None:
    [events] = events_of(ran, "order_shipped")

    assert [e["type"] for e in events] == [
        "system",
        "user",
        "model_call",
        "tool_call",
        "model_call",
        "assistant",
    ]
    system, user, _, tool, answer_call, answer = events
    assert system["text"].startswith(INSTRUCTIONS_START) and system["source"] == "agent.yaml"
    assert user["text"] == "Where is my order A1001?"
    assert tool["name"] == "order_status" and tool["args"] == {"order_id": "A1001"}
    turn = TurnRow.objects.get(case__run=ran, case__name="order_shipped")
    assert tool["result"] == turn.tool_invocations[0]["result"]  # what the tool returned
    assert answer["text"] == turn.response
    usage = turn.token_usage
    calls = [e for e in events if e["type"] == "model_call"]
    assert sum(c["input_tokens"] for c in calls) == usage["prompt_tokens"]
    assert sum(c["output_tokens"] for c in calls) == usage["completion_tokens"]
    assert answer_call["stop_reason"] == "stop"
    row = TurnTranscript.objects.get(turn=turn)
    assert row.run_id == ran.pk and row.size_bytes == transcript_size(row.events)


def test_only_a_cases_first_turn_holds_the_system_prompt(tmp_path: Path) -> None:
    run = launch.run_create(project=example_project(tmp_path, "convfinqa"), limit=3)
    run_here(run)

    multi = CaseRow.objects.filter(run=run, is_multi_turn=True).first()
    assert multi is not None
    turns = TurnRow.objects.filter(case=multi).order_by("index")
    types = [[e["type"] for e in TurnTranscript.objects.get(turn=t).events] for t in turns]
    assert types[0][:2] == ["system", "user"]
    assert all(kinds[0] == "user" for kinds in types[1:])


def test_the_api_serves_a_cases_transcript_with_each_model_call_priced(
    client: Client, ran: Run, viewer: User
) -> None:
    case = CaseRow.objects.get(run=ran, name="order_shipped")

    body = get(client, f"/runs/{ran.pk}/cases/{case.pk}/transcript", bearer(viewer)).json()

    assert (body["case_index"], body["case_name"], body["repetition"]) == (0, "order_shipped", 0)
    [turn] = body["turns"]
    assert turn["turn_index"] == 0 and turn["size_bytes"] > 0
    assert [e["type"] for e in turn["events"]][:2] == ["system", "user"]
    # The scripted model has no price: its calls say so rather than costing nothing.
    assert all(e["cost_usd"] is None for e in turn["events"] if e["type"] == "model_call")
    missing = get(client, f"/runs/{ran.pk}/cases/999999/transcript", bearer(viewer))
    assert missing.status_code == 404


def test_an_export_carries_the_transcripts_and_an_import_keeps_them(ran: Run) -> None:
    exported = run_eval_run(run=ran)
    data = json.loads(exported.model_dump_json()).copy()
    first = data["report"]["results"][0]
    assert first["transcript"][0]["type"] == "system"  # a single-turn case: on the case
    holodeck = exported.report.results[0].model_dump(mode="json", context={"holodeck": True})
    assert "transcript" not in holodeck  # HoloDeck's own shape leaves it out
    data["report"]["environment"] = {}  # another run, not this one again

    [loaded] = load_eval_runs_bytes(json.dumps(data).encode(), "export.json")
    imported = run_import(eval_run=loaded)

    assert events_of(imported, "order_shipped") == events_of(ran, "order_shipped")


def test_an_imported_transcript_that_is_not_one_is_dropped_and_long_texts_are_capped() -> None:
    from runs.core.wire.models import TurnResult as WireTurn

    bad = WireTurn(
        turn_index=0, input="q", passed=True, execution_time_ms=1, transcript=[{"type": "?"}]
    )
    long = WireTurn(
        turn_index=0,
        input="q",
        passed=True,
        execution_time_ms=1,
        transcript=[{"type": "user", "text": "x" * (TEXT_CAP + 10)}],
    )

    assert bad.transcript is None
    [event] = long.transcript or []
    assert len(event["text"]) == TEXT_CAP and event["truncated"] == {"text": TEXT_CAP + 10}


def test_a_turn_trace_keeps_at_most_its_bound_and_counts_the_rest() -> None:
    trace = TurnTrace()
    for index in range(MAX_EVENTS + 25):
        trace.add("assistant", text=f"part {index}")

    events = trace.finished()

    assert len(events) == MAX_EVENTS + 1
    assert events[-1] == {"type": "truncated", "events": 25}


def test_a_regrade_keeps_the_originals_transcripts(ran: Run) -> None:
    from runs.services.regrade import run_regrade_create

    regrade = run_regrade_create(original=ran, enqueue=False)
    run_here(regrade)

    assert events_of(regrade, "order_shipped") == events_of(ran, "order_shipped")


def test_pruning_a_run_deletes_its_transcripts(ran: Run) -> None:
    from datetime import timedelta

    from runs.services.retention import runs_prune

    assert TurnTranscript.objects.filter(run=ran).exists()
    runs_prune(older_than=timedelta(0), now=ran.created_at + timedelta(days=1))

    assert not TurnTranscript.objects.filter(run_id=ran.pk).exists()
