"""Retention: delete old finished runs in small transactions, and the snapshots they freed.

``manage.py prune_runs`` and the workers' sweeper (HOLODECK_RETENTION_DAYS) call
:func:`runs_prune`. A run is deleted when it was created before the cutoff, is finished (never
queued or running), is not kept (``Run.keep``), and is not among its project's newest
``keep_last`` runs.

Runs go in batches bounded by their number and by the cases and turns they hold (the runs'
own counters), one transaction each: its metrics, turns and cases are deleted child-first, then
the runs. A batch is short, so the dashboard and the workers (SQLite has one writer at a time)
wait at most one batch; and a batch is whole, so a run is never left with half its cases (the
run's ``keep`` and status are read again, under a row lock on PostgreSQL, inside the batch).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.db.models.deletion import ProtectedError
from django.utils import timezone

from runs.models import (
    AgentProject,
    AgentSnapshot,
    CaseRow,
    MetricRow,
    Run,
    TurnRow,
    TurnTranscript,
)
from runs.review_models import Review, ReviewChange

log = logging.getLogger(__name__)

BATCH_RUNS = 200
# Rows of cases plus turns one batch may delete (a batch holds at least one run whatever its size).
BATCH_ROWS = 5_000


@dataclass
class PruneCounts:
    runs: int = 0
    cases: int = 0
    turns: int = 0
    metrics: int = 0
    snapshots: int = 0

    def add(self, other: PruneCounts) -> None:
        self.runs += other.runs
        self.cases += other.cases
        self.turns += other.turns
        self.metrics += other.metrics
        self.snapshots += other.snapshots


def run_keep_set(*, run: Run, keep: bool) -> Run:
    """Keep a run from retention (or let it go again); one UPDATE of that column only."""
    Run.objects.filter(pk=run.pk).update(keep=keep)
    run.keep = keep
    return run


def runs_prune(
    *,
    older_than: timedelta,
    keep_last: int = 0,
    project: AgentProject | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
) -> PruneCounts:
    """Delete (or, with ``dry_run``, count) the runs retention removes; returns the counts."""
    cutoff = (now or timezone.now()) - older_than
    counts = PruneCounts()
    freed: set[int] = set()
    pruned = Q(pk__in=[])  # the dry run's candidates of every group
    for group in _project_groups(project):
        candidates = prunable_runs(cutoff=cutoff, keep_last=keep_last, group=group)
        if dry_run:
            counts.add(_count(candidates))
            freed.update(_snapshot_ids(candidates))
            pruned |= Q(pk__in=candidates.values("pk"))
            continue
        while batch := _next_batch(candidates):
            batch_counts, snapshot_ids = _delete_batch(batch)
            if not batch_counts.runs:
                break  # every run of the batch changed meanwhile (kept, re-queued): stop here
            counts.add(batch_counts)
            freed.update(snapshot_ids)
    if dry_run:
        # A snapshot goes when every run that uses it goes.
        staying = Run.objects.exclude(pruned).filter(snapshot_id__in=freed)
        counts.snapshots = len(freed - set(staying.values_list("snapshot_id", flat=True)))
    else:
        counts.snapshots = _snapshots_delete(freed)
    return counts


# A group of runs keep_last counts in: one project's, or the runs of no project (imports).
Group = int | None


def _project_groups(project: AgentProject | None) -> list[Group]:
    if project is not None:
        return [project.pk]
    ids = list(AgentProject.objects.order_by("pk").values_list("pk", flat=True))
    return [*ids, None]


def prunable_runs(*, cutoff: datetime, keep_last: int, group: Group) -> QuerySet[Run]:
    in_group = Q(project_id=group) if group is not None else Q(project__isnull=True)
    runs = Run.objects.filter(in_group)
    candidates = runs.filter(created_at__lt=cutoff, keep=False).exclude(status__in=Run.ACTIVE)
    if keep_last:
        newest = runs.order_by("-created_at", "-id").values("pk")[:keep_last]
        candidates = candidates.exclude(pk__in=newest)
    return candidates.order_by()


def _count(candidates: QuerySet[Run]) -> PruneCounts:
    ids = candidates.values("pk")
    return PruneCounts(
        runs=candidates.count(),
        cases=CaseRow.objects.filter(run_id__in=ids).count(),
        turns=TurnRow.objects.filter(run_id__in=ids).count(),
        metrics=MetricRow.objects.filter(run_id__in=ids).count(),
    )


def _snapshot_ids(candidates: QuerySet[Run]) -> set[int]:
    return set(
        candidates.exclude(snapshot__isnull=True).values_list("snapshot_id", flat=True).distinct()
    )


def _next_batch(candidates: QuerySet[Run]) -> list[int]:
    """The oldest candidates, as many as BATCH_RUNS and BATCH_ROWS allow (at least one)."""
    rows = candidates.order_by("created_at", "pk").values_list("pk", "total_cases", "total_turns")
    batch: list[int] = []
    size = 0
    for pk, cases, turns in rows[:BATCH_RUNS]:
        size += cases + turns
        if batch and size > BATCH_ROWS:
            break
        batch.append(pk)
    return batch


def runs_delete(*, runs: QuerySet[Run]) -> PruneCounts:
    """Delete the finished runs among ``runs``, kept ones too (someone asked for these, e.g.
    removing a project with its runs), in retention's batches, and the snapshots they freed."""
    candidates = runs.exclude(status__in=Run.ACTIVE).order_by()
    counts = PruneCounts()
    freed: set[int] = set()
    while batch := _next_batch(candidates):
        batch_counts, snapshot_ids = _delete_batch(batch, kept_too=True)
        if not batch_counts.runs:
            break
        counts.add(batch_counts)
        freed.update(snapshot_ids)
    counts.snapshots = _snapshots_delete(freed)
    return counts


def _delete_batch(ids: list[int], *, kept_too: bool = False) -> tuple[PruneCounts, set[int]]:
    with transaction.atomic():
        # Read again inside the transaction: a run kept or re-queued since is left alone.
        locked = Run.objects.select_for_update().filter(pk__in=ids).exclude(status__in=Run.ACTIVE)
        if not kept_too:
            locked = locked.filter(keep=False)
        rows = list(locked.values_list("pk", "snapshot_id"))
        run_ids = [pk for pk, _ in rows]
        if not run_ids:
            return PruneCounts(), set()
        # Child first, one DELETE each, no signal connected to these models: the one use of
        # Django's private ``_raw_delete``, on purpose. The public ``QuerySet.delete()`` runs the
        # collector, which loads every turn, case and run row to cascade and deletes them 100
        # at a time: for a batch of 1,000 cases, 4,000 turns and 12,000 metrics (SQLite, even
        # with ``.only("pk")``) it took 940 ms, 67 queries and 3.6 MB; these 5 DELETEs, 64 ms
        # (7 with the runs' reviews and their history).
        using = Run.objects.db
        # People's reviews of these runs go with them (their history first); a later run's
        # review confirmed from one of them keeps its own fields, only the link goes.
        Review.objects.filter(carried_from__run_id__in=run_ids).update(carried_from=None)
        ReviewChange.objects.filter(review__run_id__in=run_ids)._raw_delete(using)
        Review.objects.filter(run_id__in=run_ids)._raw_delete(using)
        metrics = MetricRow.objects.filter(run_id__in=run_ids)._raw_delete(using)
        TurnTranscript.objects.filter(run_id__in=run_ids)._raw_delete(using)
        turns = TurnRow.objects.filter(run_id__in=run_ids)._raw_delete(using)
        cases = CaseRow.objects.filter(run_id__in=run_ids)._raw_delete(using)
        # Re-grades of these runs keep their own rows; only their link goes (SET_NULL).
        Run.objects.filter(regrade_of_id__in=run_ids).update(regrade_of=None)
        Run.objects.filter(rerun_of_id__in=run_ids).update(rerun_of=None)
        deleted = Run.objects.filter(pk__in=run_ids)._raw_delete(using)
    counts = PruneCounts(runs=deleted, cases=cases, turns=turns, metrics=metrics)
    return counts, {snapshot for _, snapshot in rows if snapshot is not None}


def _snapshots_delete(snapshot_ids: set[int]) -> int:
    """Delete the snapshots among ``snapshot_ids`` that no run uses any more."""
    deleted = 0
    for snapshot_id in sorted(snapshot_ids):
        try:
            with transaction.atomic():
                # defer: the archive (tens of MB) is never read to delete its row.
                _, by_model = (
                    AgentSnapshot.objects.filter(pk=snapshot_id, runs__isnull=True)
                    .defer("archive", "manifest")
                    .delete()
                )
            deleted += by_model.get(AgentSnapshot._meta.label, 0)
        except (ProtectedError, IntegrityError):
            log.info("snapshot %s is used by a run launched meanwhile: kept", snapshot_id)
    return deleted
