"""Thin Celery tasks: take an id, call a service. Only ids travel through the broker.

Nothing imports this module but the Celery app (services enqueue by task name).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

from celery import shared_task
from celery.signals import worker_init, worker_process_shutdown, worker_ready, worker_shutdown
from django.conf import settings
from django.db import close_old_connections

from runs.core.backends.base import backends_preload
from runs.services import execution, recovery, retention, warm_sessions, workers

log = logging.getLogger(__name__)


@shared_task(acks_late=True, ignore_result=True)
def start_run(run_id: int) -> None:
    execution.run_start(run_id=run_id)


@shared_task(acks_late=True, ignore_result=True)
def execute_case(case_id: int) -> None:
    execution.case_execute(case_id=case_id)


@worker_ready.connect
def start_sweeper(**_: Any) -> None:
    """Every worker keeps runs moving when workers or messages are lost: it sweeps at start and
    then every HOLODECK_SWEEP_SECONDS (the sweeps are idempotent, several workers may run them)."""
    try:
        recovery.worktrees_prune()
    except Exception:
        log.exception("pruning leftover git worktrees failed")
    finally:
        close_old_connections()
    if not settings.HOLODECK_SWEEP_SECONDS:
        return
    threading.Thread(target=_sweep_forever, name="holodeck-sweeper", daemon=True).start()


# This worker's heartbeat (its main process): set by worker_ready, stopped by worker_shutdown.
_heartbeat_stop = threading.Event()
_heartbeat_worker: workers.WorkerIdentity | None = None


@worker_ready.connect
def start_heartbeat(sender: Any = None, **_: Any) -> None:
    """The worker's row (runs.models.WorkerHeartbeat), stamped every HOLODECK_HEARTBEAT_SECONDS
    by a thread of its own: a long sweep must not make a live worker look gone."""
    global _heartbeat_worker
    _heartbeat_worker = workers.worker_identity(
        concurrency=_worker_concurrency(sender), queue=_worker_queues(sender)
    )
    _heartbeat_stop.clear()
    threading.Thread(
        target=_beat_forever, args=(_heartbeat_worker,), name="holodeck-heartbeat", daemon=True
    ).start()


@worker_shutdown.connect
def stop_heartbeat(**_: Any) -> None:
    """A worker that stops cleanly says so at once (the banner does not wait for staleness)."""
    _heartbeat_stop.set()
    if _heartbeat_worker is None:
        return
    try:
        workers.worker_heartbeat_delete(name=_heartbeat_worker.name)
    except Exception:
        log.exception("deleting the worker's heartbeat failed")
    finally:
        close_old_connections()


def _beat_forever(worker: workers.WorkerIdentity) -> None:
    while not _heartbeat_stop.is_set():
        try:
            workers.worker_heartbeat_beat(worker=worker)
        except Exception:  # a database hiccup must not end the heartbeat
            log.exception("stamping the worker's heartbeat failed")
        finally:
            close_old_connections()
        _heartbeat_stop.wait(settings.HOLODECK_HEARTBEAT_SECONDS)


def _worker_concurrency(consumer: Any) -> int:
    concurrency = getattr(getattr(consumer, "controller", None), "concurrency", None)
    return concurrency if isinstance(concurrency, int) else settings.CELERY_WORKER_CONCURRENCY


def _worker_queues(consumer: Any) -> str:
    try:
        names = sorted(consumer.app.amqp.queues.consume_from)
    except AttributeError:
        names = []
    return ",".join(names)[:200] or settings.HOLODECK_QUEUE


@worker_init.connect
def prepare_worker(**_: Any) -> None:
    """Before the pool processes start (they inherit both): the backends' SDKs imported once
    (HOLODECK_WORKER_PRELOAD), and the case tasks set to keep a run's agent sessions between
    them (runs.services.warm_sessions)."""
    started = time.perf_counter()
    modules = backends_preload(settings.HOLODECK_WORKER_PRELOAD)
    if modules:
        log.info("imported %s in %.2f s", ", ".join(modules), time.perf_counter() - started)
    warm_sessions.sessions_enable()


@worker_process_shutdown.connect
def forget_agents(**_: Any) -> None:
    warm_sessions.sessions_close_all()  # the agent sessions kept between case tasks
    execution.run_agents_forget()  # removes the git worktrees of kept agents


def _sweep_forever() -> None:
    pruned_at: float | None = None
    while True:
        try:
            recovery.runs_recover()
        except Exception:  # a database hiccup must not end the sweeper
            log.exception("sweeping stale runs failed")
        finally:
            close_old_connections()
        if settings.HOLODECK_RETENTION_DAYS and (
            pruned_at is None or time.monotonic() - pruned_at >= RETENTION_EVERY_SECONDS
        ):
            pruned_at = time.monotonic()
            _prune()
        time.sleep(settings.HOLODECK_SWEEP_SECONDS)


# Retention by the sweeper runs at most this often per worker (HOLODECK_RETENTION_DAYS).
RETENTION_EVERY_SECONDS = 3600


def _prune() -> None:
    try:
        retention.runs_prune(
            older_than=timedelta(days=settings.HOLODECK_RETENTION_DAYS),
            keep_last=settings.HOLODECK_RETENTION_KEEP_LAST,
        )
    except Exception:
        log.exception("pruning old runs failed")
    finally:
        close_old_connections()
