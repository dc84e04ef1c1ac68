"""Re-grading a stored run with another agent.yaml, without calling the agent."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.core.management import call_command
from django.test import Client

from runs.models import CaseResult, Run, TurnResult
from runs.services.execution import run_execute_inline
from runs.services.regrade import run_regrade_create
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db(transaction=True)

BREVITY = """\
def short(ctx):
    return len(ctx.agent_response) <= 6
"""


def stricter_copy(project_dir: Path, target: Path) -> Path:
    """The example with exact numbers (no tolerance) and a new code grader for short answers."""
    shutil.copytree(project_dir, target, ignore=shutil.ignore_patterns("results"))
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
    rows = TurnResult.objects.filter(run=run).values_list("case__name", "index", "outcome")
    return {(name, index): outcome for name, index, outcome in rows}


def test_a_regrade_applies_the_new_agent_yaml_to_the_stored_transcripts_without_the_agent(
    tmp_path: Path,
) -> None:
    project = example_project(tmp_path)
    original = cli_run(project.agent_path)
    strict = stricter_copy(Path(project.directory), tmp_path / "strict")
    fresh = cli_run(strict)  # the same deterministic agent, run with the stricter config

    with mock.patch(
        "runs.backends.scripted.ScriptedBackend.__init__",
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
    names = set(
        TurnResult.objects.filter(run=regrade).values_list("metrics__metric_name", flat=True)
    )
    assert "brevity" in names
    # Transcripts are the original's.
    before = TurnResult.objects.filter(run=original).order_by("case__index", "index")
    after = TurnResult.objects.filter(run=regrade).order_by("case__index", "index")
    assert [(t.response, t.tool_invocations) for t in before] == [
        (t.response, t.tool_invocations) for t in after
    ]


def test_the_compare_of_a_regrade_shows_exactly_the_changed_turns(
    tmp_path: Path, client: Client
) -> None:
    from tests.web.factories import make_user

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
    turn = TurnResult.objects.get(run=regrade, case__name="northwind_operating_cash", index=1)
    assert turn.skipped and turn.errors[0].startswith("not re-gradable: turn 1's input")
    assert not CaseResult.objects.get(pk=turn.case_id).passed


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
