"""What-if replay: some cases of a settled run run again with changes while their tools answer
from the original's recording.

A replay is a queued run (``rerun_of`` the original, ``RunOptions.replay`` saying what it
changed) of the chosen cases, at the original's snapshot — or, when a commit is asked, at that
commit's, sealed as a launch seals it — with the changes applied to the agent it records and
runs (``runs.core.runoptions.replay.agent_changed``): an edited system prompt, a file of the agent
read as the system prompt, a model name, model parameters. Its workers give the backend a
``ToolReplay`` over the original's recorded tool calls (``runs.services.run_agents``): a call
that matches a recorded one returns the recorded result, any other follows the tool policy.

It is refused, nothing queued, as a re-run is (a live run, a run without a snapshot, a
re-grade, an unknown case), and for an unknown policy, a prompt file that is not a file of the
agent, a commit the project's repository does not have.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from runs.core.runoptions import RunOptions
from runs.core.runoptions.replay import (
    POLICIES,
    ReplayChanges,
    ReplayPick,
    agent_changed,
    model_before,
)
from runs.models import AgentSnapshot, CaseRow, Run
from runs.recorder import run_open
from runs.selectors.reruns import failed_case_indices
from runs.services.launch import (
    KeyedRequest,
    LaunchError,
    agent_seal,
    launch_warnings,
    run_open_once,
    sealed_run_open,
)
from runs.services.queue import START_RUN, task_enqueue
from runs.services.rerun import (
    RerunCaseNotFound,
    RerunError,
    agent_file_of,
    agent_ran,
    snapshot_to_run_again,
)

if TYPE_CHECKING:
    from runs.core.agentconfig.loader import LoadedAgent

ReplayCases = int | Sequence[int] | Literal["failed"]


class ReplayError(RerunError):
    """The run cannot be replayed as asked; nothing was queued."""


class ReplayCaseNotFound(ReplayError, RerunCaseNotFound):
    """A case to replay is not one of the run's."""


def run_replay(
    *,
    original: Run,
    cases: ReplayCases,
    changes: ReplayChanges | None = None,
    policy: str = "recorded-only",
    user: Any = None,
    idempotency_key: str = "",
    enqueue: bool = True,
) -> Run:
    """A queued replay of ``original``'s ``cases`` ("failed", one index or a list of indices)
    with ``changes``, its tools answering by ``policy``. With an ``idempotency_key``, the
    replay ``user`` already made with it instead (a double submit).
    Raises ReplayError (ReplayCaseNotFound), ConfigError or LaunchError; nothing is queued then.
    """
    changes = changes or ReplayChanges()
    asked = cases if isinstance(cases, (int, str)) else sorted(set(cases))
    body = {"cases": asked, "policy": policy, "changes": changes.model_dump(mode="json")}
    return run_open_once(
        user=user,
        key=idempotency_key,
        request=KeyedRequest("replay", ("run", original.pk), body),
        open_run=lambda idempotency: _run_replay(
            original=original,
            cases=cases,
            changes=changes,
            policy=policy,
            user=user,
            enqueue=enqueue,
            idempotency=idempotency,
        ),
    )


def _run_replay(
    *,
    original: Run,
    cases: ReplayCases,
    changes: ReplayChanges,
    policy: str,
    user: Any,
    enqueue: bool,
    idempotency: dict[str, str],
) -> Run:
    if policy not in POLICIES:
        raise ReplayError(f"unknown tool policy {policy!r}: one of {', '.join(POLICIES)}")
    if changes.prompt_text is not None and changes.prompt_file:
        raise ReplayError("give the system prompt as edited text or as a file, not both")
    snapshot_id = _snapshot_to_replay(original)
    indices = _indices_picked(original, cases)
    before = agent_ran(original, snapshot_id, error=ReplayError)
    sealed = _sealed_at(original, changes.commit) if changes.commit else None
    agent = sealed.agent if sealed is not None else before
    pick = _pick(original, agent, before, changes, policy, cases, sealed)
    agent = agent_changed(agent, pick)
    if indices[-1] >= len(agent.config.test_cases):
        raise ReplayCaseNotFound(f"the agent replayed has no case {indices[-1]}")
    options = RunOptions.of_agent(
        agent,
        indices=indices,
        repeats=1,  # the recording answered is the original's first repetition
        checkout_commit=sealed.commit if sealed else original.run_options.checkout_commit,
        agent_file=sealed.agent_file if sealed else agent_file_of(original),
        replay=pick,
    )
    opened: dict[str, Any] = {
        "source": Run.Source.DASHBOARD,
        "user": user,
        "prompt_version": original.prompt_version,
        "rerun_of": original,
        "idempotency": idempotency,
    }
    if sealed is not None and original.project is not None:
        sealed = type(sealed)(agent, sealed.commit, sealed.snapshot, sealed.agent_file)
        return sealed_run_open(
            sealed,
            project=original.project,
            options=options,
            git_ref=changes.commit,
            enqueue=enqueue,
            **opened,
        )
    return _run_open_at_snapshot(original, agent, options, snapshot_id, enqueue, opened)


def _run_open_at_snapshot(
    original: Run,
    agent: LoadedAgent,
    options: RunOptions,
    snapshot_id: int,
    enqueue: bool,
    opened: dict[str, Any],
) -> Run:
    """Open the replay at the original's snapshot (recorded at its git identity, as a re-run
    is) and enqueue its start on commit."""

    run = run_open(
        agent=agent,
        options=options,
        project=original.project,
        warnings=launch_warnings(agent),
        agent_config_path=original.agent_config_path,
        snapshot=AgentSnapshot.objects.defer("archive").get(pk=snapshot_id),
        **opened,
    )
    if enqueue:
        task_enqueue(START_RUN, run.pk)
    return run


def _pick(
    original: Run,
    agent: LoadedAgent,
    before: LoadedAgent,
    changes: ReplayChanges,
    policy: str,
    cases: ReplayCases,
    sealed: Any,
) -> ReplayPick:
    """What the replay's run stores of it: the changes as applied, and what they replaced."""
    prompt: str | None = changes.prompt_text
    if changes.prompt_file:
        prompt = _prompt_file_text(agent, changes.prompt_file)
    if prompt is not None and prompt == before.instructions and not changes.prompt_file:
        prompt = None  # the prompt editor sent back unchanged: no change
    params = changes.params.given()
    return ReplayPick.model_validate(
        {
            "of": original.pk,
            "policy": policy,
            "cases": "failed" if cases == "failed" else None,
            "prompt": prompt,
            "prompt_file": changes.prompt_file or "",
            "prompt_before": before.instructions if prompt is not None else "",
            "model": changes.model or "",
            "params": params,
            "commit": sealed.commit if sealed is not None else "",
            "commit_ref": changes.commit,
            "before": {**model_before(before), "commit": original.git_commit},
        }
    )


def _snapshot_to_replay(original: Run) -> int:
    return snapshot_to_run_again(original, error=ReplayError, verb="replay", cannot="be replayed")


def _indices_picked(original: Run, cases: ReplayCases) -> list[int]:
    """The case indices to replay (sorted), each one of the original's."""
    if cases == "failed":
        indices = failed_case_indices(run=original)
        if not indices:
            raise ReplayError(f"run {original.pk} has no failed or errored case to replay")
        return indices
    if isinstance(cases, str):
        raise ReplayError(f"say which cases to replay: 'failed' or case indices, not {cases!r}")
    wanted = sorted({cases} if isinstance(cases, int) else set(cases))
    if not wanted:
        raise ReplayError("no case chosen to replay")
    known = set(
        CaseRow.objects.filter(run=original, index__in=wanted).values_list("index", flat=True)
    )
    missing = [index for index in wanted if index not in known]
    if missing:
        raise ReplayCaseNotFound(
            f"run {original.pk} has no case of index {', '.join(map(str, missing))}"
        )
    return wanted


def _sealed_at(original: Run, commit: str) -> Any:
    """The original's project's agent at ``commit``, sealed as a launch at that ref is."""
    if original.project is None:
        raise ReplayError(
            f"run {original.pk} has no project: its agent cannot be read at commit {commit!r}"
        )
    try:
        return agent_seal(
            project=original.project, git_ref=commit, parallel=original.run_options.parallel
        )
    except LaunchError as exc:
        raise ReplayError(f"commit {commit!r}: {exc}") from exc


def _prompt_file_text(agent: LoadedAgent, name: str) -> str:
    """The text of ``name``, a file of the agent's directory (its snapshot)."""
    base = agent.base_dir.resolve()
    path = (base / name).resolve()
    if not path.is_relative_to(base) or not path.is_file():
        raise ReplayError(f"prompt file {name!r} is not a file of the agent (its snapshot)")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReplayError(f"prompt file {name!r} cannot be read as text: {exc}") from exc
