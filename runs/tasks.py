"""Thin Celery tasks: take an id, call a service. Only ids travel through the broker."""

from __future__ import annotations

from celery import shared_task

from runs import services


@shared_task(acks_late=True, ignore_result=True)
def start_run(run_id: int) -> None:
    services.run_start(run_id)


@shared_task(acks_late=True, ignore_result=True)
def execute_case(case_id: int) -> None:
    services.case_execute(case_id)
