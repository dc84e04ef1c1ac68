"""Writes of the workers' heartbeats: each Celery worker's main process upserts its row every
HOLODECK_HEARTBEAT_SECONDS (runs/tasks.py) and deletes it when it shuts down cleanly; a worker
killed outright leaves a row that simply grows stale (runs.selectors.workers)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from runs.models import WorkerHeartbeat


@dataclass(frozen=True)
class WorkerIdentity:
    host: str
    pid: int
    concurrency: int
    queue: str
    started_at: datetime

    @property
    def name(self) -> str:
        return f"{self.host}:{self.pid}"


def worker_identity(*, concurrency: int, queue: str) -> WorkerIdentity:
    """This process as a worker, taken when asked (never at import: see runs.core.owner)."""
    return WorkerIdentity(
        host=socket.gethostname(),
        pid=os.getpid(),
        concurrency=concurrency,
        queue=queue,
        started_at=timezone.now(),
    )


def worker_heartbeat_beat(*, worker: WorkerIdentity) -> WorkerHeartbeat:
    """Upsert the worker's row with ``seen_at`` now (one UPDATE, or an INSERT the first time)."""
    row, _ = WorkerHeartbeat.objects.update_or_create(
        name=worker.name,
        defaults={
            "host": worker.host,
            "pid": worker.pid,
            "concurrency": worker.concurrency,
            "queue": worker.queue,
            "seen_at": timezone.now(),
        },
        create_defaults={
            "host": worker.host,
            "pid": worker.pid,
            "concurrency": worker.concurrency,
            "queue": worker.queue,
            "started_at": worker.started_at,
            "seen_at": timezone.now(),
        },
    )
    return row


def worker_heartbeat_delete(*, name: str) -> int:
    deleted, _ = WorkerHeartbeat.objects.filter(name=name).delete()
    return deleted
