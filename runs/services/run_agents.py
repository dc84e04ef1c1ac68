"""The agent of a run, loaded once per process: a worker's case tasks load the agent of their
run's snapshot (the files sealed at launch, unpacked once per machine into
``HOLODECK_SNAPSHOT_CACHE``) on its first case and keep it, with the backend built for it, for
the next cases of any run of that tree (the last few are kept). A run launched before
snapshots existed is loaded from its project's directory at its commit, and kept for that run
alone."""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runs.core import gitutil
from runs.core.agentconfig.loader import load_agent
from runs.core.backends.base import backend_for
from runs.core.backends.replay import ToolReplay
from runs.core.runoptions.replay import agent_changed
from runs.models import Run
from runs.selectors.replays import replay_recording
from runs.services.launch import LaunchError
from runs.services.snapshots import snapshot_digest_of, snapshot_unpacked

if TYPE_CHECKING:
    from runs.core.agentconfig.loader import LoadedAgent
    from runs.core.backends.base import AgentBackend
    from runs.core.backends.replay import ToolReplay


@dataclass
class _KeptAgent:
    agent: LoadedAgent
    # What to release when the agent is dropped: the git worktree of a run without a snapshot.
    stack: contextlib.ExitStack
    legacy_run: int | None = None  # a run without a snapshot, a replay: kept for that run only
    backend: AgentBackend | None = None  # built on the agent's first case (agent_backend)
    replay: ToolReplay | None = None  # a replay's recording, handed to its backend


# "<digest>:<agent file>:<parallel>" for runs with a snapshot (runs of one tree share it), or
# "run:<id>" for the older runs without one.
_AGENTS: OrderedDict[str, _KeptAgent] = OrderedDict()
_AGENTS_KEPT = 4
_AGENTS_LOCK = threading.Lock()


def run_agent(run: Run) -> LoadedAgent:
    """The run's agent as launched, loaded on this process's first case of its snapshot and
    kept for the others (the last few are kept)."""
    key = _agent_key(run)
    with _AGENTS_LOCK:
        cached = _AGENTS.get(key)
        if cached is not None:
            _AGENTS.move_to_end(key)
            return cached.agent
        _forget_ended_runs()
        stack = contextlib.ExitStack()
        try:
            if run.snapshot_id is None:
                kept = _KeptAgent(_agent_load_legacy(run, stack), stack, legacy_run=run.pk)
            elif run.run_options.replay is not None:
                kept = _replay_kept(run, stack)
            else:
                kept = _KeptAgent(_agent_load(run), stack)
        except BaseException:
            stack.close()
            raise
        _AGENTS[key] = kept
        while len(_AGENTS) > _AGENTS_KEPT:
            _, old = _AGENTS.popitem(last=False)
            old.stack.close()
        return kept.agent


def agent_backend(agent: LoadedAgent, run: Run | None = None) -> AgentBackend:
    """The backend for a case of ``agent`` (``run``'s): built once per kept agent, as one
    engine builds one for all the cases of a CLI run. A backend holds what the cases' sessions
    share (the scripted provider's transcript of the whole suite, built from every test case);
    each session, with whatever it holds of its event loop, is made for one case. A replay's
    backend answers its tools from the recording (``ToolReplay``)."""

    with _AGENTS_LOCK:
        kept = next((kept for kept in _AGENTS.values() if kept.agent is agent), None)
        if kept is None:  # dropped since (more runs than are kept): built for this case only
            replay = _tool_replay(run) if run is not None else None
            return backend_for(agent, **({"replay": replay} if replay is not None else {}))
        if kept.backend is None:
            given = {"replay": kept.replay} if kept.replay is not None else {}
            kept.backend = backend_for(agent, **given)
        return kept.backend


def _agent_key(run: Run) -> str:
    # A replay's agent carries its changes and its backend the run's recording: its own.
    if run.snapshot_id is None or run.run_options.replay is not None:
        return f"run:{run.pk}"
    # Looked up each time (one indexed read): a snapshot id names one digest only as long as the
    # database is the same one.
    digest = snapshot_digest_of(snapshot_id=run.snapshot_id)
    return f"{digest}:{_agent_file(run)}:{run.run_options.parallel}"


def _agent_file(run: Run) -> str:
    return run.run_options.agent_file or (run.project.agent_file if run.project else "agent.yaml")


def run_agent_forget(run_id: int) -> None:
    """Drop a run's kept agent when it was kept for that run alone (a run without a snapshot),
    removing its checkout; an agent of a snapshot stays for the next run of that tree."""
    with _AGENTS_LOCK:
        kept = _AGENTS.pop(f"run:{run_id}", None)
    if kept is not None:
        kept.stack.close()


def _forget_ended_runs() -> None:
    """Drop the agents kept for runs without a snapshot that ended since (with the lock held)."""
    legacy = {kept.legacy_run: key for key, kept in _AGENTS.items() if kept.legacy_run}
    if not legacy:
        return
    active = set(
        Run.objects.filter(pk__in=list(legacy), status__in=Run.ACTIVE).values_list("pk", flat=True)
    )
    for run_id, key in legacy.items():
        if run_id not in active:
            _AGENTS.pop(key).stack.close()


def run_agents_forget() -> None:
    """Drop every kept agent and remove their checkouts (worker shutdown, tests)."""
    with _AGENTS_LOCK:
        while _AGENTS:
            _, kept = _AGENTS.popitem()
            kept.stack.close()


def _agent_load(run: Run) -> LoadedAgent:
    """The agent of the run's snapshot, loaded from this machine's unpacked copy: relative paths
    in it (instructions, transcript, tools, graders, test cases, file inputs) resolve there."""

    assert run.snapshot_id is not None
    directory = snapshot_unpacked(snapshot_id=run.snapshot_id)
    return load_agent(directory / _agent_file(run), parallel_override=run.run_options.parallel)


def _replay_kept(run: Run, stack: contextlib.ExitStack) -> _KeptAgent:
    """A replay's agent: its snapshot's, with its changes (the system prompt, the model), kept
    for that run alone, with the recording its backend answers tools from."""

    pick = run.run_options.replay
    assert pick is not None
    agent = agent_changed(_agent_load(run), pick)
    return _KeptAgent(agent, stack, legacy_run=run.pk, replay=_tool_replay(run))


def _tool_replay(run: Run) -> ToolReplay | None:
    """The replay's recording (the original's tool calls of the run's cases, read now: a
    session is made in the event loop, where no query may run), or None for another run."""

    pick = run.run_options.replay
    if pick is None:
        return None
    indices = run.run_options.case_indices or [case[0] for case in run.run_options.cases]
    recorded = replay_recording(original_id=pick.of, indices=indices)
    return ToolReplay(lambda index: recorded.get(index, []), pick.policy)


def _agent_load_legacy(run: Run, stack: contextlib.ExitStack) -> LoadedAgent:
    """A run launched before snapshots existed: loaded from the project's directory (at its
    commit, in a temporary worktree) with the agent.yaml text it was launched with; every other
    file it read must still hash the same."""

    project = run.project
    if project is None:
        raise LaunchError("the run's project was deleted")
    commit = run.run_options.checkout_commit or None
    agent_dir = stack.enter_context(gitutil.checkout(Path(project.directory), commit))
    agent = load_agent(
        agent_dir / project.agent_file,
        text=run.raw_yaml or None,
        parallel_override=run.run_options.parallel,
    )
    changed = sorted(
        key
        for key in set(agent.sources) | set(run.agent_sources)
        if run.agent_sources and agent.sources.get(key) != run.agent_sources.get(key)
    )
    if changed:
        raise LaunchError(
            f"{', '.join(changed)} changed on disk since the run was launched; the run is "
            "pinned to the files it was launched with (launch a new run, or run a git ref)"
        )
    return agent
