from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from runs.core.agentconfig.errors import ConfigError
from runs.management.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_PASSED
from runs.models import Run
from runs.services.execution import run_execute_inline
from runs.services.launch import LaunchError
from runs.services.regrade import run_regrade_create


class Command(BaseCommand):
    help = (
        "Re-grade a finished run without calling the agent: a new run with the original's "
        "transcripts, graded with the project's current agent.yaml (or --ref, or --agent). "
        "Exit codes: 0 all passed, 1 some failed, 2 bad input."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run", type=int, help="the id of the run to re-grade")
        parser.add_argument("--ref", default="", help="grade with the agent.yaml at this git ref")
        parser.add_argument(
            "--agent", default=None, help="grade with this agent.yaml (e.g. for an imported run)"
        )
        parser.add_argument(
            "--queue",
            action="store_true",
            help="hand the re-grade to the workers instead of grading here",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        sys.exit(self.regrade(options))

    def regrade(self, options: dict[str, Any]) -> int:
        original = Run.objects.filter(pk=options["run"]).first()
        if original is None:
            self.stderr.write(f"no run {options['run']}")
            return EXIT_BAD_INPUT
        agent = Path(options["agent"]) if options["agent"] else None
        if agent is not None and agent.is_dir():
            agent = agent / "agent.yaml"
        try:
            run = run_regrade_create(
                original=original,
                git_ref=options["ref"],
                agent_path=agent,
                enqueue=options["queue"],
            )
        except ConfigError as exc:
            for line in exc.lines():
                self.stderr.write(line)
            return EXIT_BAD_INPUT
        except (LaunchError, FileNotFoundError) as exc:
            self.stderr.write(str(exc))
            return EXIT_BAD_INPUT
        self.stdout.write(f"re-grade of run {original.pk}: run {run.pk}")
        if run.regrade is not None:
            self.stdout.write(run.regrade.text)
        if options["queue"]:
            self.stdout.write("queued for the workers")
            return EXIT_PASSED
        run = run_execute_inline(run_id=run.pk)
        self.stdout.write(
            f"{run.passed_cases}/{run.total_cases} test cases passed ({run.status}); "
            f"compare: /compare/?runs={original.pk},{run.pk}"
        )
        return EXIT_PASSED if run.status == Run.Status.PASSED else EXIT_FAILED
