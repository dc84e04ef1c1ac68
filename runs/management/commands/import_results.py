from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.core.wire.holodeck_io import ReportFormatError
from runs.models import AgentProject
from runs.services.history import runs_import


class Command(BaseCommand):
    help = (
        "Import HoloDeck result files into the dashboard: one EvalRun file, a JSON list of "
        "EvalRuns, or a results/ directory (every *.json below it)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+")
        parser.add_argument("--project", help="attach the runs to this registered project")

    def handle(self, *args: Any, **options: Any) -> None:
        project = None
        if options.get("project"):
            try:
                project = AgentProject.objects.get(name=options["project"])
            except AgentProject.DoesNotExist:
                raise CommandError(f"no project named {options['project']!r}") from None
        try:
            outcome = runs_import([Path(p) for p in options["paths"]], project=project)
        except ReportFormatError as exc:
            raise CommandError(str(exc)) from exc
        cases = sum(run.total_cases for run in outcome.imported)
        line = f"imported {len(outcome.imported)} run(s) with {cases} test case(s)"
        if outcome.already_imported:
            line += f"; {len(outcome.already_imported)} already imported, skipped"
        self.stdout.write(line)
