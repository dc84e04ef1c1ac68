"""``manage.py validate_agent path/to/agent.yaml``: check an agent without running it.

Prints ``OK: <name>: N test cases, M turns`` and exits 0, or prints every problem on its own
line to stderr and exits 2 (1 is left to Django for usage errors).
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from runs.core.agentconfig.validate import EXIT_OK, validate_agent_file


class Command(BaseCommand):
    help = "Validate an agent.yaml (and its test cases file) and report every problem."
    # The web app's system checks (URLs, the API's schemas) have nothing to say about an
    # agent.yaml, and would import the whole web app first.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="agent.yaml, or the directory that holds it")

    def handle(self, *args: Any, **options: Any) -> None:
        code, lines = validate_agent_file(options["path"])
        stream = self.stdout if code == EXIT_OK else self.stderr
        for line in lines:
            stream.write(line)
        if code != EXIT_OK:
            sys.exit(code)
