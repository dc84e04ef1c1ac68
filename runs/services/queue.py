"""Enqueue Celery tasks by name once the current transaction commits.

Only ids travel through the broker. The task is looked up in the app's registry by name, so
services never import ``runs.tasks`` (which imports them).
"""

from __future__ import annotations

import logging
from functools import partial

from celery import current_app
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

START_RUN = "runs.tasks.start_run"
EXECUTE_CASE = "runs.tasks.execute_case"

log = logging.getLogger(__name__)


def tasks_register() -> None:
    """Put the tasks in the app's registry now, before any request can enqueue.

    Called from RunsConfig.ready. Left to the first enqueue, the registry filled lazily: two
    threads of a fresh web process raced there, one seeing ``runs.tasks`` half imported and its
    task not yet registered (``NotRegistered`` and a 500 for a run already created).

    Celery's own autodiscovery imports the task module, now rather than at the worker's start
    (holodeck_web/celery.py asks for it lazily): nothing in the project imports ``runs.tasks``
    itself, which imports the services. (``loader.import_default_modules`` would set Django up
    again, from inside its setup.)
    """
    current_app.autodiscover_tasks(["runs"], force=True)
    missing = [name for name in (START_RUN, EXECUTE_CASE) if name not in current_app.tasks]
    if missing:
        raise ImproperlyConfigured(f"the Celery app has no task {missing[0]!r} after loading")


def task_enqueue(name: str, object_id: int) -> None:
    """Queue ``name(object_id)`` after the current transaction commits (at once outside one)."""
    transaction.on_commit(partial(_send, name, object_id))


def _send(name: str, object_id: int) -> None:
    if current_app.conf.task_always_eager:
        current_app.tasks[name].delay(object_id)  # runs here: its errors are the caller's
        return
    try:
        current_app.tasks[name].delay(object_id)
    except Exception:
        # The row is committed and stays queued (or pending): the sweeper sends it again
        # after HOLODECK_CASE_STALE_SECONDS (runs/services/recovery.py). The request that
        # created it answers with it instead of a 500.
        log.exception("could not queue %s(%s); the sweeper will send it again", name, object_id)


__all__ = ["EXECUTE_CASE", "START_RUN", "task_enqueue", "tasks_register"]
