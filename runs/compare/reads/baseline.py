"""Which run a compare is against: ``baseline_choose`` (the baseline rule, 0–2 queries and one
git call) and ``runs_for_compare`` (the runs asked for, 1 query)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.db.models import QuerySet

from runs.core import gitutil
from runs.core.verdicts.outcomes import RUN_FINISHED_STATES
from runs.models import Run

# A baseline is a run that ended with its cases graded: finished, but not cancelled.
FINISHED = tuple(state for state in RUN_FINISHED_STATES if state != Run.Status.CANCELLED)
# Columns the compare page never reads.
HEAVY_RUN_FIELDS = ("raw_yaml", "environment", "cli_args", "options")


@dataclass(frozen=True)
class Baseline:
    run: Run
    rule: str  # how it was chosen, said on the page
    added: bool  # not among the runs asked for: found by the rule and added


class NoBaseline(Exception):
    """A lone run with no earlier run to compare it with; ``later``: the next run of its project
    (or agent), when there is one (the run is the earliest), else None (it is the only run)."""

    def __init__(self, run: Run, later: Run | None = None) -> None:
        if later is None:
            message = f"run {run.pk} has no other run to compare it with"
        else:
            message = (
                f"run {run.pk} is the earliest run: there is no earlier run to compare it with "
                f"(the next one is run {later.pk})"
            )
        super().__init__(message)
        self.run = run
        self.later = later


def runs_for_compare(run_ids: list[int]) -> list[Run]:
    """The runs in the order asked, with their project (1 query)."""
    runs = Run.objects.select_related("project").defer(*HEAVY_RUN_FIELDS).filter(pk__in=run_ids)
    by_id = {run.pk: run for run in runs}
    return [by_id[run_id] for run_id in run_ids if run_id in by_id]


def baseline_choose(runs: list[Run], *, chosen: int | None = None) -> Baseline | None:
    """The baseline for comparing ``runs`` (the newest of them is the subject).

    ``chosen``: the user's pick among the runs. A re-grade's baseline is the run it re-grades.
    Otherwise, among the other runs asked for (or,
    when only one run was asked for, among every run of its project or agent): the latest
    finished run of the parent commit of the subject's commit (found with git in the project's
    repository); else the latest earlier finished run of the same project and branch; else the
    run just before the subject. Re-grades are no runs of a commit or branch (their commit is
    their transcripts'): those two rules pass them over.
    """
    if chosen is not None:
        picked = next((run for run in runs if run.pk == chosen), None)
        if picked is not None:
            return Baseline(picked, "chosen by you", added=False)
    if not runs:
        return None
    subject = max(runs, key=lambda run: (run.created_at, run.pk))
    others = [run for run in runs if run.pk != subject.pk]
    if subject.regrade_of_id is not None:
        original = next((run for run in others if run.pk == subject.regrade_of_id), None)
        if original is None and not others:
            found = runs_for_compare([subject.regrade_of_id])
            original = found[0] if found else None
        if original is not None:
            return Baseline(original, "the run it re-grades", added=not others)
    pool = others or _siblings(subject)
    added = not others
    of_commits = [run for run in pool if not _is_regrade(run)]
    parent = _parent_commit(subject)
    if parent:
        match = _latest(
            run for run in of_commits if run.git_commit == parent and run.status in FINISHED
        )
        if match is not None:
            rule = f"the latest finished run of the parent commit {parent[:8]}"
            return Baseline(match, rule, added)
    earlier = [run for run in pool if (run.created_at, run.pk) < (subject.created_at, subject.pk)]
    match = _latest(
        run
        for run in earlier
        if not _is_regrade(run)
        and run.status in FINISHED
        and run.git_branch == subject.git_branch
        and _same_project(run, subject)
    )
    if match is not None:
        if subject.git_branch:
            rule = f"the latest earlier finished run of {subject.git_branch}"
        else:
            rule = "the latest earlier finished run without a branch, as this one has none"
        return Baseline(match, rule, added)
    match = _latest(earlier) or (_latest(pool) if others else None)
    if match is not None:
        return Baseline(match, "the run before it", added)
    return None


def _is_regrade(run: Run) -> bool:
    # The sources outlive the original (regrade_of is cleared when it is deleted).
    return run.regrade_of_id is not None or bool(run.regrade_sources)


def _siblings(subject: Run) -> list[Run]:
    """Other runs of the subject's project (or agent, for imported runs) (1 query)."""
    runs = _others_of_project(subject).select_related("project")
    return list(runs.order_by("-created_at", "-id")[:500])


def next_run(subject: Run) -> Run | None:
    """The run of the subject's project (or agent) made just after it, if any (1 query)."""
    runs = _others_of_project(subject)
    later = runs.filter(created_at__gt=subject.created_at) | runs.filter(
        created_at=subject.created_at, pk__gt=subject.pk
    )
    return later.order_by("created_at", "id").first()


def _others_of_project(subject: Run) -> QuerySet[Run]:
    """The other runs of the subject's project (or agent, for imported runs)."""
    runs = Run.objects.defer(*HEAVY_RUN_FIELDS).exclude(pk=subject.pk)
    if subject.project_id:
        return runs.filter(project_id=subject.project_id)
    return runs.filter(project__isnull=True, agent_name=subject.agent_name)


def _parent_commit(run: Run) -> str | None:
    if not run.git_commit or run.project is None:
        return None
    return gitutil.parent_commit(Path(run.project.directory), run.git_commit)


def _latest(runs: object) -> Run | None:
    found = list(runs)  # type: ignore[call-overload]
    return max(found, key=lambda run: (run.created_at, run.pk)) if found else None


def _same_project(a: Run, b: Run) -> bool:
    if a.project_id or b.project_id:
        return a.project_id == b.project_id
    return a.agent_name == b.agent_name
