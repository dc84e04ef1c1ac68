"""Opening a run: the Run, with everything it is opened with (``runs.core.runoptions.RunOptions``
validated, its idempotency key), and its case rows, in one transaction: nothing patches a run
afterwards."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Subquery
from django.utils import timezone

from runs.bulk_insert import rows_insert
from runs.core import gitutil
from runs.core.owner import process_identity
from runs.core.runoptions import RunOptions
from runs.core.verdicts.outcomes import Outcome
from runs.core.verdicts.regrades import GradingSource, RegradeSources, TranscriptSource
from runs.models import AgentSnapshot, CaseRow, Run, TurnRow
from runs.recorder.cases import pass_rate_after
from runs.selectors.costs import run_prices_warn


def run_open(
    *,
    agent: Any,
    options: RunOptions,
    source: str,
    project: Any = None,
    user: Any = None,
    git: gitutil.GitInfo | None = None,
    git_ref: str = "",
    commit: str = "",
    cli_args: Sequence[str] = (),
    warnings: Sequence[str] = (),
    agent_config_path: str = "",
    prompt_version: dict[str, Any] | None = None,
    regrade_of: Run | None = None,
    snapshot: AgentSnapshot | None = None,
    rerun_of: Run | None = None,
    idempotency: dict[str, str] | None = None,
) -> Run:
    """Create the Run and a pending row per selected case (and repetition), in one transaction.
    A dashboard run starts queued (a worker starts it), a CLI run running (this process's).
    ``warnings`` show on its page; ``agent_config_path``: the path shown for a snapshot's copy;
    ``idempotency``: its key's columns (``launch.run_open_once``); ``git``, ``git_ref``,
    ``commit``, ``regrade_of``, ``rerun_of``: its git identity. Warns when unpriced."""
    queued = source in (Run.Source.DASHBOARD, Run.Source.REGRADE)  # workers start these
    agent_path = agent_config_path or str(agent.path)
    identity, read_at = _run_identity(
        git=git, git_ref=git_ref, commit=commit, regrade_of=regrade_of, rerun_of=rerun_of
    )
    sources: dict[str, Any] = {}
    if regrade_of is not None:
        sources = regrade_sources(
            original=regrade_of, grading=read_at, agent_path=agent_path, snapshot=snapshot
        ).model_dump(mode="json")
    options = options.model_copy(update=_opened(warnings, regrade_of, owned=not queued))
    with transaction.atomic():
        run = Run.objects.create(
            project=project,
            source=source,
            status=Run.Status.QUEUED if queued else Run.Status.RUNNING,
            started_at=None if queued else timezone.now(),
            **_agent_fields(agent, agent_path),
            **identity,
            prompt_version=prompt_version,
            regrade_of=regrade_of,
            regrade_sources=sources,
            rerun_of=rerun_of,
            snapshot=snapshot,
            **options.fields(),
            cli_args=list(cli_args),
            created_by=user if getattr(user, "is_authenticated", False) else None,
            **(idempotency or {}),
            total_cases=options.total_cases,
            total_turns=options.total_turns,
        )
        _case_rows_insert(run, options)
        if regrade_of is not None:
            _regrade_carry_unrun(run, regrade_of)
    run_prices_warn(run=run, when="opened")
    return run


def _opened(warnings: Sequence[str], regrade_of: Run | None, *, owned: bool) -> dict[str, Any]:
    """The options a run is opened with besides its launch's: its agent.yaml's ``warnings``,
    the run a re-grade grades (its case tasks read the original's turns), and the process
    that runs it (a CLI run: ``owner``, its recovery checks it is alive)."""
    opened: dict[str, Any] = {"warnings": list(warnings)}
    if regrade_of is not None:
        opened["regrade_of"] = regrade_of.pk
    if owned:
        opened["owner"] = process_identity()
    return opened


def _agent_fields(agent: Any, agent_path: str) -> dict[str, Any]:
    """The run's columns that record the agent it runs (its secrets redacted)."""
    return {
        "agent_name": agent.config.name,
        "agent_config_path": agent_path,
        "config_snapshot": agent.redacted_snapshot(),
        "raw_yaml": agent.raw_yaml,
        "agent_sources": agent.sources,
    }


def _run_identity(
    *,
    git: gitutil.GitInfo | None,
    git_ref: str,
    commit: str,
    regrade_of: Run | None,
    rerun_of: Run | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's git fields, and the git fields the agent was read at (``git``, ``git_ref``,
    ``commit``). They differ for a re-grade, recorded at its transcripts' identity (its
    original's, ``runs.core.verdicts.regrades``: the grading agent.yaml's are recorded apart), and a
    re-run, which runs its original's files (its original's commit ran; a replay at another
    commit is recorded at that commit)."""
    read_at = _git_identity(git=git, git_ref=git_ref, commit=commit)
    # A replay at another commit (a ``rerun_of`` read at a ``commit``) ran that commit.
    original = regrade_of if regrade_of is not None else (None if commit else rerun_of)
    if original is not None:
        return {field: getattr(original, field) for field in GIT_FIELDS}, read_at
    return {**read_at, "git_subject": _commit_subject(git, read_at["git_commit"])}, read_at


def _case_rows_insert(run: Run, options: RunOptions) -> None:
    """A pending row per selected case and repetition: they run, and count, apart."""
    rows_insert(  # not bulk_create: 4 s of CPU for 17,747 cases (runs/bulk_insert.py)
        CaseRow,
        [
            {
                "index": index,
                "repetition": repetition,
                "name": name,
                "is_multi_turn": multi,
                "turn_count": turns,
            }
            for index, name, multi, turns in options.cases
            for repetition in range(options.repeats)
        ],
        common={"run": run},
    )


def case_rows_ensure(run: Run) -> None:
    """Create the case rows a run lacks: runs queued before case rows were made at launch
    (the one write of case rows outside ``run_open``)."""
    CaseRow.objects.bulk_create(
        [
            CaseRow(run=run, index=index, name=name, is_multi_turn=multi, turn_count=turns)
            for index, name, multi, turns in run.run_options.cases
        ],
        ignore_conflicts=True,
    )


def _regrade_carry_unrun(run: Run, original: Run) -> None:
    """A re-grade's cases that its original never ran (cancelled before they started) or that
    produced no result (errored: their worker crashed or gave up) have no whole transcript to
    grade: they are settled at once as the original settled them, so the re-grade reads as its
    original does (the same counts, the same rows in compare) and only the cases with a
    transcript go to the workers."""
    ran = TurnRow.objects.filter(case=OuterRef("pk"))
    same = CaseRow.objects.filter(
        run=original, index=OuterRef("index"), repetition=OuterRef("repetition")
    )
    pending = CaseRow.objects.filter(run=run, status=CaseRow.Status.PENDING)
    now = timezone.now()
    not_started = same.filter(status=CaseRow.Status.CANCELLED).filter(~Exists(ran))
    cancelled = pending.filter(Exists(not_started)).update(
        status=CaseRow.Status.CANCELLED, outcome=Outcome.CANCELLED.value, finished_at=now
    )
    # An errored case produced no result (the turns it may have written are not a whole
    # case): grading them would make a pass of a case that never finished.
    errored_in_original = same.filter(status=CaseRow.Status.ERROR)
    errored = pending.filter(Exists(errored_in_original)).update(
        status=CaseRow.Status.ERROR,
        outcome=Outcome.ERROR.value,
        passed=False,
        errors=Subquery(errored_in_original.values("errors")[:1]),
        finished_at=now,
    )
    if cancelled or errored:
        Run.objects.filter(pk=run.pk).update(
            cases_done=F("cases_done") + cancelled + errored,
            cancelled_cases=F("cancelled_cases") + cancelled,
            errored_cases=F("errored_cases") + errored,
            pass_rate=pass_rate_after(0, errored) if errored else F("pass_rate"),
        )


# A re-grade's git identity is its original's (its transcripts'), these fields copied.
GIT_FIELDS = ("git_ref", "git_commit", "git_branch", "git_dirty", "git_subject")


def _git_identity(*, git: gitutil.GitInfo | None, git_ref: str, commit: str) -> dict[str, Any]:
    """The git fields of a run read at ``commit`` (a ref's: its branch is the one holding the
    commit, ``gitutil.branch_of``), else at the working tree ``git`` describes (its branch and
    dirty flag then say what ran)."""
    if git is not None and commit:
        branch = gitutil.branch_of(git.root, commit, ref=git_ref, current=git.branch)
    else:
        branch = git.branch if git else ""
    return {
        "git_ref": git_ref,
        "git_commit": commit or (git.commit if git else ""),
        "git_branch": branch,
        "git_dirty": bool(git and git.dirty and not commit),
    }


def _commit_subject(git: gitutil.GitInfo | None, commit: str) -> str:
    """The subject of the commit a run was read at, shown beside it ("" outside git)."""
    return gitutil.commit_subject(git.root, commit) if git is not None else ""


def regrade_sources(
    *,
    original: Run,
    grading: dict[str, Any],
    agent_path: str,
    snapshot: AgentSnapshot | None,
) -> RegradeSources:
    """The two sources of a re-grade of ``original``: its transcripts (the run that produced
    them: ``original``, or what ``original`` re-graded when it is a re-grade itself) and the
    agent.yaml it grades with (``grading``: the git fields it was read at)."""
    earlier = original.regrade
    if earlier is not None:
        transcripts = earlier.transcripts
    else:
        digest = (
            AgentSnapshot.objects.filter(pk=original.snapshot_id)
            .values_list("digest", flat=True)
            .first()
            if original.snapshot_id is not None
            else None
        )
        transcripts = TranscriptSource(
            run=original.pk,
            commit=original.git_commit,
            branch=original.git_branch,
            snapshot=digest or "",
        )
    return RegradeSources(
        of=original.pk,
        transcripts=transcripts,
        grading=GradingSource(
            ref=grading["git_ref"],
            commit=grading["git_commit"],
            branch=grading["git_branch"],
            dirty=grading["git_dirty"],
            agent_path=agent_path,
            snapshot=snapshot.digest if snapshot is not None else "",
        ),
    )
