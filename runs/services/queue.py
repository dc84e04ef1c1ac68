"""Enqueue Celery tasks by name once the current transaction commits.

Only ids travel through the broker. The task is looked up in the app's registry by name, so
services never import ``runs.tasks`` (which imports them).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from celery import current_app
from celery.exceptions import NotRegistered
from django.db import transaction

START_RUN = "runs.tasks.start_run"
EXECUTE_CASE = "runs.tasks.execute_case"


def task_enqueue(name: str, object_id: int) -> None:
    """Queue ``name(object_id)`` after the current transaction commits (at once outside one)."""
    transaction.on_commit(partial(_send, name, object_id))


def _send(name: str, object_id: int) -> None:
    _task(name).delay(object_id)


def _task(name: str) -> Any:
    try:
        return current_app.tasks[name]
    except NotRegistered:
        # A web process has not imported the task modules yet: the app's autodiscovery does.
        current_app.loader.import_default_modules()
        return current_app.tasks[name]
