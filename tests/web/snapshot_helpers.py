"""An example project whose verdicts show which prompt file a run read: a code grader reads
``prompts/system.md`` beside it when it grades, and fails every turn once the prompt says it was
edited after the launch. A run from its snapshot passes it; a run that read the project's
directory after the edit would not."""

from __future__ import annotations

from pathlib import Path

from runs.models import AgentProject, CaseRow, Run
from tests.web.services_helpers import example_project

EDIT_MARK = "EDITED AFTER LAUNCH"

PROMPT_CHECK = f"""\
from pathlib import Path

PROMPT = Path(__file__).resolve().parent.parent / "prompts" / "system.md"


def prompt_as_launched(ctx):
    return {EDIT_MARK!r} not in PROMPT.read_text()
"""


def prompt_checked_project(tmp_path: Path) -> AgentProject:
    project = example_project(tmp_path)
    directory = Path(project.directory)
    (directory / "graders" / "prompt_check.py").write_text(PROMPT_CHECK)
    text = project.agent_path.read_text()
    metric = (
        "    - {type: code, name: prompt_as_launched,\n"
        "       grader: graders.prompt_check:prompt_as_launched}\n"
    )
    project.agent_path.write_text(
        text.replace("      threshold: 0.75\n", f"      threshold: 0.75\n{metric}", 1)
    )
    return project


def edit_prompt(directory: Path) -> None:
    prompt = directory / "prompts" / "system.md"
    prompt.write_text(f"{prompt.read_text()}\n{EDIT_MARK}: answer in French.\n")


def verdicts(run: Run) -> list[tuple[str, str, list[str]]]:
    """(name, outcome, turn outcomes) of every case of the run, in order."""
    return [
        (case.name, case.outcome, [turn.outcome for turn in case.turns.order_by("index")])
        for case in CaseRow.objects.filter(run=run).order_by("index")
    ]


def metric_outcomes(run: Run, name: str) -> set[str]:
    from runs.models import MetricRow

    return set(
        MetricRow.objects.filter(run=run, metric_name=name).values_list("outcome", flat=True)
    )


def run_here(run: Run) -> None:
    """Run a queued run's cases in this process, as a worker's tasks would."""
    from runs.services import execution

    execution.run_start(run_id=run.pk)
    for case in CaseRow.objects.filter(run=run).order_by("index"):
        execution.case_execute(case_id=case.pk)
