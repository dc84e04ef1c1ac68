"""Reads of the workers' heartbeats: is any worker live, and what is each one running.

A worker's row is named ``host:pid`` after its main process, but a case's ``claimed_by``
(runs.core.owner) names the process that runs it: a prefork pool child with its own pid (and its
start time). A claim belongs to a worker when it is on the worker's host and its process is the
worker itself (solo and thread pools) or one of its children: the parent pid is read from
``/proc`` when this code runs on that host. On another host the parent cannot be read; the
claim is then given to the host's only live worker, or left unattributed when the host has
several (``manage.py workers`` lists those apart).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from runs.models import CaseRow, WorkerHeartbeat


@dataclass(frozen=True)
class RunningCase:
    run_id: int
    case_id: int
    label: str
    claimed_by: str


@dataclass
class WorkerStatus:
    name: str
    host: str
    pid: int
    concurrency: int
    queue: str
    started_at: datetime
    seen_at: datetime
    live: bool
    cases: list[RunningCase] = field(default_factory=list)


@dataclass
class WorkerOverview:
    workers: list[WorkerStatus]
    # Running cases on a host no listed worker could be matched to (see the module's text).
    unattributed: list[RunningCase]


def worker_live_cutoff() -> datetime:
    return timezone.now() - timedelta(seconds=settings.HOLODECK_WORKER_STALE_SECONDS)


def worker_live_exists() -> bool:
    """Whether any worker was seen recently (one query on the indexed ``seen_at``)."""
    return WorkerHeartbeat.objects.filter(seen_at__gte=worker_live_cutoff()).exists()


def worker_overview(*, include_stale: bool = False) -> WorkerOverview:
    """The workers (live ones, or every row) and the cases each runs now (two queries)."""
    cutoff = worker_live_cutoff()
    rows = WorkerHeartbeat.objects.all()
    if not include_stale:
        rows = rows.filter(seen_at__gte=cutoff)
    workers = [
        WorkerStatus(
            name=row.name,
            host=row.host,
            pid=row.pid,
            concurrency=row.concurrency,
            queue=row.queue,
            started_at=row.started_at,
            seen_at=row.seen_at,
            live=row.seen_at >= cutoff,
        )
        for row in rows
    ]
    unattributed: list[RunningCase] = []
    for case in _running_cases():
        owner = _owner_of(case.claimed_by, workers)
        if owner is None:
            unattributed.append(case)
        else:
            owner.cases.append(case)
    return WorkerOverview(workers=workers, unattributed=unattributed)


def _running_cases() -> list[RunningCase]:
    rows = (
        CaseRow.objects.filter(status=CaseRow.Status.RUNNING)
        .exclude(claimed_by="")
        .order_by("run_id", "index")
        .values_list("run_id", "pk", "name", "index", "claimed_by")
    )
    return [
        RunningCase(
            run_id=run_id,
            case_id=pk,
            label=name or f"case #{index}",
            claimed_by=claimed_by,
        )
        for run_id, pk, name, index, claimed_by in rows
    ]


def _owner_of(claimed_by: str, workers: list[WorkerStatus]) -> WorkerStatus | None:
    host, _, rest = claimed_by.partition(":")
    pid_text = rest.partition(":")[0]
    if not pid_text.isascii() or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    on_host = [worker for worker in workers if worker.host == host]
    for worker in on_host:
        if worker.pid == pid:
            return worker
    parent = parent_pid(pid) if host == _this_host() else None
    if parent is not None:
        return next((worker for worker in on_host if worker.pid == parent), None)
    live = [worker for worker in on_host if worker.live]
    return live[0] if len(live) == 1 else None


def parent_pid(pid: int) -> int | None:
    """The parent of a process of this host, or None when it is gone or cannot be read."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def _this_host() -> str:

    return socket.gethostname()
