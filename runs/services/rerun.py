"""Re-run some cases of a settled run: one case, or its failed ones, as a new run at the
original's snapshot.

A re-run is an ordinary queued run (``rerun_of`` the original) that runs the original's files
(its ``AgentSnapshot``), whatever the project's directory holds now, with the original's launch
options (parallel, repeats) but only the chosen cases. It is recorded at the original's git
identity (commit, branch, ref, dirty, subject): it ran that commit's files. Its cases go through
the workers like any launch's.

Only a run with a snapshot can be re-run: an imported run, or one from before snapshots, has
no record of its files to run again; a re-grade never called the agent (its original's cases
are the ones to re-run).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from runs.core.agentconfig.errors import ConfigError, ConfigProblem
from runs.core.agentconfig.loader import load_agent
from runs.core.runoptions import RERUN_FAILED, RerunPick, RunOptions
from runs.core.runoptions.replay import agent_changed
from runs.core.sealing import SnapshotError
from runs.models import AgentSnapshot, CaseRow, Run
from runs.recorder import run_open
from runs.selectors.reruns import failed_case_indices
from runs.services.launch import KeyedRequest, LaunchError, launch_warnings, run_open_once
from runs.services.queue import START_RUN, task_enqueue
from runs.services.snapshots import snapshot_unpacked

if TYPE_CHECKING:
    from runs.core.agentconfig.loader import LoadedAgent

RerunCases = int | Literal["failed"]


class RerunError(LaunchError):
    """The run cannot be re-run as asked (still live, no snapshot, nothing failed); nothing
    was queued."""


class RerunCaseNotFound(RerunError):
    """The case to re-run is not one of the run's."""


def run_rerun(
    *,
    original: Run,
    cases: RerunCases,
    user: Any = None,
    idempotency_key: str = "",
    enqueue: bool = True,
) -> Run:
    """A queued re-run of ``original``'s ``cases`` ("failed": every case any repetition of
    which failed or errored; an int: the case of that index) at its snapshot. With an
    ``idempotency_key``, the run ``user`` already created with it for this re-run instead (a
    double submit; ``run_open_once``).
    Raises RerunError (RerunCaseNotFound) or ConfigError; nothing is queued then."""
    return run_open_once(
        user=user,
        key=idempotency_key,
        request=KeyedRequest("re-run", ("run", original.pk), {"cases": cases}),
        open_run=lambda idempotency: _run_rerun(
            original=original, cases=cases, user=user, enqueue=enqueue, idempotency=idempotency
        ),
    )


def _run_rerun(
    *, original: Run, cases: RerunCases, user: Any, enqueue: bool, idempotency: dict[str, str]
) -> Run:
    snapshot_id = _snapshot_to_rerun(original)
    indices, name = _indices_picked(original, cases)
    agent = agent_ran(original, snapshot_id, error=RerunError)
    # A replay is re-run as it ran: with its changes, its tools answering from its recording.
    replayed = original.run_options.replay
    if indices[-1] >= len(agent.config.test_cases):
        raise RerunError(f"run {original.pk}'s snapshot has no case {indices[-1]}")
    options = RunOptions.of_agent(
        agent,
        indices=indices,
        repeats=original.repeats,
        limit=None,
        case_filter="",
        checkout_commit=original.run_options.checkout_commit,
        agent_file=agent_file_of(original),
        **({"replay": replayed} if replayed is not None else {}),
        # What the re-run's page says it re-ran (selectors.reruns).
        rerun=RerunPick(of=original.pk, case=indices[0], name=name)
        if isinstance(cases, int)
        else RerunPick(of=original.pk, cases=RERUN_FAILED),
    )
    run = run_open(
        agent=agent,
        options=options,
        source=Run.Source.DASHBOARD,
        project=original.project,
        user=user,
        warnings=launch_warnings(agent),
        agent_config_path=original.agent_config_path,
        prompt_version=original.prompt_version,
        rerun_of=original,
        snapshot=AgentSnapshot.objects.defer("archive").get(pk=snapshot_id),
        idempotency=idempotency,
    )
    if enqueue:
        task_enqueue(START_RUN, run.pk)
    return run


def _snapshot_to_rerun(original: Run) -> int:
    return snapshot_to_run_again(
        original, error=RerunError, verb="re-run", cannot="be run again as it was"
    )


def snapshot_to_run_again(original: Run, *, error: type[RerunError], verb: str, cannot: str) -> int:
    """The id of the snapshot ``original`` ran, to run its cases again (``verb``: "re-run",
    "replay"); ``error``, saying why, when it cannot be run again at all."""
    if original.is_live:
        raise error(f"run {original.pk} has not ended yet: {verb} its cases once it has")
    if original.source == Run.Source.REGRADE:
        raise error(
            f"run {original.pk} is a re-grade: it never called the agent, so {verb} the cases "
            "of the run whose transcripts it graded"
        )
    if original.snapshot_id is None:
        raise error(
            f"run {original.pk} has no snapshot of the files it ran ("
            + ("an imported run" if original.source == Run.Source.IMPORT else "an older run")
            + f"), so it cannot {cannot}: launch its project instead"
        )
    return original.snapshot_id


def _indices_picked(original: Run, cases: RerunCases) -> tuple[list[int], str]:
    """The case indices to re-run, and the name of the case when it is one."""
    if not isinstance(cases, int):
        indices = failed_case_indices(run=original)
        if not indices:
            raise RerunError(f"run {original.pk} has no failed or errored case to re-run")
        return indices, ""
    name = CaseRow.objects.filter(run=original, index=cases).values_list("name", flat=True).first()
    if name is None:
        raise RerunCaseNotFound(f"run {original.pk} has no case of index {cases}")
    return [cases], name


def agent_file_of(original: Run) -> str:
    """The agent.yaml's path inside the original's snapshot (a CLI run's: beside its files)."""
    if original.run_options.agent_file:
        return original.run_options.agent_file
    if original.project is not None:
        return Path(original.project.agent_file).as_posix()
    return Path(original.agent_config_path).name or "agent.yaml"


def agent_ran(original: Run, snapshot_id: int, *, error: type[RerunError]) -> LoadedAgent:
    """The agent ``original`` ran, loaded from its snapshot's files as a worker loads it, with
    its replay's changes when it was a replay; ``error`` when the snapshot cannot be unpacked."""

    try:
        directory = snapshot_unpacked(snapshot_id=snapshot_id)
    except SnapshotError as exc:
        raise error(f"run {original.pk}'s snapshot cannot be unpacked: {exc}") from exc
    agent_file = agent_file_of(original)
    try:
        agent = load_agent(directory / agent_file, parallel_override=original.run_options.parallel)
    except FileNotFoundError as exc:
        raise ConfigError([ConfigProblem(agent_file, None, None, "", str(exc))]) from exc
    replayed = original.run_options.replay
    return agent_changed(agent, replayed) if replayed is not None else agent
