"""A model call's full request, as a run stores it and the dashboard shows it: put back together
from the case's transcripts, the request of a 4-turn case's last call equals what the fake
OpenAI server received (through the real semantic-kernel code path, a worker's case task and
the recorder); the transcript offers it behind "show the full request", copyable as JSON; the
side by side of two runs says what the request changed."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import CaseRow, Run, TurnRow
from runs.selectors.model_requests import model_requests_of_turn
from runs.services import launch
from runs.services.projects import project_register
from tests.core.backends.agent_files import TOOLS_PY
from tests.core.backends.fake_llm_servers import FakeOpenAI
from tests.web.snapshot_helpers import run_here
from tests.web.test_api import bearer, get

pytestmark = pytest.mark.django_db(transaction=True)

QUESTIONS = [f"please subtract 181001 from 206588 (turn {n})" for n in range(1, 5)]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


def sk_run(tmp_path: Path, fake: FakeOpenAI, instructions: str, name: str = "calc") -> Run:
    """A 4-turn case of an OpenAI agent (a tool call per turn) run as a worker runs it."""
    root = tmp_path / name
    root.mkdir()
    (root / "tools.py").write_text(TOOLS_PY)
    turns = "".join(f"\n          - input: {q!r}" for q in QUESTIONS)
    (root / "agent.yaml").write_text(
        textwrap.dedent(f"""\
        name: {name}
        model:
          provider: openai
          name: gpt-4o-mini
          temperature: 0
          endpoint: {fake.url}/v1
          api_key: test-key-not-secret
        instructions:
          inline: {json.dumps(instructions)}
        tools:
          - type: function
            name: subtract
            description: Subtract b from a
            file: tools.py
            function: subtract
        test_cases:
          - name: four turns
            turns:""")
        + turns
        + "\n"
    )
    run = launch.run_create(project=project_register(agent_path=root / "agent.yaml"))
    run_here(run)
    run.refresh_from_db()
    return run


def test_the_fourth_turns_stored_requests_equal_what_the_server_received(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    run = sk_run(tmp_path, fake, "You are a careful calculator.")
    case = CaseRow.objects.get(run=run)

    stored = [
        found.body
        for index in range(4)
        for found in model_requests_of_turn(run_id=run.pk, case_id=case.pk, index=index)
    ]
    received = [exchange.body for exchange in fake.requests_to("/chat/completions")]

    assert len(stored) == len(received) == 8
    assert stored == received
    last = stored[-1]
    assert [m["content"] for m in last["messages"] if m["role"] == "user"] == QUESTIONS
    assert last["tools"][0]["function"]["parameters"]["required"] == ["a", "b"]


def test_the_transcript_offers_the_full_request_and_serves_it_copyable_as_json(
    client: Client, viewer: User, tmp_path: Path, fake: FakeOpenAI
) -> None:
    run = sk_run(tmp_path, fake, "You are a careful calculator.")
    case = CaseRow.objects.get(run=run)
    client.force_login(viewer)

    transcript = client.get(f"/runs/{run.pk}/cases/{case.pk}/transcript/?turn=3").content.decode()
    url = f"/runs/{run.pk}/cases/{case.pk}/request/?turn=3&amp;call=1"
    assert "show the full request" in transcript and url in transcript
    page = client.get(url.replace("&amp;", "&"))

    assert page.status_code == 200
    html = page.content.decode()
    assert "Copy the request as JSON" in html
    for question in QUESTIONS:
        assert question in html
    assert "tools-subtract" in html and "temperature" in html
    assert client.get(f"/runs/{run.pk}/cases/{case.pk}/request/?turn=3&call=9").status_code == 404
    assert client.get(f"/runs/{run.pk}/cases/{case.pk}/request/?turn=x").status_code == 400


def test_the_side_by_side_shows_the_prompt_lines_the_request_changed(
    client: Client, viewer: User, tmp_path: Path, fake: FakeOpenAI
) -> None:
    before = sk_run(tmp_path, fake, "You are a careful calculator.\nBe brief.", name="a")
    after = sk_run(tmp_path, fake, "You are a careful calculator.\nShow your work.", name="b")
    cases = [CaseRow.objects.get(run=run).pk for run in (before, after)]
    client.force_login(viewer)

    html = client.get(f"/compare/transcript/?a={cases[0]}&b={cases[1]}&turn=2").content.decode()

    assert "What the request changed" in html
    assert "<del>- Be brief.</del>" in html and "<ins>+ Show your work.</ins>" in html
    assert "+1 −1 lines" in html
    same = client.get(f"/compare/transcript/?a={cases[0]}&b={cases[0]}&turn=2").content.decode()
    assert "the same system prompt, tools and parameters" in same
    assert TurnRow.objects.filter(case_id=cases[1]).count() == 4


def test_the_api_serves_each_model_calls_request_whole_when_asked(
    client: Client, viewer: User, tmp_path: Path, fake: FakeOpenAI
) -> None:
    run = sk_run(tmp_path, fake, "You are a careful calculator.")
    case = CaseRow.objects.get(run=run)
    url = f"/runs/{run.pk}/cases/{case.pk}/transcript"
    received = [exchange.body for exchange in fake.requests_to("/chat/completions")]
    token = bearer(viewer)

    full = get(client, url, token, requests="full").json()
    stored = get(client, url, token).json()

    calls = [e for turn in full["turns"] for e in turn["events"] if e["type"] == "model_call"]
    assert [call["request"]["body"] for call in calls] == received
    assert {call["request"]["format"] for call in calls} == {"openai"}
    refs = [e for turn in stored["turns"] for e in turn["events"] if e["type"] == "model_call"]
    assert refs[-1]["request"]["messages"]["keep"] == 14  # by reference, as stored
    assert get(client, url, token, requests="all").status_code == 422
