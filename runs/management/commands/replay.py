from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from pydantic import ValidationError

from runs.core.agentconfig.errors import ConfigError
from runs.core.runoptions.replay import PARAMS, POLICIES, POLICY_TEXTS, ReplayChanges, ReplayParams
from runs.management.exits import EXIT_BAD_INPUT, EXIT_EXECUTION, EXIT_FAILED, EXIT_PASSED
from runs.models import Run
from runs.selectors.replays import replay_verdict_changes
from runs.services.execution import run_execute_inline
from runs.services.launch import LaunchError
from runs.services.replay import run_replay


class Command(BaseCommand):
    help = (
        "What-if replay: run some cases of a finished run again with changes (the system "
        "prompt, the model or its parameters, the commit) while their tools answer from the "
        "run's recording, here in this process; prints the verdicts that changed. Exit codes: "
        "0 all passed, 1 some failed, 2 bad input, 3 the replay could not execute."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run", type=int, help="the id of the run to replay")
        parser.add_argument(
            "--case", type=int, action="append", default=[], help="a case index (repeatable)"
        )
        parser.add_argument(
            "--failed", action="store_true", help="its failed and errored cases (the default)"
        )
        parser.add_argument("--prompt-file", default=None, help="a file of the agent's directory")
        parser.add_argument("--prompt-text", default=None, help="the whole system prompt")
        parser.add_argument("--model", default=None, help="another model name")
        parser.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"a model parameter ({', '.join(PARAMS)}; repeatable)",
        )
        parser.add_argument("--commit", default="", help="a git ref of the run's project")
        parser.add_argument(
            "--tools",
            default="recorded-only",
            choices=POLICIES,
            help="; ".join(f"{name}: {text}" for name, text in POLICY_TEXTS.items()),
        )
        parser.add_argument(
            "--queue", action="store_true", help="hand the replay to the workers instead"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        sys.exit(self.replay(options))

    def replay(self, options: dict[str, Any]) -> int:
        original = Run.objects.filter(pk=options["run"]).first()
        if original is None:
            self.stderr.write(f"no run {options['run']}")
            return EXIT_BAD_INPUT
        run = self._open(original, options)
        if run is None:
            return EXIT_BAD_INPUT
        pick = run.run_options.replay
        self.stdout.write(f"replay of run {original.pk}: run {run.pk}")
        if pick is not None:
            self.stdout.write(pick.summary())
        if options["queue"]:
            self.stdout.write("queued for the workers")
            return EXIT_PASSED
        return self._run(original, run)

    def _open(self, original: Any, options: dict[str, Any]) -> Any:
        """The replay's queued run, or None when it was refused (said on stderr)."""

        try:
            changes = ReplayChanges(
                prompt_text=options["prompt_text"],
                prompt_file=options["prompt_file"],
                model=options["model"],
                params=ReplayParams.model_validate(_params(options["param"])),
                commit=options["commit"],
            )
            return run_replay(
                original=original,
                cases=options["case"] or "failed",
                changes=changes,
                policy=options["tools"],
                enqueue=options["queue"],
            )
        except ConfigError as exc:
            for line in exc.lines():
                self.stderr.write(line)
        except (LaunchError, ValidationError, ValueError) as exc:
            self.stderr.write(str(exc))
        return None

    def _run(self, original: Any, run: Any) -> int:
        try:
            run = run_execute_inline(run_id=run.pk)
        except Exception as exc:  # the agent could not be loaded or run at all
            self.stderr.write(f"the replay could not execute: {exc}")
            return EXIT_EXECUTION
        changes = replay_verdict_changes(original_id=original.pk, replay_id=run.pk)
        for change in changes:
            self.stdout.write(
                f"case {change.index} {change.name}: {change.before or '-'} -> {change.after}"
            )
            for turn, before, after in change.turns:
                self.stdout.write(f"  turn {turn + 1}: {before or '-'} -> {after}")
        if not changes:
            self.stdout.write("no verdict changed")
        self.stdout.write(
            f"{run.passed_cases}/{run.total_cases} test cases passed ({run.status}); "
            f"compare: /compare/?runs={original.pk},{run.pk}"
        )
        return EXIT_PASSED if run.status == Run.Status.PASSED else EXIT_FAILED


def _params(pairs: list[str]) -> dict[str, Any]:
    """``["temperature=0.2"]`` -> ``{"temperature": "0.2"}`` (validated by ReplayParams)."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key.strip() not in PARAMS:
            raise ValueError(f"--param takes KEY=VALUE with KEY one of {', '.join(PARAMS)}")
        params[key.strip()] = value.strip()
    return params
