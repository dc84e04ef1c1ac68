"""Run an agent from the command line (``manage.py run_agent``, ``manage.py gate --agent``).

The engine runs in this process. The run is stored as it goes, through the recorder (the write
path of the workers), so it lists in the dashboard like a dashboard run; storing is best effort
(``RunStore``). What the command writes is a HoloDeck result file (``cli_run_execute``'s
EvalRun), which names the stored run (``runs.core.wire.round_trip``), so importing it anywhere
the run already is is recognised.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError

from graders.result import error_text
from runs.core import gitutil
from runs.core.engine.events import emit
from runs.core.engine.executor import Engine
from runs.core.logcontext import log_context
from runs.core.runoptions import RunOptions
from runs.core.sealing import SnapshotError, snapshot_working_tree
from runs.core.wire import models as wire
from runs.core.wire.round_trip import with_identity
from runs.models import AgentProject, AgentSnapshot, Run
from runs.recorder import CaseRecorder, case_fail, run_abort, run_finish, run_open
from runs.services.history import eval_run_hash
from runs.services.launch import launch_warnings
from runs.services.snapshots import snapshot_limits, snapshot_store

if TYPE_CHECKING:
    from runs.core import gitutil
    from runs.core.agentconfig.loader import LoadedAgent

Warn = Callable[[str], None]


@dataclass(frozen=True)
class CliRun:
    """What a command-line run produced: its result file, and the store that kept it in the
    database (None when it was not stored)."""

    eval_run: wire.EvalRun
    store: RunStore | None


def cli_run_execute(
    *,
    agent: LoadedAgent,
    indices: Sequence[int],
    git: gitutil.GitInfo | None,
    cli_args: Sequence[str],
    limit: int | None = None,
    case_filter: str = "",
    store: bool = True,
    progress: Any = None,
    warn: Warn,
) -> CliRun:
    """Run the selected cases of ``agent`` in this process; ``progress`` (an event listener)
    follows it, and with ``store`` the run is stored as it goes.

    Raises what the engine raised (the backend could not start, ...): a stored run is ended as
    an error first.
    """
    run_store = (
        RunStore.open(
            agent=agent,
            indices=indices,
            limit=limit,
            case_filter=case_filter,
            git=git,
            cli_args=cli_args,
            warn=warn,
        )
        if store
        else None
    )
    listeners = [listener for listener in (progress, run_store) if listener is not None]
    stored_id = run_store.run.pk if run_store is not None and run_store.run else None
    try:
        report = _engine_run(agent, indices, listeners, stored_id=stored_id)
    except Exception as exc:
        if run_store is not None:
            run_store.fail(f"execution error: {error_text(exc)}")
        raise
    stored = run_store.run if run_store is not None else None
    eval_run = cli_eval_run(
        report=report,
        agent=agent,
        git=git,
        cli_args=cli_args,
        uid=stored.uid if stored is not None else uuid.uuid4(),
        subject=stored.git_subject if stored is not None else _subject(git),
    )
    if run_store is not None:
        run_store.close(eval_run)
    return CliRun(eval_run=eval_run, store=run_store)


def _engine_run(
    agent: LoadedAgent, indices: Sequence[int], listeners: list[Any], *, stored_id: int | None
) -> wire.TestReport:
    """Run the cases in this process, each event given to each of ``listeners`` in turn, the
    stored run's id on the lines logged meanwhile."""

    async def on_event(event: Any) -> None:
        for listener in listeners:
            await emit(listener, event)

    with log_context(run_id=stored_id):
        engine = Engine(agent, on_event=on_event)
        repeats = agent.config.execution.repeats
        return asyncio.run(engine.run(case_indices=list(indices), repeats=repeats))


def cli_eval_run(
    *,
    report: wire.TestReport,
    agent: LoadedAgent,
    git: gitutil.GitInfo | None,
    cli_args: Sequence[str],
    uid: uuid.UUID,
    subject: str = "",
) -> wire.EvalRun:
    """The HoloDeck result file of a command-line run, naming the run ``uid`` and the
    ``subject`` of its commit."""
    environment = with_identity(report.environment, uid, subject=subject)
    report = report.model_copy(update={"environment": environment})
    return wire.EvalRun(
        report=report,
        metadata=wire.EvalRunMetadata(
            agent_config=agent.redacted_snapshot(),
            prompt_version=None,
            holodeck_version=report.holodeck_version,
            cli_args=list(cli_args),
            git_commit=git.commit if git else None,
        ),
    )


def _subject(git: gitutil.GitInfo | None) -> str:
    """The subject of the commit a run not stored ran at (a stored run has it: its own)."""

    return gitutil.commit_subject(git.root, git.commit) if git is not None else ""


def cli_snapshot(*, agent: LoadedAgent, warn: Warn) -> AgentSnapshot | None:
    """The stored snapshot of the agent directory this command runs (its working tree, read
    when the run opens), or None when it cannot be taken (said through ``warn``): the command
    runs the directory itself, so the run goes on and is stored without one."""
    try:
        packed = snapshot_working_tree(agent.base_dir, limits=snapshot_limits())
    except SnapshotError as exc:
        warn(f"warning: the run is stored without a snapshot of its files: {exc}")
        return None
    return snapshot_store(packed=packed)


class RunStore:
    """Stores a command-line run as it goes, through ``runs.recorder``: the engine's event
    listener (each case's turns written when it finishes, as the workers' recorder does).

    Storing is best effort: a database that is missing, unmigrated or failing never changes the
    run's outcome or its result file; it is said once through ``warn`` and storing stops
    (``run`` becomes None).
    """

    def __init__(self, run: Run, recorder: CaseRecorder, warn: Warn) -> None:
        self.run: Run | None = run
        self.recorder = recorder
        self.warn = warn

    @classmethod
    def open(
        cls,
        *,
        agent: LoadedAgent,
        indices: Sequence[int],
        limit: int | None,
        case_filter: str,
        git: gitutil.GitInfo | None,
        cli_args: Sequence[str],
        warn: Warn,
    ) -> RunStore | None:
        """The run opened (running, owned by this process), or None when it cannot be stored."""
        try:
            project = AgentProject.objects.filter(directory=str(agent.base_dir)).first()
            snapshot = cli_snapshot(agent=agent, warn=warn)
            run = run_open(
                agent=agent,
                options=RunOptions.of_agent(
                    agent, indices=indices, limit=limit, case_filter=case_filter
                ),
                source=Run.Source.CLI,
                project=project,
                git=git,
                cli_args=cli_args,
                warnings=launch_warnings(agent),
                snapshot=snapshot,
            )
        except DatabaseError as exc:
            warn(f"warning: the run was not stored in the database: {exc}")
            return None
        return cls(run, CaseRecorder(per_turn=False, claim_in=run), warn)

    async def __call__(self, event: Any) -> None:
        if self.run is None:
            return
        try:
            await self.recorder(event)
        except DatabaseError as exc:
            self._stop(exc)

    def fail(self, error: str) -> None:
        """End the run as an error (the engine could not run it)."""
        if self.run is None:
            return
        with contextlib.suppress(DatabaseError):
            run_abort(self.run, error)

    def close(self, eval_run: wire.EvalRun) -> None:
        """Settle what the engine never finished and end the run from its rows, remembering the
        result file's hash (importing that file finds this run)."""
        if self.run is None:
            return
        by_name = {result.test_name: result for result in eval_run.report.results}
        try:
            for case, attempt in self.recorder.unsettled():
                result = by_name.get(case.name or None)
                error = result.errors[0] if result and result.errors else "execution error"
                case_fail(case, attempt, error)
            run_finish(self.run.pk, source_hash=eval_run_hash(eval_run))
        except DatabaseError as exc:
            self._stop(exc)

    def _stop(self, exc: DatabaseError) -> None:
        self.warn(f"warning: storing the run in the database failed: {exc}")
        self.run = None
