from __future__ import annotations

from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Agent test runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from runs.services.queue import tasks_register

        tasks_register()  # before the first request can enqueue (see tasks_register)
