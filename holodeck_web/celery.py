"""The Celery app. Only ids travel through the broker; the database row is the truth."""

from __future__ import annotations

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "holodeck_web.settings")

app = Celery("holodeck_web")

# The embedded broker: kombu's file-system transport with atomic writes and claims
# (holodeck_web/broker.py).
TRANSPORT_ALIASES["holodeckfs"] = "holodeck_web.broker:Transport"


def configure(app: Celery) -> None:
    from django.conf import settings

    broker_url: str | None
    transport_options: dict[str, object]
    if settings.EMBEDDED_BROKER:
        for sub in ("in", "processed", "control", "quarantine"):
            (settings.BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
        broker_url = "holodeckfs://"
        transport_options = {
            "data_folder_in": str(settings.BROKER_DIR / "in"),
            "data_folder_out": str(settings.BROKER_DIR / "in"),
            "processed_folder": str(settings.BROKER_DIR / "processed"),
            "control_folder": str(settings.BROKER_DIR / "control"),
            "quarantine_folder": str(settings.BROKER_DIR / "quarantine"),
            # The folder is polled; kombu's default (1 s) would idle a worker between cases.
            "polling_interval": 0.05,
            "store_processed": False,
        }
    else:
        broker_url = settings.BROKER_URL
        # An unacknowledged message (its worker died) comes back after this long: sized to the
        # stale limit, not Redis's hour. A case that outlives it while its worker lives is
        # delivered again and left alone (its owner is alive and its heartbeat fresh).
        transport_options = {"visibility_timeout": 2 * settings.HOLODECK_CASE_STALE_SECONDS}
    app.conf.update(
        broker_url=broker_url,
        broker_transport_options=transport_options,
        broker_connection_retry_on_startup=True,
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        result_backend=None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_concurrency=settings.CELERY_WORKER_CONCURRENCY,
        task_always_eager=settings.CELERY_EAGER,
        task_eager_propagates=True,
        timezone="UTC",
    )


configure(app)
app.autodiscover_tasks(["runs"])
