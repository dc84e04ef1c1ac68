from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.services.projects import project_register


class Command(BaseCommand):
    help = "Register agent projects (directories holding an agent.yaml) with the dashboard."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="agent.yaml files or directories holding one")
        parser.add_argument("--name", help="project name (default: the agent's name)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options.get("name") and len(options["paths"]) > 1:
            raise CommandError("--name names one project: give it a single path")
        for raw in options["paths"]:
            path = Path(raw)
            if path.is_dir():
                path = path / "agent.yaml"
            try:
                project = project_register(agent_path=path, name=options.get("name"))
            except FileNotFoundError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"registered {project.name}: {project.agent_path}")
