"""Thin Celery tasks: take an id, call a service. Only ids travel through the broker.

Nothing imports this module but the Celery app (services enqueue by task name).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from celery import shared_task
from celery.signals import worker_process_shutdown, worker_ready
from django.conf import settings
from django.db import close_old_connections

from runs.services import execution, recovery

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


@worker_process_shutdown.connect
def forget_agents(**_: Any) -> None:
    execution.run_agents_forget()  # removes the git worktrees of kept agents


def _sweep_forever() -> None:
    while True:
        try:
            recovery.runs_recover()
        except Exception:  # a database hiccup must not end the sweeper
            log.exception("sweeping stale runs failed")
        finally:
            close_old_connections()
        time.sleep(settings.HOLODECK_SWEEP_SECONDS)
