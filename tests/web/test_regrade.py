"""Re-grading a stored run with another agent.yaml, without calling the agent."""

from __future__ import annotations

import importlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.core.management import call_command
from django.test import Client

from runs.models import CaseRow, Run, TurnRow
from runs.services.execution import run_execute_inline
from runs.services.regrade import run_regrade_create
from runs.services.tokens import token_create
from tests.web.factories import make_user
from tests.web.services_helpers import example_project, git

pytestmark = pytest.mark.django_db(transaction=True)

BREVITY = """\
def short(ctx):
    return len(ctx.agent_response) <= 6
"""


def stricter_copy(project_dir: Path, target: Path) -> Path:
    """The example with exact numbers (no tolerance) and a new code grader for short answers."""
    shutil.copytree(project_dir, target, ignore=shutil.ignore_patterns("results"))
    return make_stricter(target)


def make_stricter(target: Path) -> Path:
    """``stricter_copy``'s changes, made in ``target`` itself; its agent.yaml."""
    (target / "graders" / "brevity.py").write_text(BREVITY)
    agent = target / "agent.yaml"
    text = agent.read_text()
    text = text.replace("absolute_tolerance: 0.0001", "absolute_tolerance: 0.0")
    text = text.replace("relative_tolerance: 0.005", "relative_tolerance: 0.0")
    text = text.replace(
        "      threshold: 0.75\n",
        "      threshold: 0.75\n    - {type: code, name: brevity, grader: graders.brevity:short}\n",
        1,
    )
    agent.write_text(text)
    return agent


def cli_run(agent: Path) -> Run:
    with pytest.raises(SystemExit):
        call_command("run_agent", str(agent), "--quiet", "--no-results-file")
    return Run.objects.filter(source=Run.Source.CLI).order_by("-pk").first()  # type: ignore[return-value]


def outcomes(run: Run) -> dict[tuple[str, int], str]:
    rows = TurnRow.objects.filter(run=run).values_list("case__name", "index", "outcome")
    return {(name, index): outcome for name, index, outcome in rows}


def test_a_regrade_applies_the_new_agent_yaml_to_the_stored_transcripts_without_the_agent(
    tmp_path: Path,
) -> None:
    project = example_project(tmp_path)
    original = cli_run(project.agent_path)
    strict = stricter_copy(Path(project.directory), tmp_path / "strict")
    fresh = cli_run(strict)  # the same deterministic agent, run with the stricter config

    with mock.patch(
        "runs.core.backends.scripted.ScriptedBackend.__init__",
        side_effect=AssertionError("a re-grade must not call the agent"),
    ):
        regrade = run_execute_inline(
            run_id=run_regrade_create(original=original, agent_path=strict, enqueue=False).pk
        )
    assert regrade.regrade_of_id == original.pk and regrade.source == Run.Source.REGRADE
    assert regrade.status in (Run.Status.PASSED, Run.Status.FAILED)
    # Graded exactly as a fresh run with the new config: the scripted agent is deterministic.
    assert outcomes(regrade) == outcomes(fresh)
    changed = {key for key, value in outcomes(regrade).items() if outcomes(original)[key] != value}
    assert changed  # the new config changes verdicts
    names = set(TurnRow.objects.filter(run=regrade).values_list("metrics__metric_name", flat=True))
    assert "brevity" in names
    # Transcripts are the original's.
    before = TurnRow.objects.filter(run=original).order_by("case__index", "index")
    after = TurnRow.objects.filter(run=regrade).order_by("case__index", "index")
    assert [(t.response, t.tool_invocations) for t in before] == [
        (t.response, t.tool_invocations) for t in after
    ]


def test_the_compare_of_a_regrade_shows_exactly_the_changed_turns(
    tmp_path: Path, client: Client
) -> None:
    project = example_project(tmp_path)
    original = cli_run(project.agent_path)
    strict = stricter_copy(Path(project.directory), tmp_path / "strict")
    regrade = run_execute_inline(
        run_id=run_regrade_create(original=original, agent_path=strict, enqueue=False).pk
    )
    client.force_login(make_user("viewer"))
    context: Any = client.get("/compare/", {"runs": str(regrade.pk)}).context
    assert context["baseline"].run.pk == original.pk  # a re-grade's baseline is its original
    assert "re-grades" in context["baseline"].rule
    marked = {
        (view.row.key, mark.index)
        for view in context["rows"]
        for mark in view.cells[1].turns
        if mark.change
    }
    before, after = outcomes(original), outcomes(regrade)
    verdict_changed = {
        key
        for key in before
        if (before[key] == "passed") != (after[key] == "passed")
        and "skipped" not in (before[key], after[key])
    }
    assert marked == verdict_changed and marked


def test_a_turn_whose_input_changed_is_not_regradable(tmp_path: Path) -> None:
    project = example_project(tmp_path)
    original = cli_run(project.agent_path)
    agent = project.agent_path
    agent.write_text(agent.read_text().replace("and in 2008?", "and in 2007?", 1))
    regrade = run_execute_inline(run_id=run_regrade_create(original=original, enqueue=False).pk)
    turn = TurnRow.objects.get(run=regrade, case__name="northwind_operating_cash", index=1)
    assert turn.skipped and turn.errors[0].startswith("not re-gradable: turn 2's input")  # index 1
    assert not CaseRow.objects.get(pk=turn.case_id).passed


def test_the_regrade_command_grades_in_process_and_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = example_project(tmp_path)
    original = cli_run(project.agent_path)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        call_command("regrade", str(original.pk))
    out = capsys.readouterr().out
    assert exited.value.code == 1  # the example's deliberately failing case fails again
    assert f"re-grade of run {original.pk}" in out and "2/3 test cases passed" in out
    with pytest.raises(SystemExit) as exited:
        call_command("regrade", "999999")
    assert exited.value.code == 2


# --- a re-grade at another commit says what it is --------------------------------------------


@dataclass(frozen=True)
class AtAnotherCommit:
    original: Run
    regrade: Run
    first: str  # the commit the original ran (its transcripts')
    strict: str  # the commit of the ref "strict" the re-grade graded with


@pytest.fixture
def at_another_commit(tmp_path: Path) -> AtAnotherCommit:
    """Run #N at the first commit of a repository, re-graded with the agent.yaml of a second
    commit (the ref ``strict``) that changed only the grading."""
    project = example_project(tmp_path)
    directory = Path(project.directory)
    git(directory, "init", "-q", "-b", "main")
    git(directory, "add", ".")
    git(directory, "commit", "-q", "-m", "first")
    first = git(directory, "rev-parse", "HEAD")
    original = cli_run(project.agent_path)
    make_stricter(directory)
    git(directory, "add", ".")
    git(directory, "commit", "-q", "-m", "stricter grading")
    git(directory, "tag", "strict")
    strict = git(directory, "rev-parse", "HEAD")
    created = run_regrade_create(original=original, git_ref="strict", enqueue=False)
    regrade = run_execute_inline(run_id=created.pk)
    return AtAnotherCommit(original, regrade, first, strict)


def test_a_regrade_at_another_commit_is_recorded_at_its_transcripts_commit(
    at_another_commit: AtAnotherCommit,
) -> None:
    original, regrade = at_another_commit.original, at_another_commit.regrade
    first, strict = at_another_commit.first, at_another_commit.strict
    assert original.git_commit == first and first != strict

    assert (regrade.git_commit, regrade.git_branch, regrade.git_dirty) == (first, "main", False)
    sources = regrade.regrade
    assert sources is not None and sources.of == original.pk
    assert original.snapshot is not None and regrade.snapshot is not None
    assert sources.transcripts.model_dump() == {
        "run": original.pk,
        "commit": first,
        "branch": "main",
        "snapshot": original.snapshot.digest,
    }
    grading = sources.grading
    assert (grading.ref, grading.commit, grading.snapshot) == (
        "strict",
        strict,
        regrade.snapshot.digest,
    )
    assert grading.agent_path.endswith("agent.yaml")
    assert regrade.snapshot.digest != original.snapshot.digest
    assert sources.text == (
        f"transcripts: run #{original.pk} (commit {first[:8]}, snapshot "
        f"{original.snapshot.digest[:12]}) · graded with: strict (commit {strict[:8]}, "
        f"snapshot {regrade.snapshot.digest[:12]})"
    )
    assert sources.headline == f"re-grade of #{original.pk} with strict"


def test_the_runs_list_the_home_page_and_the_run_page_mark_the_regrade(
    at_another_commit: AtAnotherCommit, client: Client
) -> None:
    original, regrade = at_another_commit.original, at_another_commit.regrade
    client.force_login(make_user("viewer"))

    listed = client.get("/runs/").text
    row = next(row for row in listed.split("<tr>") if f'value="{regrade.pk}"' in row)
    assert f'data-regrade-of="{original.pk}"' in row
    assert f"re-grade of #{original.pk}</span>" in row
    # Never among the runs of the grading commit.
    of_strict = client.get("/runs/", {"commit": at_another_commit.strict}).text
    assert f'value="{regrade.pk}"' not in of_strict
    home = client.get("/").text
    assert f'data-regrade-of="{original.pk}"' in home and f"re-grade of #{original.pk}" in home

    page = client.get(f"/runs/{regrade.pk}/").text
    header = page.split('class="meta regrade-sources"', 1)[1].split("</p>", 1)[0]
    assert f"transcripts from run #{original.pk} at commit" in header
    assert at_another_commit.first[:8] in header
    assert 'graded with the agent.yaml at <span class="mono">strict</span>' in header
    assert at_another_commit.strict[:8] in header


def test_trends_draw_the_regrade_beside_its_transcripts_run_not_among_the_grading_commit(
    at_another_commit: AtAnotherCommit, client: Client
) -> None:
    original, regrade = at_another_commit.original, at_another_commit.regrade
    client.force_login(make_user("viewer"))
    assert original.project_id is not None

    context: Any = client.get("/trends/", {"project": original.project_id}).context
    assert [run.id for run in context["runs"]] == [original.pk]
    assert all(run.commit != at_another_commit.strict for run in context["runs"])
    (point,) = context["chart"].regrade_points
    (drawn,) = context["chart"].points
    assert point.run.id == regrade.pk and point.run.transcripts_run == original.pk
    assert drawn.run.id == original.pk and drawn.x < point.x < drawn.x + 10
    assert [(run.id, beside.id) for run, beside in context["regrades"]] == [
        (regrade.pk, original.pk)
    ]


def test_the_compare_headline_says_regrade_of_n_with_the_ref(
    at_another_commit: AtAnotherCommit, client: Client
) -> None:
    original, regrade = at_another_commit.original, at_another_commit.regrade
    viewer = make_user("viewer")
    client.force_login(viewer)

    html = client.get("/compare/", {"runs": f"{original.pk},{regrade.pk}"}).text
    headline = html.split('<table class="grid headline">', 1)[1].split("</thead>", 1)[0]
    assert f"re-grade of #{original.pk} with strict" in headline

    _, secret = token_create(user=viewer, name="ci")
    response = client.get(
        "/api/v1/compare",
        {"runs": [original.pk, regrade.pk]},
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 200, response.content
    headlines = {h["run_id"]: h for h in response.json()["headline"]}
    expected = {
        "regrade_of": original.pk,
        "graded_with": "strict",
        "grading_commit": at_another_commit.strict,
        "transcripts_run": original.pk,
        "git_commit": at_another_commit.first,
    }
    assert {key: headlines[regrade.pk][key] for key in expected} == expected
    assert headlines[original.pk]["regrade_of"] is None


def test_a_regrade_of_a_regrade_keeps_the_transcripts_of_the_first_run(
    at_another_commit: AtAnotherCommit,
) -> None:
    original, regrade = at_another_commit.original, at_another_commit.regrade

    again = run_regrade_create(original=regrade, enqueue=False)  # the working tree (HEAD)

    sources = again.regrade
    assert sources is not None and sources.of == regrade.pk
    assert again.git_commit == at_another_commit.first
    assert regrade.regrade is not None and sources.transcripts == regrade.regrade.transcripts
    assert sources.transcripts.run == original.pk
    assert (sources.grading.ref, sources.grading.commit) == ("", at_another_commit.strict)
    assert sources.headline == f"re-grade of #{regrade.pk} with the working tree"


def test_the_migration_moves_earlier_regrades_to_their_transcripts_commit() -> None:
    from django.apps import apps

    from tests.web.factories import RunSpec, build_run

    migration = importlib.import_module("runs.migrations.0010_run_regrade_sources")
    first, grading, later = "a" * 40, "b" * 40, "c" * 40
    original = build_run(None, RunSpec(cases=1, turns=1, git_commit=first))
    # Re-grades as they were recorded before: at the commit they were graded at.
    old = build_run(None, RunSpec(cases=1, turns=1, git_commit=grading), git_ref="v2")
    older = build_run(None, RunSpec(cases=1, turns=1, git_commit=later))
    Run.objects.filter(pk=old.pk).update(
        source=Run.Source.REGRADE, regrade_of=original, git_branch="", agent_config_path="/a.yaml"
    )
    Run.objects.filter(pk=older.pk).update(source=Run.Source.REGRADE, regrade_of=old)

    migration.record_sources(apps, None)

    old.refresh_from_db()
    older.refresh_from_db()
    assert (old.git_commit, old.git_ref, old.git_branch) == (first, "", "main")
    assert old.regrade is not None and old.regrade.transcripts.run == original.pk
    grading_source = old.regrade.grading
    assert (grading_source.commit, grading_source.ref, grading_source.agent_path) == (
        grading,
        "v2",
        "/a.yaml",
    )
    assert older.git_commit == first and older.regrade is not None
    assert (older.regrade.of, older.regrade.transcripts.run) == (old.pk, original.pk)
    assert older.regrade.grading.commit == later
    original.refresh_from_db()
    assert original.regrade_sources == {} and original.git_commit == first


def cancelled_mid_case(project: Any, *, case_index: int, after_turns: int) -> Run:
    """A dashboard run of ``project`` cancelled for real while its case ``case_index`` runs,
    once that case has written ``after_turns`` turns: that case stops ("cancelled · stopped",
    its later turns skipped) and the cases after it never start."""
    from runs import recorder
    from runs.services.launch import run_cancel, run_create

    real = recorder.turns_append
    written: dict[int, int] = {}

    def append_then_cancel(case: CaseRow, attempt: int, turns: Any) -> bool:
        written[case.index] = written.get(case.index, 0) + len(turns)
        if case.index == case_index and written[case.index] >= after_turns:
            run_cancel(run=Run.objects.get(pk=run.pk))
        return real(case, attempt, turns)

    with (
        mock.patch("runs.recorder.events.turns_append", append_then_cancel),
        mock.patch("runs.services.execution.TURN_WRITE_SECONDS", 0),  # each turn written alone
        mock.patch("runs.services.launch.task_enqueue"),  # run here, not by a worker
    ):
        run = run_create(project=project, user=None)
        run_execute_inline(run_id=run.pk)
    return Run.objects.get(pk=run.pk)


def test_a_regrade_of_a_cancelled_run_with_the_same_agent_yaml_reads_as_its_original(
    tmp_path: Path,
) -> None:
    from runs.compare.gate import gate_evaluate
    from runs.compare.reads.comparison import Baseline, compare_runs
    from runs.core.writers.gate_markdown import GateOptions

    original = cancelled_mid_case(example_project(tmp_path), case_index=1, after_turns=2)
    stopped = original.cases.get(index=1)
    assert stopped.status == CaseRow.Status.CANCELLED and stopped.outcome == "cancelled"
    assert list(stopped.turns.order_by("index").values_list("outcome", flat=True))[2:] == [
        "skipped"
    ]
    assert original.cases.get(index=2).started_at is None  # never ran

    regrade = run_execute_inline(run_id=run_regrade_create(original=original, enqueue=False).pk)

    # The run page: the same status, counts and summary; the stopped case stays stopped.
    assert regrade.status == original.status == Run.Status.CANCELLED
    assert regrade.summary["cases"] == original.summary["cases"]
    assert regrade.summary["turns"] == original.summary["turns"]
    assert (regrade.pass_rate, regrade.failed_cases, regrade.cases_done) == (
        original.pass_rate,
        original.failed_cases,
        original.cases_done,
    )
    case_outcomes = "index", "status", "outcome"
    assert list(regrade.cases.order_by("index").values_list(*case_outcomes)) == list(
        original.cases.order_by("index").values_list(*case_outcomes)
    )
    # Compare (every filter reads the rows): no row differs, nothing regressed or fixed.
    comparison = compare_runs([original, regrade], original, [])
    assert all(len(set(row.cells.values())) == 1 for row in comparison.matrix.rows)
    assert comparison.matrix.totals(regrade.pk) == (0, 0)
    # The gate: what it says of the re-grade is what it says of the original.
    baseline = Baseline(run=original, rule="the run it re-grades", added=False)
    gated = gate_evaluate(regrade, baseline, GateOptions())
    assert (gated.regressions, gated.fixes, gated.regressed) == (0, 0, [])
    assert gated.run.summary.cases == gated.baseline.summary.cases


def test_a_case_never_fails_on_a_regrade_when_none_of_its_turns_failed(tmp_path: Path) -> None:
    original = cancelled_mid_case(example_project(tmp_path), case_index=0, after_turns=1)
    regrade = run_execute_inline(run_id=run_regrade_create(original=original, enqueue=False).pk)
    # The stopped case (one turn passed, the rest skipped) is re-graded stopped, not failed.
    stopped = regrade.cases.get(index=0)
    assert set(stopped.turns.values_list("outcome", flat=True)) == {"passed", "skipped"}
    assert stopped.outcome == "cancelled"
    for case in regrade.cases.all():
        turns = set(case.turns.values_list("outcome", flat=True))
        if case.outcome == "failed":
            assert turns & {"failed", "error"}, case.name
