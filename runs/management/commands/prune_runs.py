from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.models import AgentProject
from runs.services.retention import runs_prune

DURATION = re.compile(r"([0-9]+)([dhm])")
UNITS = {"d": "days", "h": "hours", "m": "minutes"}
PER_DAY = {"d": 1, "h": 24, "m": 24 * 60}  # how many of the unit one day holds
# The most a duration may say (about 100 years): more overflows a datetime's arithmetic.
MAX_DAYS = 36_500


def parse_duration(text: str) -> timedelta:
    """``90d``, ``12h``, ``30m``: a whole number of days, hours or minutes."""
    match = DURATION.fullmatch(text.strip())
    if match is None:
        raise CommandError(f"--older-than {text!r}: give a duration like 90d, 12h or 30m")
    amount = int(match[1])
    # Compared before building the timedelta: a huge number would overflow it.
    if amount > MAX_DAYS * PER_DAY[match[2]]:
        raise CommandError(f"--older-than {text!r}: at most {MAX_DAYS}d")
    return timedelta(**{UNITS[match[2]]: amount})


def non_negative(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise CommandError(f"--keep-last {text!r}: give a whole number (0 or more)")
    return int(text)


class Command(BaseCommand):
    help = (
        "Delete finished runs older than --older-than (with their cases, turns and metrics, "
        "and the agent snapshots no run uses any more), in small batches. Never deletes a kept "
        "run (the run page's Keep, POST /api/v1/runs/{id}/keep) nor a queued or running one."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than", required=True, help="a duration: 90d, 12h or 30m (created before)"
        )
        parser.add_argument(
            "--keep-last",
            default="0",
            help="keep each project's newest N runs whatever their age (default 0)",
        )
        parser.add_argument("--project", help="only this registered project's runs (its name)")
        parser.add_argument(
            "--dry-run", action="store_true", help="print what would be deleted, delete nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        older_than = parse_duration(options["older_than"])
        keep_last = non_negative(str(options["keep_last"]))
        project = None
        if options.get("project"):
            project = AgentProject.objects.filter(name=options["project"]).first()
            if project is None:
                raise CommandError(f"no project named {options['project']!r}")
        counts = runs_prune(
            older_than=older_than,
            keep_last=keep_last,
            project=project,
            dry_run=options["dry_run"],
        )
        verb = "would delete" if options["dry_run"] else "deleted"
        self.stdout.write(
            f"{verb} {counts.runs} run(s), {counts.cases} case(s), {counts.turns} turn(s), "
            f"{counts.metrics} metric result(s), {counts.snapshots} unused snapshot(s)"
        )
