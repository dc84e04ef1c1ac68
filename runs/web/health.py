"""``/healthz`` and ``/readyz``: answered without login, and revealing nothing.

A probe sees only ``ok``, ``failed`` or ``pending`` per check: never a host name, a URL, a
version or an exception's text (those go to the log, where the operator reads them).

- ``/healthz``: the process answers. It touches no database, so a liveness probe never restarts
  a web process because PostgreSQL is down.
- ``/readyz``: the database answers, every migration is applied and the broker answers; 503
  naming the failing check otherwise, so a load balancer sends no traffic to a process that
  cannot serve it.
"""

from __future__ import annotations

import logging
import os
from typing import Literal

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from kombu import Connection

log = logging.getLogger(__name__)

Check = Literal["ok", "failed", "pending"]

# A probe must answer before its own timeout (docker's default is 30 s, Kubernetes' 1 s): a
# broker that does not accept a connection within this long counts as down.
BROKER_TIMEOUT_SECONDS = 2.0
BROKER_FOLDERS = ("in", "processed", "control", "quarantine")


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    database = database_check()
    # Migrations can only be read from a database that answers.
    migrations: Check = migrations_check() if database == "ok" else "failed"
    checks: dict[str, Check] = {
        "database": database,
        "migrations": migrations,
        "broker": broker_check(),
    }
    ready = all(value == "ok" for value in checks.values())
    return JsonResponse(
        {"status": "ready" if ready else "unavailable", "checks": checks},
        status=200 if ready else 503,
    )


def database_check() -> Check:
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:  # every driver raises its own types; a probe answers, never raises
        log.warning("readyz: the database does not answer", exc_info=True)
        connection.close_if_unusable_or_obsolete()
        return "failed"
    return "ok"


def migrations_check() -> Check:
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception:
        log.warning("readyz: the migrations cannot be read", exc_info=True)
        return "failed"
    if plan:
        log.warning("readyz: %d migration(s) not applied (manage.py migrate)", len(plan))
        return "pending"
    return "ok"


def broker_check() -> Check:
    if settings.CELERY_EAGER:
        return "ok"  # tasks run in the web process: no broker is used
    if settings.EMBEDDED_BROKER or settings.BROKER_URL is None:
        return _broker_folders_check()
    return _broker_connection_check(settings.BROKER_URL)


def _broker_folders_check() -> Check:
    """The embedded broker is folders: ready when every one exists and can be written to."""
    for sub in BROKER_FOLDERS:
        folder = settings.BROKER_DIR / sub
        if not (folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)):
            log.warning("readyz: the broker folder %s is missing or not writable", folder)
            return "failed"
    return "ok"


def _broker_connection_check(url: str) -> Check:

    connection = Connection(
        url,
        connect_timeout=BROKER_TIMEOUT_SECONDS,
        transport_options={
            "socket_timeout": BROKER_TIMEOUT_SECONDS,
            "socket_connect_timeout": BROKER_TIMEOUT_SECONDS,
            "max_retries": 0,
        },
    )
    try:
        # One attempt, no retry (kombu counts retries: 1 would sleep 2 s and try again):
        # Redis's channel pings the server, RabbitMQ opens a session.
        connection.ensure_connection(max_retries=0, timeout=BROKER_TIMEOUT_SECONDS)
    except Exception:
        log.warning("readyz: the broker does not answer", exc_info=True)
        return "failed"
    finally:
        connection.release()
    return "ok"
