"""Re-grade a finished run: a new run holding the original's transcripts, graded with the
current agent.yaml (or the one at a git ref), without calling the agent.

The re-grade is an ordinary run (source ``regrade``, ``regrade_of`` the original): the grading
agent directory (at the ref, or the agent.yaml given) is sealed into a snapshot like a launch's,
and the re-grade runs from that snapshot; its cases go through the workers like any run's (LLM
judges included, with progress, recovery and cancel), and it compares with its original like
any two runs.

It is recorded at its transcripts' commit (the original's git identity), with the agent.yaml it
grades with (ref, commit, path, snapshot) recorded apart (``Run.regrade``): trends, the runs
list and compare mark it as a re-grade and never count it among the grading commit's runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from runs.core.runoptions import CaseEntry, RunOptions
from runs.models import AgentProject, CaseRow, Run, TurnRow
from runs.services.launch import (
    KeyedRequest,
    LaunchError,
    agent_seal,
    run_open_once,
    sealed_run_open,
)
from runs.services.projects import project_register

GRADED = (Run.Status.PASSED, Run.Status.FAILED, Run.Status.ERROR, Run.Status.CANCELLED)
REGRADE_PARALLEL = 4


def run_regrade_create(
    *,
    original: Run,
    user: Any = None,
    git_ref: str = "",
    agent_path: Path | None = None,
    enqueue: bool = True,
    idempotency_key: str = "",
) -> Run:
    """A queued re-grade of ``original`` with its project's agent.yaml (at ``git_ref``), or
    the agent.yaml at ``agent_path``. With an ``idempotency_key``, the run ``user`` already
    created with it for this re-grade instead (a double submit; ``run_open_once``). Raises
    ConfigError or LaunchError; nothing is queued then.
    """
    options = {"git_ref": git_ref.strip(), "agent_path": str(agent_path or "")}
    return run_open_once(
        user=user,
        key=idempotency_key,
        request=KeyedRequest("re-grade", ("run", original.pk), options),
        open_run=lambda idempotency: _run_regrade_create(
            original=original,
            user=user,
            git_ref=git_ref,
            agent_path=agent_path,
            enqueue=enqueue,
            idempotency=idempotency,
        ),
    )


def _run_regrade_create(
    *,
    original: Run,
    user: Any,
    git_ref: str,
    agent_path: Path | None,
    enqueue: bool,
    idempotency: dict[str, str],
) -> Run:
    project = _grading_project(original, agent_path)
    sealed = agent_seal(project=project, git_ref=git_ref)
    if not _cases_that_ran(original).exists():
        raise LaunchError(
            f"run {original.pk} has no case that ran to re-grade"
            + (
                " (it was cancelled before any did)"
                if original.status == Run.Status.CANCELLED
                else ""
            )
        )
    cases = _cases_of(original)
    launched = original.run_options
    options = RunOptions(
        # No agent is called: only judges bound a re-grade, so more cases may be in flight.
        parallel=max(sealed.agent.parallel_test_cases, REGRADE_PARALLEL),
        case_indices=[case[0] for case in cases],
        cases=cases,
        repeats=original.repeats,
        # Partial as its original was (a limit, a filter), or because some of its cases never
        # ran (a cancel): Run.partial_text counts against the original's agent.yaml.
        limit=launched.limit,
        case_filter=launched.case_filter,
        config_cases=(
            original.total_cases if launched.config_cases is None else launched.config_cases
        ),
        checkout_commit=sealed.commit,
        agent_file=sealed.agent_file,
    )
    return sealed_run_open(
        sealed,
        project=project,
        options=options,
        # Where the grading agent.yaml was read; the recorder keeps the run at its transcripts'.
        git_ref=git_ref,
        enqueue=enqueue,
        source=Run.Source.REGRADE,
        user=user,
        prompt_version=original.prompt_version,
        regrade_of=original,
        idempotency=idempotency,
    )


def _grading_project(original: Run, agent_path: Path | None) -> AgentProject:
    """The project whose agent.yaml grades ``original`` (``agent_path``'s, registered, or its
    own); LaunchError when it cannot be re-graded."""
    if original.status not in GRADED or original.is_stopping:
        raise LaunchError(f"run {original.pk} has not ended yet: re-grade it once it has")
    if agent_path is not None:
        return project_register(agent_path=agent_path)
    if original.project is None:
        raise LaunchError(
            f"run {original.pk} has no project (an imported run): give the agent.yaml to "
            "grade it with (manage.py regrade RUN --agent PATH)"
        )
    return original.project


def _cases_of(original: Run) -> list[CaseEntry]:
    """One entry per case of the original (its repetitions, if it was repeated, are re-graded
    each); those it never ran are carried over as it settled them (recorder.run_open)."""
    rows = original.cases.order_by("index", "repetition").values_list(
        "index", "name", "is_multi_turn", "turn_count"
    )
    return list({index: (index, name, multi, turns) for index, name, multi, turns in rows}.values())


def _cases_that_ran(original: Run) -> QuerySet[CaseRow]:
    """The cases of ``original`` a re-grade grades: those with a transcript — done, or
    cancelled after some of their turns were written; a case cancelled before it started (or
    one that errored before any turn) has nothing to grade and is left out of the re-grade."""
    ran = TurnRow.objects.filter(case=OuterRef("pk"))
    return (
        CaseRow.objects.filter(
            run=original, status__in=[CaseRow.Status.DONE, CaseRow.Status.CANCELLED]
        )
        .filter(Exists(ran))
        .order_by("index", "repetition")
    )
