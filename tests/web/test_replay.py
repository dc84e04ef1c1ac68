"""What-if replay of a settled run's cases (the service, the run, case and compare pages, the
form and the API), on the example agent run by the workers' path (eager Celery)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.core.runoptions import ReplayChanges
from runs.core.wire.transcripts import EDITED_PROMPT_SOURCE
from runs.models import AgentProject, Run, TurnRow
from runs.services import launch
from runs.services.replay import ReplayCaseNotFound, ReplayError, run_replay
from runs.services.rerun import run_rerun
from runs.services.tokens import token_create
from tests.web.factories import RunSpec, build_run, make_user
from tests.web.services_helpers import example_project, git
from tests.web.snapshot_helpers import verdicts

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/v1/runs"
ADDED = "Always show your working."
# The example's tools, made to raise: a replay whose tools run live fails where they are called.
RAISING = """
def _down(*args, **kwargs):
    raise RuntimeError("the filing database is down")


lookup = add = subtract = multiply = divide = greater = exp = _down
"""


@pytest.fixture
def project(tmp_path: Path, eager_celery: None) -> AgentProject:
    """The example agent in a git repository of its own (one commit)."""
    project = example_project(tmp_path)
    directory = Path(project.directory)
    git(directory, "init", "-q", "-b", "main")
    git(directory, "add", "-A")
    git(directory, "commit", "-qm", "the example")
    return project


@pytest.fixture
def original(project: AgentProject) -> Run:
    """A settled run of the example: two cases pass, one fails."""
    run = launch.run_create(project=project)  # eager: run here, to the end
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and (run.passed_cases, run.failed_cases) == (2, 1)
    return run


def system_event(run: Run) -> dict[str, Any]:
    """The system prompt event of the run's first case's transcript."""
    from runs.models import TurnTranscript

    turn = TurnRow.objects.filter(run=run).order_by("case__index", "index").first()
    assert turn is not None
    events = TurnTranscript.objects.get(turn=turn).events
    return next(event for event in events if event["type"] == "system")


def prompt_of(run: Run) -> str:
    """The system prompt the run's first case was given."""
    return str(system_event(run)["text"])


def tool_errors(run: Run) -> list[str]:
    return [
        call["error"]
        for calls in TurnRow.objects.filter(run=run).values_list("tool_invocations", flat=True)
        for call in calls
        if call.get("error")
    ]


# --- the service ------------------------------------------------------------------------------


def test_a_replay_of_the_failed_cases_with_an_edited_prompt_and_model_is_a_linked_run(
    original: Run,
) -> None:
    prompt = prompt_of(original)
    lead = make_user("lead", staff=True)

    replay = run_replay(
        original=original,
        cases="failed",
        changes=ReplayChanges(prompt_text=f"{prompt}{ADDED}\n", model="scripted-next"),
        user=lead,
    )
    replay.refresh_from_db()

    assert replay.rerun_of_id == original.pk and replay.created_by == lead
    assert replay.snapshot_id == original.snapshot_id
    assert replay.git_commit == original.git_commit
    pick = replay.run_options.replay
    assert pick is not None and (pick.of, pick.policy, pick.cases) == (
        original.pk,
        "recorded-only",
        "failed",
    )
    assert pick.changes() == [
        "system prompt edited (+1 −0 lines)",
        "model scripted-convfinqa → scripted-next",
    ]
    # What it recorded and what it ran are the edited agent.
    assert replay.config_snapshot["model"]["name"] == "scripted-next"
    assert replay.config_snapshot["instructions"] == {"inline": f"{prompt}{ADDED}\n"}
    assert prompt_of(replay) == f"{prompt}{ADDED}\n"
    # Its transcript says where that prompt came from: the edit, not a file of the agent.
    assert system_event(replay)["source"] == EDITED_PROMPT_SOURCE
    assert system_event(original)["source"] != EDITED_PROMPT_SOURCE
    # Every call matched the recording: the verdicts are the original's for the failed case.
    assert replay.status == Run.Status.FAILED
    assert verdicts(replay) == [v for v in verdicts(original) if v[1] == "failed"]
    assert tool_errors(replay) == []
    # The edited agent was kept for the replay alone: a re-run of the same snapshot in this
    # process runs the snapshot's prompt.
    rerun = run_rerun(original=original, cases="failed")
    assert prompt_of(rerun) == prompt
    # A re-run of the replay runs as the replay ran: its changes, its recording's answers.
    again = run_rerun(original=replay, cases="failed")
    assert again.run_options.replay == pick and again.rerun_of_id == replay.pk
    assert prompt_of(again) == f"{prompt}{ADDED}\n"
    assert again.config_snapshot["model"]["name"] == "scripted-next"
    assert tool_errors(again) == []


def test_recorded_only_answers_tools_that_would_raise_and_live_runs_them(
    original: Run, project: AgentProject
) -> None:
    """At a commit whose tools raise: recorded-only answers every call from the recording (the
    verdicts are the original's); live runs them (every call fails, naming the tool's error)."""
    directory = Path(project.directory)
    (directory / "tools" / "finance.py").write_text(RAISING)
    git(directory, "commit", "-qam", "the tools are down")
    head = git(directory, "rev-parse", "HEAD")

    replayed = run_replay(original=original, cases=[0, 1, 2], changes=ReplayChanges(commit=head))
    live = run_replay(
        original=original, cases=[0], changes=ReplayChanges(commit="main"), policy="live"
    )
    replayed.refresh_from_db()
    live.refresh_from_db()

    assert replayed.git_commit == head != original.git_commit
    assert replayed.snapshot_id != original.snapshot_id
    pick = replayed.run_options.replay
    assert pick is not None
    assert pick.changes() == [f"commit {original.git_commit[:7]} → {head[:7]}"]
    assert verdicts(replayed) == verdicts(original) and tool_errors(replayed) == []
    errors = tool_errors(live)
    assert errors and all("the filing database is down" in error for error in errors)
    assert live.status == Run.Status.FAILED


def test_a_prompt_file_of_the_agent_becomes_the_system_prompt(original: Run) -> None:
    replay = run_replay(
        original=original, cases=[0], changes=ReplayChanges(prompt_file="README.md")
    )
    readme = (Path(original.project.directory) / "README.md").read_text()  # type: ignore[union-attr]

    assert prompt_of(replay) == readme
    assert replay.config_snapshot["instructions"] == {"file": "README.md"}
    assert replay.run_options.replay.changes()[0].startswith(  # type: ignore[union-attr]
        "system prompt from README.md (+"
    )


def test_a_replay_that_cannot_be_made_says_why_and_queues_nothing(
    original: Run, project: AgentProject
) -> None:
    before = Run.objects.count()

    def refused(error: type[Exception], match: str, **asked: Any) -> None:
        asked.setdefault("original", original)
        asked.setdefault("cases", "failed")
        with pytest.raises(error, match=match):
            run_replay(**asked)

    refused(ReplayCaseNotFound, "no case of index 7, 9", cases=[0, 7, 9])
    refused(ReplayError, "unknown tool policy 'sometimes'", policy="sometimes")
    refused(
        ReplayError,
        "prompt file '../../etc/passwd' is not a file of the agent",
        changes=ReplayChanges(prompt_file="../../etc/passwd"),
    )
    refused(
        ReplayError,
        "prompt file 'prompts/nope.md' is not a file",
        changes=ReplayChanges(prompt_file="prompts/nope.md"),
    )
    refused(
        ReplayError,
        "commit 'no-such-ref'.*not a commit",
        changes=ReplayChanges(commit="no-such-ref"),
    )
    refused(
        ReplayError,
        "as edited text or as a file, not both",
        changes=ReplayChanges(prompt_text="x", prompt_file="README.md"),
    )
    running = build_run(project, RunSpec(status=Run.Status.RUNNING))
    refused(ReplayError, "has not ended yet", original=running)
    imported = build_run(project, source=Run.Source.IMPORT)
    refused(ReplayError, "no snapshot", original=imported)
    assert Run.objects.count() == before + 2  # the two made here, no replay


# --- the pages ----------------------------------------------------------------------------------


def test_the_form_is_prefilled_from_the_run_and_lands_on_the_side_by_side(
    original: Run, staff_client: Client
) -> None:
    url = reverse("run_replay", args=[original.pk])
    page = staff_client.get(url)
    assert page.status_code == 200
    prompt = prompt_of(original)
    assert page.context["form"].initial["prompt_text"] == prompt
    assert "prompts/system.md" in page.context["data"].prompt_files
    failed = original.cases.get(outcome="failed").index
    assert page.context["checked"] == {failed}
    assert "recorded-then-live" in page.text and "fails with an error naming it" in page.text

    posted = staff_client.post(
        url,
        {
            "cases": [str(failed)],
            "prompt_text": f"{prompt}{ADDED}\n",
            "model": "scripted-convfinqa",  # unchanged: no change
            "tools": "recorded-only",
            "idempotency_key": "form-1",
        },
    )
    replay = Run.objects.get(rerun_of=original)
    assert posted.status_code == 302
    assert posted["Location"] == f"{reverse('compare')}?runs={original.pk},{replay.pk}"
    assert replay.run_options.replay.changes() == [  # type: ignore[union-attr]
        "system prompt edited (+1 −0 lines)"
    ]

    compared = staff_client.get(posted["Location"])
    assert "is a what-if replay of" in compared.text
    assert "system prompt edited (+1 −0 lines), tools: recorded-only" in compared.text
    config = staff_client.get(reverse("compare_config"), {"runs": f"{original.pk},{replay.pk}"})
    added = [line.text for line in config.context["prompt_diff"] if line.kind == "add"]
    assert added == [f"+{ADDED}"]

    run_page = staff_client.get(reverse("run_detail", args=[replay.pk]))
    assert "replay</span> of" in run_page.text
    assert "system prompt edited (+1 −0 lines)" in run_page.text
    assert f"?runs={original.pk},{replay.pk}" in run_page.text
    original_page = staff_client.get(reverse("run_detail", args=[original.pk]))
    assert f"{url}?cases=failed" in original_page.text
    assert "What-if replay of failed cases" in original_page.text


def test_the_form_says_what_is_wrong_and_queues_nothing(
    original: Run, staff_client: Client, client: Client
) -> None:
    url = reverse("run_replay", args=[original.pk])
    nothing = staff_client.post(url, {"tools": "recorded-only", "prompt_text": "x"})
    assert nothing.status_code == 400 and "Choose at least one case." in nothing.text
    bad_ref = staff_client.post(
        url, {"cases": ["0"], "tools": "recorded-only", "commit": "no-such-ref"}
    )
    assert bad_ref.status_code == 400 and "not a commit" in bad_ref.text
    bad_policy = staff_client.post(url, {"cases": ["0"], "tools": "sometimes"})
    assert bad_policy.status_code == 400
    assert not Run.objects.filter(rerun_of=original).exists()
    client.force_login(make_user("viewer"))
    assert client.get(url).status_code == 403
    assert client.post(url, {"cases": ["0"], "tools": "live"}).status_code == 403


def test_the_form_of_a_claude_agent_with_mcp_tools_is_prefilled_from_its_run(
    project: AgentProject, staff_client: Client
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=1, failing=(1,)))
    config = {
        "model": {"provider": "anthropic", "name": "claude-sonnet-4-5"},
        "instructions": {"inline": "Be brief."},
        "tools": [{"type": "mcp", "name": "ledger"}, {"type": "function", "name": "add"}],
    }
    Run.objects.filter(pk=run.pk).update(config_snapshot=config)

    page = staff_client.get(reverse("run_replay", args=[run.pk]))

    # Its MCP tools answer from the recording as its function tools do (no warning).
    assert "called by the Claude CLI itself" not in page.text
    assert page.context["form"].initial["prompt_text"] == "Be brief."


def test_the_form_types_in_the_chosen_cases_past_those_it_lists(
    project: AgentProject, staff_client: Client
) -> None:
    run = build_run(project, RunSpec(cases=305, turns=1, failing=(2, 303)))

    page = staff_client.get(reverse("run_replay", args=[run.pk]))

    assert page.context["checked"] == {2}
    assert page.context["form"].initial["case_indices"] == "303"
    assert page.context["data"].more_cases == 5


def test_the_case_page_offers_a_replay_of_its_case(original: Run, staff_client: Client) -> None:
    case = original.cases.get(index=1)
    page = staff_client.get(reverse("case_detail", args=[original.pk, case.pk]))
    assert f"{reverse('run_replay', args=[original.pk])}?cases=1" in page.text
    form = staff_client.get(reverse("run_replay", args=[original.pk]), {"cases": "1"})
    assert form.context["checked"] == {1}


def test_a_filtered_case_list_offers_a_replay_of_the_cases_it_shows(
    original: Run, staff_client: Client
) -> None:
    run_page = reverse("run_detail", args=[original.pk])
    url = reverse("run_replay", args=[original.pk])
    assert "replay-shown" not in staff_client.get(run_page).text  # unfiltered: no selection
    listed = staff_client.get(run_page, {"q": "revenue"}, headers={"HX-Request": "true"})
    assert f'href="{url}?q=revenue&amp;"' in listed.text
    assert "What-if replay of the 1 case shown…" in listed.text

    form = staff_client.get(url, {"q": "northwind"})
    assert form.context["checked"] == {0, 1, 2}
    metric = original.cases.get(outcome="failed").index
    failing = staff_client.get(url, {"metric": "answer_numeric"})
    assert failing.context["checked"] == {metric}


# --- the API --------------------------------------------------------------------------------


def bearer(user: User) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_create(user=user, name='ci')[1]}"}


def api_replay(client: Client, run: Run, headers: dict[str, str], body: Any) -> Any:
    return client.post(
        f"{API}/{run.pk}/replay", body, content_type="application/json", headers=headers
    )


def test_the_api_replays_once_per_idempotency_key_and_says_what_changed(
    original: Run, client: Client
) -> None:
    staff = bearer(make_user("lead", staff=True))
    keyed = {**staff, "Idempotency-Key": "replay-1"}
    body = {"cases": [0], "model": "scripted-next", "params": {"temperature": 0.5}}

    created = api_replay(client, original, keyed, body)

    assert created.status_code == 201, created.content
    out = created.json()
    assert (out["replay_of"], out["rerun_of"], out["tools"]) == (
        original.pk,
        original.pk,
        "recorded-only",
    )
    assert out["changes"] == [
        "model scripted-convfinqa → scripted-next",
        "temperature default → 0.5",
    ]
    assert out["compare_url"] == f"/compare/?runs={original.pk},{out['id']}"
    repeat = api_replay(client, original, keyed, body)
    assert repeat.status_code == 200 and repeat.json()["id"] == out["id"]
    other = api_replay(client, original, keyed, {**body, "tools": "live"})
    assert other.status_code == 422


def test_the_api_refuses_a_replay_it_cannot_make_with_a_reason(
    original: Run, project: AgentProject, client: Client
) -> None:
    staff = bearer(make_user("lead", staff=True))
    missing = api_replay(client, original, staff, {"cases": [99]})
    assert missing.status_code == 404 and "no case of index 99" in missing.json()["detail"]
    imported = build_run(project, source=Run.Source.IMPORT)
    refused = api_replay(client, imported, staff, {"cases": "failed"})
    assert refused.status_code == 409 and "no snapshot" in refused.json()["detail"]
    bad_file = api_replay(client, original, staff, {"cases": [0], "prompt_file": "nope.md"})
    assert bad_file.status_code == 409 and "nope.md" in bad_file.json()["detail"]
    bodies: list[dict[str, Any]] = [
        {},
        {"cases": []},
        {"cases": "all"},
        {"cases": [0], "tools": "sometimes"},
        {"cases": [0], "prompt_file": "a\x00b"},
    ]
    for body in bodies:
        assert api_replay(client, original, staff, body).status_code == 422, body
    too_hot = {"cases": [0], "params": {"temperature": 9}}
    assert api_replay(client, original, staff, too_hot).status_code == 422
    viewer = bearer(make_user("viewer"))
    assert api_replay(client, original, viewer, {"cases": [0]}).status_code == 403
