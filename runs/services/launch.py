"""Launch a run from the dashboard (or the API), and cancel one.

A launch validates the agent.yaml (at a git ref when one is given), pins the run to the content
it validated (the agent.yaml text and a hash of every file the load read: ``Run.raw_yaml`` and
``Run.agent_sources``), creates the queued run with its case rows, and enqueues its start once
the transaction commits. Nothing is queued when validation fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from runs import gitutil
from runs.models import AgentProject, Run
from runs.recorder import cases_cancel_pending, run_open, run_options, run_settle
from runs.services.queue import START_RUN, task_enqueue
from runs.spec.errors import ConfigError, ConfigProblem
from runs.spec.test_cases import case_label

if TYPE_CHECKING:
    from runs.spec.loader import LoadedAgent


class LaunchError(Exception):
    """A run cannot be launched (bad git ref, no matching case, ...); nothing was queued.

    ``field`` names the launch-form field at fault, if one is.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def cases_select(
    test_cases: list[Any], *, case_filter: str = "", limit: int | None = None
) -> list[int]:
    """Indices of the cases whose label contains ``case_filter`` (case-insensitive), the first
    ``limit`` of them."""
    needle = case_filter.strip().lower()
    indices = [
        index
        for index, case in enumerate(test_cases)
        if not needle or needle in case_label(case.name, index).lower()
    ]
    return indices[:limit] if limit else indices


def run_create(
    *,
    project: AgentProject,
    user: Any = None,
    git_ref: str = "",
    parallel: int | None = None,
    limit: int | None = None,
    case_filter: str = "",
) -> Run:
    """Validate the agent (at ``git_ref`` if given), create a queued Run, enqueue on commit.

    Raises ConfigError (every problem of the agent.yaml) or LaunchError; nothing is queued then.
    """
    agent, commit = agent_load_at(project=project, git_ref=git_ref, parallel=parallel)
    ref = git_ref.strip()
    directory = Path(project.directory)
    indices = cases_select(agent.config.test_cases, case_filter=case_filter, limit=limit)
    if not indices:
        raise LaunchError(f"no test case matches the filter {case_filter!r}", field="case_filter")
    options = run_options(
        agent=agent, indices=indices, limit=limit, case_filter=case_filter, checkout_commit=commit
    )
    run = run_open(
        agent=agent,
        options=options,
        source=Run.Source.DASHBOARD,
        project=project,
        user=user,
        git=gitutil.git_info(directory),
        git_ref=ref,
        commit=commit,
        # Shown on the run page: HoloDeck fields with no effect here, judges that cannot grade.
        warnings=launch_warnings(agent),
        # A checkout is a temporary worktree: the path to show is the project's own.
        agent_config_path=str(project.agent_path),
    )
    task_enqueue(START_RUN, run.pk)
    return run


def launch_warnings(agent: LoadedAgent) -> list[str]:
    from runs.engine.metrics import judge_warnings

    return [*agent.warnings, *judge_warnings(agent)]


def agent_load_at(
    *, project: AgentProject, git_ref: str = "", parallel: int | None = None
) -> tuple[LoadedAgent, str]:
    """The project's agent, validated, at ``git_ref`` (a temporary worktree) or as it is on
    disk; and the commit it was read at ("" for the working tree).

    Raises ConfigError (every problem of the agent.yaml) or LaunchError (a bad ref).
    """
    from runs.spec.loader import load_agent

    directory = Path(project.directory)
    ref = git_ref.strip()
    commit = ""
    if ref:
        try:
            commit = gitutil.resolve_commit(directory, ref)
        except gitutil.GitError as exc:
            raise LaunchError(str(exc), field="git_ref") from exc
    try:
        with gitutil.checkout(directory, commit or None) as agent_dir:
            agent = load_agent(agent_dir / project.agent_file, parallel_override=parallel)
    except gitutil.GitError as exc:
        raise LaunchError(f"could not check out {ref}: {exc}", field="git_ref") from exc
    except FileNotFoundError as exc:
        raise ConfigError([ConfigProblem(project.agent_file, None, None, "", str(exc))]) from exc
    return agent, commit


def run_cancel(*, run: Run) -> bool:
    """Cancel a queued or running run: pending cases never start; running cases stop after
    their current turn (the rest of their turns are recorded as skipped)."""
    if not run.cancel():
        return False
    cases_cancel_pending(run)
    run_settle(run)
    return True
