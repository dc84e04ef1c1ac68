"""The Celery app. Only ids travel through the broker; the database row is the truth."""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery, signals
from django.conf import settings
from kombu.transport import TRANSPORT_ALIASES

from holodeck_web.logs import TextFormatter

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "holodeck_web.settings")

app = Celery("holodeck_web")

# The embedded broker: kombu's file-system transport with atomic writes and claims
# (holodeck_web/broker.py); Redis and RabbitMQ (amqp://) are kombu's own.
TRANSPORT_ALIASES["holodeckfs"] = "holodeck_web.broker:Transport"


def configure(app: Celery) -> None:
    broker_url = settings.BROKER_URL
    if settings.EMBEDDED_BROKER or broker_url is None:
        broker_url = "holodeckfs://"
    app.conf.update(
        broker_url=broker_url,
        broker_transport_options=transport_options(broker_url),
        broker_connection_retry_on_startup=True,
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        result_backend=None,
        task_default_queue=settings.HOLODECK_QUEUE,
        # Every broker: a message is acknowledged after its task, so the message of a worker
        # that died mid-case comes back and takes the case over (runs/services/execution.py).
        # A pool child killed under a living worker: its message is rejected and requeued at
        # once (on every broker), instead of being acknowledged as failed and its case waiting
        # for a sweep.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # One message per pool process: a worker holds no queued case another worker could run.
        worker_prefetch_multiplier=1,
        # A worker that loses its broker connection keeps running its cases (Celery 6 would
        # cancel them by default): their messages come back to another worker, which finds each
        # case owned by a live attempt and leaves it, so finished turns are not thrown away.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        # RabbitMQ closes a channel whose delivery outlived its consumer_timeout (a channel
        # error): the worker reconnects instead of stopping with "Unrecoverable error".
        broker_channel_error_retry=broker_url.startswith(("amqp://", "amqps://")),
        worker_concurrency=settings.CELERY_WORKER_CONCURRENCY,
        task_always_eager=settings.CELERY_EAGER,
        task_eager_propagates=True,
        timezone="UTC",
        # Workers log through the project's LOGGING (holodeck_web/logs.py: LOG_FORMAT, the run,
        # case and turn ids); Celery would replace its root handler with a plain one of its own.
        # --loglevel still sets the level, and stdout is still redirected to the log.
        worker_hijack_root_logger=False,
    )


def transport_options(broker_url: str) -> dict[str, object]:
    """Per-broker options; docs/operations.md says how each broker gives back a dead worker's
    message."""
    scheme = broker_url.split("://", 1)[0]
    if scheme == "holodeckfs":
        # kombu's file-system transport with atomic writes and claims (holodeck_web/broker.py).
        for sub in ("in", "processed", "control", "quarantine"):
            (settings.BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
        return {
            "data_folder_in": str(settings.BROKER_DIR / "in"),
            "data_folder_out": str(settings.BROKER_DIR / "in"),
            "processed_folder": str(settings.BROKER_DIR / "processed"),
            "control_folder": str(settings.BROKER_DIR / "control"),
            "quarantine_folder": str(settings.BROKER_DIR / "quarantine"),
            # The folder is polled; kombu's default (1 s) would idle a worker between cases.
            "polling_interval": 0.05,
            "store_processed": False,
        }
    if scheme in ("amqp", "amqps"):
        # RabbitMQ requeues a consumer's unacknowledged messages the moment its connection
        # closes (a dead worker), so there is no visibility timeout to size. Publisher confirms:
        # a launch returns once the broker has stored the message, not when it left the socket.
        # RabbitMQ closes the channel of a delivery unacknowledged for `consumer_timeout`
        # (30 min by default): raise it above the longest case (docs/operations.md).
        return {"confirm_publish": True}
    # Redis: an unacknowledged message (its worker died) comes back after this long: sized to
    # the stale limit, not Redis's hour. A case that outlives it while its worker lives is
    # delivered again and left alone (its owner is alive and its heartbeat fresh).
    return {"visibility_timeout": 2 * settings.HOLODECK_CASE_STALE_SECONDS}


@signals.after_setup_logger.connect
def _worker_text_lines(format: str = "", **_: Any) -> None:
    """A worker's text lines keep Celery's layout (time, level, process) with the ids after."""
    if settings.LOG_FORMAT == "text" and format:
        for handler in logging.getLogger().handlers:
            if isinstance(handler.formatter, TextFormatter):
                handler.setFormatter(TextFormatter(format))


@signals.celeryd_init.connect
def _worker_quiet_in_json(instance: Any = None, **_: Any) -> None:
    """In json the start-up banner (many plain lines on stdout) is left out and Python's warnings
    (Celery's own at start-up) are logged: the lines a worker writes parse; its "ready" line is
    logged."""
    if settings.LOG_FORMAT == "json" and instance is not None:
        instance.quiet = True
        logging.captureWarnings(True)


configure(app)
app.autodiscover_tasks(["runs"])
