"""What the agent saw: a turn's transcript, loaded only when its section is opened, and two
runs' transcripts of a turn side by side."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.core.sealing import snapshot_working_tree
from runs.models import AgentProject, CaseRow, Run, TurnTranscript
from runs.services.snapshots import snapshot_store
from tests.web.factories import RunSpec, build_run, failing_case
from tests.web.services_helpers import example_project


def transcript_url(run: Run, case: CaseRow, turn: int, prefix: str = "") -> str:
    url = reverse("case_transcript", args=[run.pk, case.pk]) + f"?turn={turn}"
    return url + (f"&prefix={prefix}" if prefix else "")


@pytest.fixture
def run(project: AgentProject) -> Run:
    return build_run(project, RunSpec(cases=3, turns=3, failing=(1,), transcripts=True))


def test_an_opened_turn_shows_its_timeline_event_by_event(viewer_client: Client, run: Run) -> None:
    case = failing_case(run)
    response = viewer_client.get(transcript_url(run, case, 0))
    assert response.status_code == 200
    html = response.content.decode()
    kinds = re.findall(r'class="tx-ev tx-(\w+)', html)
    assert kinds == ["system", "user", "model_call", "tool_call", "model_call", "assistant"]
    assert "You are the refund assistant of Acme." in html
    assert "prompts/system.md" in html
    assert "gpt-4o-mini" in html and "tool_calls" in html  # model, stop reason
    assert "in 100 · out 0 · cached 40" in html
    assert "orders_lookup" in html and "&quot;order_id&quot;" in html
    assert 'style="margin-left: ' in html  # the calls' bars
    assert "data-tx-search" in html and "data-tx-copy" in html


def test_a_tool_call_links_to_its_arg_match_diff_in_the_turn(
    viewer_client: Client, run: Run
) -> None:
    case = failing_case(run)
    html = viewer_client.get(transcript_url(run, case, 1, "case-9-")).content.decode()
    assert 'href="#case-9-turn-2-call-0"' in html and "arg diff ✗" in html  # turn 2, from 1
    page = viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).content.decode()
    assert 'id="turn-2-call-0"' in page  # the failed assertion, about call 0
    assert 'id="turn-1-call-0"' in page


def test_a_cut_text_says_it_was_truncated_and_its_full_size(
    viewer_client: Client, run: Run
) -> None:
    case = failing_case(run)
    html = viewer_client.get(transcript_url(run, case, 1)).content.decode()
    assert re.search(r"truncated, [\d,]+ bytes", html)
    assert 'class="tx-ev tx-retry' in html and "429 rate limited" in html
    assert "attempt 2" in html


def test_a_turn_without_a_transcript_says_none_was_recorded(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=1, failing=()))
    case = run.cases.get(index=0)
    html = viewer_client.get(transcript_url(run, case, 0)).content.decode()
    assert "No transcript recorded for this turn" in html
    assert "tx-ev" not in html


def test_a_missing_case_or_turn_is_a_404_and_a_bad_query_a_400(
    viewer_client: Client, run: Run, project: AgentProject
) -> None:
    case = failing_case(run)
    other = build_run(project, RunSpec(cases=1, turns=1))
    assert viewer_client.get(transcript_url(other, case, 0)).status_code == 404
    assert viewer_client.get(transcript_url(run, case, 7)).status_code == 404
    url = reverse("case_transcript", args=[run.pk, case.pk])
    assert viewer_client.get(url).status_code == 400
    assert viewer_client.get(url + "?turn=0&prefix=%22%3E").status_code == 400


def test_what_the_agent_was_sent_is_shown_as_text_never_as_html(
    viewer_client: Client, two_runs: tuple[Run, Run]
) -> None:
    before, after = two_runs
    a, b = before.cases.get(index=0), after.cases.get(index=0)
    row = TurnTranscript.objects.get(turn__case=b, turn__index=0)
    hostile = "<script>alert(1)</script>"
    row.events = [{**e, "text": hostile} if "text" in e else e for e in row.events]
    row.events[3]["args"] = {"order_id": hostile}
    row.save()
    for html in (
        viewer_client.get(transcript_url(after, b, 0)).content.decode(),
        side_by_side(viewer_client, a, b),
    ):
        assert hostile not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_an_anonymous_visitor_is_sent_to_log_in(client: Client, run: Run) -> None:
    case = failing_case(run)
    for url in (transcript_url(run, case, 0), reverse("compare_transcript") + "?a=1&b=2"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_the_system_prompt_links_to_its_file_in_the_runs_snapshot(
    viewer_client: Client, tmp_path: Path
) -> None:
    project = example_project(tmp_path)
    snapshot = snapshot_store(packed=snapshot_working_tree(Path(project.directory)))
    run = build_run(project, RunSpec(cases=1, turns=1, failing=(), transcripts=True))
    case = run.cases.get()
    html = viewer_client.get(transcript_url(run, case, 0)).content.decode()
    assert "tx-source" not in html  # no snapshot: the file is named, not linked
    Run.objects.filter(pk=run.pk).update(snapshot=snapshot)
    html = viewer_client.get(transcript_url(run, case, 0)).content.decode()
    link = reverse("run_snapshot_file", args=[run.pk, "prompts/system.md"])
    assert f'class="tx-source" href="{link}"' in html


def test_the_run_and_case_pages_never_read_a_transcript(viewer_client: Client, run: Run) -> None:
    case = failing_case(run)
    pages = [
        reverse("run_detail", args=[run.pk]),
        reverse("case_detail", args=[run.pk, case.pk]),
        reverse("case_turns", args=[run.pk, case.pk]),
    ]
    for url in pages:
        with CaptureQueriesContext(connection) as captured:
            html = viewer_client.get(url).content.decode()
        table = TurnTranscript._meta.db_table
        assert not [q["sql"] for q in captured.captured_queries if table in q["sql"]], url
        if "cases" in url:  # a section per sent turn, loaded when opened
            assert html.count('class="block tx-section"') == 2  # the third turn was skipped
            assert transcript_url(run, case, 1).replace("&", "&amp;") in html


# --- side by side ----------------------------------------------------------------------------


@pytest.fixture
def two_runs(project: AgentProject) -> tuple[Run, Run]:
    before = build_run(project, RunSpec(cases=2, turns=2, failing=(), transcripts=True))
    spec = RunSpec(
        cases=2,
        turns=2,
        failing=(1,),
        transcripts=True,
        texts={"system_prompt": "You are the refund assistant of Acme.\nNever guess a total."},
    )
    after = build_run(project, spec)
    CaseRow.objects.filter(run=after, index=1).update(name="refund case 1")  # as in before
    return before, after


def side_by_side(client: Client, a: CaseRow, b: CaseRow, turn: int = 0) -> str:
    url = reverse("compare_transcript") + f"?a={a.pk}&b={b.pk}&turn={turn}"
    response = client.get(url)
    assert response.status_code == 200, response.content
    return response.content.decode()


def test_two_runs_transcripts_of_a_turn_are_aligned_with_what_changed_marked(
    viewer_client: Client, two_runs: tuple[Run, Run]
) -> None:
    before, after = two_runs
    a, b = before.cases.get(index=1), after.cases.get(index=1)
    html = side_by_side(viewer_client, a, b)
    assert "What the model was given" in html
    assert "<del>Look</del><ins>Never</ins>" in html  # the system prompt, word by word
    assert 'User message <span class="chip chip-passed">same in both runs' in html
    # system, user, call, tool, call, answer: only the system prompt differs
    assert html.count('<li class="tx-row') == 6
    assert html.count('<li class="tx-row tx-row-differs') == 1

    html = side_by_side(viewer_client, a, b, turn=1)  # failed: retried, called with other args
    given = html.split("What the request changed")[0]  # the turn's own texts (a later turn's)
    assert "What the model was given" in html and "System prompt" not in given.split("<ol")[0]
    assert f"differs: only in #{after.pk}" in html  # the retry
    assert "differs: attempt" in html
    assert "differs: arg order_id, result" in html
    assert html.count("tx-field-args tx-changed") == 2
    assert re.search(r"truncated, [\d,]+ bytes", html)
    case_page = reverse("case_detail", args=[after.pk, b.pk])
    assert f'href="{case_page}#turn-2-call-0"' in html  # its arg diff, on the case page


def test_the_side_by_side_refuses_missing_cases_and_turns(
    viewer_client: Client, two_runs: tuple[Run, Run]
) -> None:
    before, after = two_runs
    a, b = before.cases.get(index=0), after.cases.get(index=0)
    url = reverse("compare_transcript")
    assert viewer_client.get(f"{url}?a={a.pk}").status_code == 400
    assert viewer_client.get(f"{url}?a={a.pk}&b=999999").status_code == 404
    assert viewer_client.get(f"{url}?a={a.pk}&b={b.pk}&turn=5").status_code == 404


def test_the_compare_page_of_a_case_links_each_turn_to_its_transcripts_side_by_side(
    viewer_client: Client, two_runs: tuple[Run, Run]
) -> None:
    before, after = two_runs
    a, b = before.cases.get(index=1), after.cases.get(index=1)
    url = reverse("compare_case") + f"?runs={before.pk},{after.pk}&key={a.name}"
    html = viewer_client.get(url).content.decode()
    link = reverse("compare_transcript") + f"?a={a.pk}&amp;b={b.pk}&amp;turn=1"
    assert link in html
