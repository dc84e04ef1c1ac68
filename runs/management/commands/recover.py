from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from runs.services.recovery import runs_recover


class Command(BaseCommand):
    help = (
        "Keep runs moving after workers died or messages were lost: queue again the cases of "
        "dead workers and lost messages, end CLI runs whose command died, finish runs with "
        "nothing left to run. Every worker does this on its own every HOLODECK_SWEEP_SECONDS."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        acted = runs_recover()
        self.stdout.write(f"recovered {acted} run(s)")
