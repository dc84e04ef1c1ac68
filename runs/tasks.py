"""Thin Celery tasks: take an id, call a service. Only ids travel through the broker."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import close_old_connections

from runs import services

log = logging.getLogger(__name__)


@shared_task(acks_late=True, ignore_result=True)
def start_run(run_id: int) -> None:
    services.run_start(run_id)


@shared_task(acks_late=True, ignore_result=True)
def execute_case(case_id: int) -> None:
    services.case_execute(case_id)


@worker_ready.connect
def start_sweeper(**_: Any) -> None:
    """Every worker keeps runs moving when workers or messages are lost: it sweeps at start and
    then every HOLODECK_SWEEP_SECONDS (the sweeps are idempotent, several workers may run them)."""
    if not settings.HOLODECK_SWEEP_SECONDS:
        return
    threading.Thread(target=_sweep_forever, name="holodeck-sweeper", daemon=True).start()


def _sweep_forever() -> None:
    while True:
        try:
            services.runs_reap_stale()
        except Exception:  # a database hiccup must not end the sweeper
            log.exception("sweeping stale runs failed")
        finally:
            close_old_connections()
        time.sleep(settings.HOLODECK_SWEEP_SECONDS)
