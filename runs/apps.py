from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Agent test runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # lazy: Django's app loading; the services import the models, which need the app ready
        from runs.services.queue import tasks_register

        tasks_register()  # before the first request can enqueue (see tasks_register)
        post_migrate.connect(_text_index_ensure, sender=self)


def _text_index_ensure(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """The text search's SQLite index back in place after a migration that rebuilt its table
    (``runs.selectors.text_search.text_index_ensure``)."""
    # lazy: Django's app loading; the selectors import the models, which need the app ready
    from runs.selectors.text_search import text_index_ensure

    text_index_ensure(connections[using])
