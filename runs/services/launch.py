"""Launch a run from the dashboard (or the API), and cancel one.

A launch seals the agent: the agent directory as it will run (the tree of the chosen git ref's
commit, or the working tree) is packed into a snapshot (``runs.core.sealing``), unpacked into this
machine's cache, and the agent is validated from there, so what is validated is what runs. The
snapshot is stored (once per distinct tree) and the queued run, created with its case rows,
records it; its start is enqueued once the transaction commits. Nothing is queued when sealing
or validation fails.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction

from runs.core import gitutil
from runs.core.agentconfig.errors import ConfigError, ConfigProblem
from runs.core.agentconfig.limits import MAX_REPEATS
from runs.core.agentconfig.loader import collector_paused, load_agent
from runs.core.agentconfig.test_cases import case_label
from runs.core.engine.metrics import judge_warnings
from runs.core.runoptions import RunOptions
from runs.core.sealing import SnapshotError, snapshot_agent, unpack
from runs.models import AgentProject, AgentSnapshot, Run
from runs.recorder import cases_cancel_pending, run_open, run_settle
from runs.services.queue import START_RUN, task_enqueue
from runs.services.snapshots import snapshot_cache_dir, snapshot_limits, snapshot_store

if TYPE_CHECKING:
    from runs.core.agentconfig.loader import LoadedAgent


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


# An idempotency key: what a uuid4 (the form's), a ULID or a client's own token looks like.
IDEMPOTENCY_KEY_RE = re.compile(r"[A-Za-z0-9._:~-]{1,100}")


def idempotency_key_problem(key: str) -> str | None:
    """Why ``key`` cannot be an idempotency key, or None (the empty key: none given)."""
    if not key or IDEMPOTENCY_KEY_RE.fullmatch(key):
        return None
    return (
        "an idempotency key is 1 to 100 characters among letters, digits and . _ : ~ - "
        f"(got {len(key)} characters)"
    )


@dataclass(frozen=True)
class KeyedRequest:
    """What a request sent with an idempotency key asks: its ``endpoint`` ("launch", "re-run",
    "re-grade"), its ``target`` (("project", 3), ("run", 12)) and its ``options`` (the rest of
    its body). A key answers only the request it was first sent with."""

    endpoint: str
    target: tuple[str, int]
    options: dict[str, Any]

    @property
    def scope(self) -> str:
        kind, pk = self.target
        return f"{self.endpoint}:{kind}:{pk}"

    @property
    def fingerprint(self) -> str:
        body = json.dumps(self.options, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(body.encode()).hexdigest()

    def columns(self, key: str) -> dict[str, str]:
        """The run's idempotency columns for ``key`` (none without a key)."""
        if not key:
            return {}
        return {
            "idempotency_key": key,
            "idempotency_scope": self.scope,
            "idempotency_fingerprint": self.fingerprint,
        }


class IdempotencyKeyReused(LaunchError):
    """The key was first sent with another request (another endpoint, target or options)."""


def run_by_idempotency_key(*, user: Any, key: str) -> Run | None:
    """The run ``user`` already created with ``key`` (a launch, re-grade or re-run), or None."""
    if not key or not getattr(user, "is_authenticated", False):
        return None
    return Run.objects.filter(created_by=user, idempotency_key=key).first()


def _scope_text(scope: str) -> str:
    """ "re-run:run:12" as said: "a re-run of run 12"."""
    endpoint, _, target = scope.partition(":")
    return f"a {endpoint} of {target.replace(':', ' ')}" if target else "another request"


def _answer(run: Run, request: KeyedRequest) -> Run:
    """``run``, the answer to a repeat of the request that created it; IdempotencyKeyReused
    when the key comes back with another request (a run keyed before options were recorded
    is compared by its scope alone)."""
    scope = run.idempotency_scope or request.scope
    if scope != request.scope:
        said = _scope_text(scope)
    elif run.idempotency_fingerprint not in ("", request.fingerprint):
        said = f"{_scope_text(scope)} with other options"
    else:
        run.replayed = True
        return run
    raise IdempotencyKeyReused(
        f"this idempotency key was first sent with {said} (run {run.pk}), so it cannot be "
        f"used for {_scope_text(request.scope)}: send a new key with each new request",
        field="idempotency_key",
    )


def run_open_once(
    *, user: Any, key: str, request: KeyedRequest, open_run: Callable[[dict[str, str]], Run]
) -> Run:
    """``open_run(columns)`` (which opens the run with these idempotency columns,
    ``runs.recorder.run_open``) and its enqueue; when ``user`` already sent ``key`` with this
    ``request`` (a retry, a double submit), the run it created instead, marked ``replayed``.
    A key ``user`` sent with another request is an IdempotencyKeyReused.

    Two submits racing past the first look-up both seal and open a run; the unique constraint
    (created_by, idempotency_key) refuses the second's key, its whole transaction (its run,
    cases and enqueue) rolls back, and it answers with the winner. An anonymous caller (the
    CLI) has no key: the constraint cannot hold without an owner.
    """
    if problem := idempotency_key_problem(key):
        raise LaunchError(problem, field="idempotency_key")
    if not key or not getattr(user, "is_authenticated", False):
        return open_run({})
    existing = run_by_idempotency_key(user=user, key=key)
    if existing is not None:
        return _answer(existing, request)
    try:
        with transaction.atomic():
            return open_run(request.columns(key))  # enqueues on commit: never a rolled-back run
    except IntegrityError:
        winner = run_by_idempotency_key(user=user, key=key)
        if winner is None:
            raise
        return _answer(winner, request)


def run_create(
    *,
    project: AgentProject,
    user: Any = None,
    git_ref: str = "",
    parallel: int | None = None,
    limit: int | None = None,
    case_filter: str = "",
    idempotency_key: str = "",
    repeats: int | None = None,
) -> Run:
    """Validate the agent (at ``git_ref`` if given), create a queued Run, enqueue on commit;
    ``repeats``: how many times each case runs (None: the agent.yaml's ``execution.repeats``).

    With an ``idempotency_key``, the run ``user`` already launched with it is returned instead
    (``run_open_once``). Raises ConfigError (every problem of the agent.yaml) or LaunchError;
    nothing is queued then.
    """

    def open_run(idempotency: dict[str, str]) -> Run:
        with collector_paused():
            return _run_create(
                project=project,
                user=user,
                git_ref=git_ref,
                parallel=parallel,
                limit=limit,
                case_filter=case_filter,
                repeats=repeats,
                idempotency=idempotency,
            )

    options = {"git_ref": git_ref.strip(), "parallel": parallel, "limit": limit}
    options |= {"case_filter": case_filter.strip(), "repeats": repeats}
    request = KeyedRequest("launch", ("project", project.pk), options)
    return run_open_once(user=user, key=idempotency_key, request=request, open_run=open_run)


def _run_create(
    *,
    project: AgentProject,
    user: Any,
    git_ref: str,
    parallel: int | None,
    limit: int | None,
    case_filter: str,
    repeats: int | None,
    idempotency: dict[str, str],
) -> Run:
    if repeats is not None and not 1 <= repeats <= MAX_REPEATS:
        raise LaunchError(
            f"repeats must be from 1 to {MAX_REPEATS}, got {repeats}", field="repeats"
        )
    sealed = agent_seal(project=project, git_ref=git_ref, parallel=parallel)
    agent = sealed.agent
    indices = cases_select(agent.config.test_cases, case_filter=case_filter, limit=limit)
    if not indices:
        raise LaunchError(f"no test case matches the filter {case_filter!r}", field="case_filter")
    options = RunOptions.of_agent(
        agent,
        indices=indices,
        repeats=repeats,
        limit=limit,
        case_filter=case_filter,
        checkout_commit=sealed.commit,
        agent_file=sealed.agent_file,  # what a worker loads from the snapshot
    )
    return sealed_run_open(
        sealed,
        project=project,
        options=options,
        source=Run.Source.DASHBOARD,
        user=user,
        git_ref=git_ref,
        idempotency=idempotency,
    )


def sealed_run_open(
    sealed: SealedAgent,
    *,
    project: AgentProject,
    options: RunOptions,
    git_ref: str,
    enqueue: bool = True,
    **opened: Any,
) -> Run:
    """Open the run of a sealed agent of ``project`` (a launch's, a re-grade's) and enqueue
    its start on commit; ``opened``: the rest of what ``run_open`` takes."""
    run = run_open(
        agent=sealed.agent,
        options=options,
        project=project,
        git=gitutil.git_info(Path(project.directory)),
        git_ref=git_ref.strip(),
        commit=sealed.commit,
        # Shown on the run page: HoloDeck fields with no effect here, judges that cannot grade.
        warnings=launch_warnings(sealed.agent),
        # The agent was read from the snapshot cache: the path to show is the project's own.
        agent_config_path=str(project.agent_path),
        snapshot=sealed.snapshot,
        **opened,
    )
    if enqueue:
        task_enqueue(START_RUN, run.pk)
    return run


def launch_warnings(agent: LoadedAgent) -> list[str]:

    return [*agent.warnings, *judge_warnings(agent)]


@dataclass(frozen=True)
class SealedAgent:
    """The agent a launch validated, loaded from its stored snapshot's files."""

    agent: LoadedAgent
    commit: str  # the commit it was read at; "" for the working tree
    snapshot: AgentSnapshot
    agent_file: str  # the agent.yaml's path inside the snapshot


def agent_seal(
    *, project: AgentProject, git_ref: str = "", parallel: int | None = None
) -> SealedAgent:
    """Snapshot the project's agent directory (at ``git_ref``, or as it is on disk), validate
    the agent from the snapshot's files, and store the snapshot.

    Raises ConfigError (every problem of the agent.yaml) or LaunchError (a bad ref, a directory
    that cannot be snapshotted, a file the agent reads outside its directory).
    """

    directory = Path(project.directory)
    ref = git_ref.strip()
    commit = ""
    if ref:
        try:
            commit = gitutil.resolve_commit(directory, ref)
        except gitutil.GitError as exc:
            raise LaunchError(str(exc), field="git_ref") from exc
    try:
        packed = snapshot_agent(directory, commit or None, limits=snapshot_limits())
        archive = packed.to_zip()
        unpacked = unpack(archive, packed.digest, snapshot_cache_dir())
    except SnapshotError as exc:
        raise LaunchError(f"cannot snapshot the agent directory: {exc}") from exc
    agent_file = Path(project.agent_file).as_posix()
    try:
        agent = load_agent(unpacked / agent_file, parallel_override=parallel)
    except FileNotFoundError as exc:
        raise ConfigError([ConfigProblem(project.agent_file, None, None, "", str(exc))]) from exc
    _check_sealed(agent)
    snapshot = snapshot_store(packed=packed, archive=archive)
    return SealedAgent(agent=agent, commit=commit, snapshot=snapshot, agent_file=agent_file)


def _check_sealed(agent: LoadedAgent) -> None:
    """Every file the agent reads is in its snapshot: a file outside the agent directory (an
    absolute path) would be read from the disk of whichever machine runs the case."""
    outside = sorted(key for key in agent.sources if Path(key).is_absolute())
    if outside:
        raise LaunchError(
            f"{outside[0]} is outside the agent directory: a run holds only the agent "
            "directory's files (its snapshot), so copy the file into the directory and name it "
            "by a relative path"
        )


def run_cancel(*, run: Run) -> bool:
    """Cancel a queued or running run: pending cases never start; running cases stop after
    their current turn (the rest of their turns are recorded as skipped)."""
    if not run.cancel():
        return False
    cases_cancel_pending(run)
    run_settle(run)
    return True
