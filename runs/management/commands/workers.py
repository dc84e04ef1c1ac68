from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from runs.selectors.workers import RunningCase, WorkerStatus, worker_overview


class Command(BaseCommand):
    help = (
        "List the live Celery workers (seen within HOLODECK_WORKER_STALE_SECONDS): name, host, "
        "pid, concurrency, queue, when it started and was last seen, and the cases it runs now."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--all", action="store_true", help="include stale workers' rows")
        parser.add_argument("--json", action="store_true", help="print JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        overview = worker_overview(include_stale=options["all"])
        if options["json"]:
            document = {
                "workers": [_worker_json(worker) for worker in overview.workers],
                "unattributed_cases": [_case_json(case) for case in overview.unattributed],
            }
            self.stdout.write(json.dumps(document, indent=2))
            return
        if not overview.workers:
            self.stdout.write(
                "no live worker: runs wait in the queue until one starts "
                "(manage.py serve, or celery -A holodeck_web worker)"
            )
        now = timezone.now()
        for worker in overview.workers:
            state = "live" if worker.live else "stale"
            self.stdout.write(
                f"{worker.name}  {state}  host={worker.host} pid={worker.pid} "
                f"concurrency={worker.concurrency} queue={worker.queue} "
                f"started={worker.started_at:%Y-%m-%d %H:%M:%S}Z "
                f"last seen {(now - worker.seen_at).total_seconds():.0f}s ago"
            )
            for case in worker.cases:
                self.stdout.write(f"    {_case_line(case)}")
            if not worker.cases:
                self.stdout.write("    (no case running)")
        if overview.unattributed:
            self.stdout.write("running cases no listed worker could be matched to:")
            for case in overview.unattributed:
                self.stdout.write(f"    {_case_line(case)}")


def _case_line(case: RunningCase) -> str:
    return f"run {case.run_id} case {case.case_id} {case.label} (process {case.claimed_by})"


def _case_json(case: RunningCase) -> dict[str, Any]:
    return {
        "run_id": case.run_id,
        "case_id": case.case_id,
        "name": case.label,
        "claimed_by": case.claimed_by,
    }


def _worker_json(worker: WorkerStatus) -> dict[str, Any]:
    return {
        **asdict(worker),
        "started_at": worker.started_at.isoformat(),
        "seen_at": worker.seen_at.isoformat(),
        "cases": [_case_json(case) for case in worker.cases],
    }
