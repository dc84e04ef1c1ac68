"""Thin Celery tasks: take an id, call a service. Only ids travel through the broker."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready

from runs import services


@shared_task(acks_late=True, ignore_result=True)
def start_run(run_id: int) -> None:
    services.run_start(run_id)


@shared_task(acks_late=True, ignore_result=True)
def execute_case(case_id: int) -> None:
    services.case_execute(case_id)


@worker_ready.connect
def reap_stale_runs(**_: Any) -> None:
    """When a worker (re)starts, runs whose cases were lost with a dead worker are settled."""
    services.runs_reap_stale()
