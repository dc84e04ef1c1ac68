"""A run's commit subject (the first line of its commit's message): read with git wherever a
run's commit is recorded, copied by a re-grade, carried by our exports and shown beside the
short commit on every page that shows one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from runs.core import gitutil
from runs.core.wire.holodeck_io import dump_eval_run
from runs.core.wire.round_trip import SUBJECT_KEY
from runs.models import AgentProject, Run
from runs.selectors import run_eval_run
from runs.services import history, launch
from runs.services.regrade import run_regrade_create
from tests.compare.compare_data import three_runs
from tests.web.factories import RunSpec, build_run
from tests.web.services_helpers import example_project, git

SUBJECT = "Refunds: round to the cent — ünïcode & <b>markup</b>, kept whole in the title"


def commit(repo: Path, message: str) -> str:
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def git_project(tmp_path: Path) -> tuple[AgentProject, Path]:
    project = example_project(tmp_path)
    repo = Path(project.directory)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the example as shipped\n\nits body is not its subject")
    return project, repo


def test_a_commits_subject_is_its_first_line_cut_to_300_characters_and_empty_on_any_error(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    first = commit(repo, f"{SUBJECT}\n\nThe body says why.")
    long = commit(repo, "x" * 400)
    assert gitutil.commit_subject(repo, first) == SUBJECT
    assert gitutil.commit_subject(repo, first[:10]) == SUBJECT
    assert gitutil.commit_subject(repo, long) == "x" * 300
    assert gitutil.commit_subject(repo, "f" * 40) == ""  # a commit git does not know
    assert gitutil.commit_subject(repo, "--all") == ""
    assert gitutil.commit_subject(repo, "") == ""
    assert gitutil.commit_subject(tmp_path / "nowhere", first) == ""
    outside = tmp_path / "outside"
    outside.mkdir()
    assert gitutil.commit_subject(outside, first) == ""  # not a repository


@pytest.mark.django_db(transaction=True)
def test_launches_at_the_working_tree_and_at_a_ref_record_their_commits_subject(
    tmp_path: Path,
) -> None:
    project, repo = git_project(tmp_path)
    first = git(repo, "rev-parse", "HEAD")
    commit(repo, SUBJECT)

    current = launch.run_create(project=project, limit=1)
    past = launch.run_create(project=project, git_ref=first[:10], limit=1)
    assert Run.objects.get(pk=current.pk).git_subject == SUBJECT
    assert Run.objects.get(pk=past.pk).git_subject == "the example as shipped"


@pytest.mark.django_db(transaction=True)
def test_a_cli_run_and_its_result_file_carry_the_subject_and_a_regrade_copies_it(
    tmp_path: Path,
) -> None:
    project, repo = git_project(tmp_path)
    commit(repo, SUBJECT)
    output = tmp_path / "result.json"
    with pytest.raises(SystemExit):
        call_command("run_agent", str(project.agent_path), "--quiet", "--output", str(output))
    original = Run.objects.get(source=Run.Source.CLI)
    assert original.git_subject == SUBJECT
    assert json.loads(output.read_text())["report"]["environment"][SUBJECT_KEY] == SUBJECT

    # A re-grade is at its transcripts' commit, whatever commit its agent.yaml is read at.
    grading = commit(repo, "a stricter grader")
    regrade = run_regrade_create(original=original, enqueue=False)
    assert regrade.git_commit == original.git_commit and regrade.git_subject == SUBJECT
    assert regrade.regrade is not None and regrade.regrade.grading.commit == grading


@pytest.mark.django_db
def test_an_export_imported_elsewhere_keeps_its_subject_and_a_holodeck_file_has_none() -> None:
    run = build_run(None, RunSpec(cases=2, turns=1), git_subject=SUBJECT)
    exported = dump_eval_run(run_eval_run(run=run))
    assert json.loads(exported)["report"]["environment"][SUBJECT_KEY] == SUBJECT
    Run.objects.all().delete()  # another database: the run is not there

    upload = history.Upload("run.json", exported.encode())
    (imported,) = history.uploads_import([upload], max_unpacked_bytes=10_000_000)
    assert [run.git_subject for run in imported.imported] == [SUBJECT]

    holodeck = json.loads(exported)
    del holodeck["report"]["environment"][SUBJECT_KEY]
    holodeck["report"]["environment"].pop("holodeck_web_run")
    upload = history.Upload("holodeck.json", json.dumps(holodeck).encode())
    (plain,) = history.uploads_import([upload], max_unpacked_bytes=10_000_000)
    assert [run.git_subject for run in plain.imported] == [""]


def subject_spans(html: str) -> list[tuple[str, str]]:
    """(title, text) of each commit subject shown."""
    return re.findall(r'<span class="commit-subject" title="([^"]*)">([^<]*)</span>', html)


@pytest.mark.django_db
def test_the_run_compare_trends_and_list_pages_show_the_subject_beside_the_commit(
    viewer_client: Client, project: AgentProject
) -> None:
    data = three_runs(project)
    Run.objects.filter(pk=data.newest.pk).update(git_subject=SUBJECT)
    escaped = "Refunds: round to the cent — ünïcode &amp; &lt;b&gt;markup&lt;/b&gt;, kept whole"
    shown = (f"{escaped} in the title", f"{escaped} in the title")

    page = viewer_client.get(reverse("run_detail", args=[data.newest.pk])).text
    header = page.split('id="run-header"', 1)[1].split("</header>", 1)[0]
    assert subject_spans(header) == [shown]
    assert subject_spans(viewer_client.get(reverse("run_detail", args=[data.oldest.pk])).text) == []

    page = viewer_client.get(reverse("compare"), {"runs": data.ids}).text
    headline = page.split('class="grid headline"', 1)[1].split("</thead>", 1)[0]
    assert subject_spans(headline) == [shown]  # in the newest run's column only

    page = viewer_client.get(reverse("trends"), {"project": project.pk}).text
    assert shown in subject_spans(page.split('class="grid trend-table"', 1)[1])
    assert f"{escaped} in the title" in page.split('class="grid trend-table"', 1)[0]  # tooltip

    page = viewer_client.get(reverse("run_list")).text
    assert subject_spans(page) == [shown]


@pytest.mark.django_db
def test_the_api_gives_the_subject_of_a_run_and_of_each_compared_run(
    viewer_client: Client, project: AgentProject
) -> None:
    data = three_runs(project)
    Run.objects.filter(pk=data.middle.pk).update(git_subject=SUBJECT)
    run = viewer_client.get(f"/api/v1/runs/{data.middle.pk}").json()
    assert run["git_subject"] == SUBJECT
    listed = viewer_client.get("/api/v1/runs").json()["items"]
    assert {item["id"]: item["git_subject"] for item in listed}[data.oldest.pk] == ""
    compared = viewer_client.get("/api/v1/compare", {"runs": data.ids.split(",")}).json()
    assert [h["git_subject"] for h in compared["headline"]] == ["", SUBJECT, ""]
