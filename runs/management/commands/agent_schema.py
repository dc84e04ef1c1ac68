"""``manage.py agent_schema [--output FILE]``: the JSON Schema of agent.yaml, for editors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from runs.core.agentconfig.schema import agent_json_schema_text


class Command(BaseCommand):
    help = "Print (or write to --output) the JSON Schema of agent.yaml."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--output", "-o", help="write the schema to this file")

    def handle(self, *args: Any, **options: Any) -> None:
        text = agent_json_schema_text()
        if options.get("output"):
            Path(options["output"]).write_text(text, encoding="utf-8")
            self.stdout.write(f"wrote {options['output']}")
        else:
            self.stdout.write(text, ending="")
