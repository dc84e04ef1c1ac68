"""``manage.py run_agent``: argument handling and printing; the run itself is
``runs.services.cli``."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from graders.result import error_text
from runs.core.agentconfig.errors import ConfigError
from runs.core.agentconfig.limits import MAX_REPEATS
from runs.core.agentconfig.loader import load_agent
from runs.core.engine.metrics import judge_warnings
from runs.core.engine.progress import TerminalProgress
from runs.core.gitutil import git_info
from runs.core.verdicts.numbers import format_rate
from runs.core.wire.holodeck_io import write_eval_run
from runs.core.writers.results import EXPORT_SUFFIXES, counts_text, export_text, report_summary
from runs.management.exits import EXIT_BAD_INPUT, EXIT_EXECUTION, EXIT_FAILED, EXIT_PASSED
from runs.services.cli import cli_run_execute
from runs.services.launch import cases_select

if TYPE_CHECKING:
    from runs.core.wire.models import TestReport
    from runs.services.cli import RunStore


class Command(BaseCommand):
    help = (
        "Run an agent's test cases from the command line (for CI). Exit codes: 0 every case "
        "passed, 1 a case failed, errored or could not be graded, 2 configuration error, "
        "3 execution error. Writes the HoloDeck-compatible result file "
        "to <slug>/<timestamp>.json under the data folder's results/ (or --results-dir)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("agent", help="path to agent.yaml")
        parser.add_argument(
            "--parallel-test-cases",
            type=int,
            default=None,
            help="cases run concurrently (CLI > YAML > env > 1)",
        )
        parser.add_argument("--limit", type=int, default=None, help="run only the first N cases")
        parser.add_argument(
            "--repeats",
            type=int,
            default=None,
            help="run each case N times as independent sessions (overrides execution.repeats)",
        )
        parser.add_argument("--filter", default="", help="run only cases whose name contains this")
        parser.add_argument(
            "--timeout",
            type=float,
            default=None,
            help="override execution.llm_timeout (seconds per turn)",
        )
        parser.add_argument(
            "--output",
            action="append",
            default=[],
            help="also write the report here (.json, .md or .xml JUnit); repeatable",
        )
        parser.add_argument(
            "--results-dir",
            default=None,
            help=(
                "the folder that receives <slug>/<timestamp>.json (default: the data folder's "
                "results/, outside the project's git tree)"
            ),
        )
        parser.add_argument(
            "--no-results-file",
            action="store_true",
            help="do not write results/<slug>/<timestamp>.json",
        )
        parser.add_argument(
            "--no-store", action="store_true", help="do not store the run in the dashboard database"
        )
        parser.add_argument("--quiet", action="store_true", help="no per-turn progress")

    store: RunStore | None = None
    # The web app's system checks (URLs, the API's schemas) have nothing to say about running
    # an agent from CI, and would add half a second to every run.
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        sys.exit(self.execute_run(options))

    def execute_run(self, options: dict[str, Any]) -> int:
        for output in options["output"]:
            if Path(output).suffix not in {".json", ".md", ".xml"}:
                self.stderr.write(f"--output {output}: use a .json, .md or .xml file name")
                return EXIT_BAD_INPUT
        try:
            agent = load_agent(options["agent"], parallel_override=options["parallel_test_cases"])
        except ConfigError as exc:
            for line in exc.lines():
                self.stderr.write(line)
            return EXIT_BAD_INPUT
        if options["limit"] is not None and options["limit"] < 1:
            self.stderr.write(f"--limit {options['limit']}: must be at least 1")
            return EXIT_BAD_INPUT
        repeats = options.get("repeats")
        if repeats is not None:
            if not 1 <= repeats <= MAX_REPEATS:
                self.stderr.write(f"--repeats {repeats}: must be from 1 to {MAX_REPEATS}")
                return EXIT_BAD_INPUT
            agent.config.execution.repeats = repeats
        if options["timeout"] is not None:
            if options["timeout"] <= 0:
                self.stderr.write(f"--timeout {options['timeout']:g}: must be a positive number")
                return EXIT_BAD_INPUT
            agent.config.execution.llm_timeout = options["timeout"]

        indices = cases_select(
            agent.config.test_cases, case_filter=options["filter"], limit=options["limit"]
        )
        if not indices:
            self.stderr.write(f"no test case matches --filter {options['filter']!r}")
            return EXIT_BAD_INPUT

        for warning in judge_warnings(agent):
            self.stderr.write(f"warning: {warning}")
        git = git_info(agent.base_dir)
        try:
            eval_run = self._run(agent, indices, options, git)
        except Exception as exc:  # backend could not start, etc.
            self.stderr.write(f"execution error: {error_text(exc)}")
            return EXIT_EXECUTION
        try:
            self._write_outputs(agent, eval_run, options)
        except OSError as exc:
            self.stderr.write(f"execution error: could not write the results: {exc}")
            return EXIT_EXECUTION
        self.stdout.write(closing_line(agent.config.name, eval_run.report))
        return EXIT_PASSED if run_status(eval_run.report) == "passed" else EXIT_FAILED

    def _run(self, agent: Any, indices: list[int], options: dict[str, Any], git: Any) -> Any:
        progress = None
        if not options["quiet"]:
            cases = agent.config.test_cases
            repeats = agent.config.execution.repeats
            progress = TerminalProgress(
                sum(len(cases[i].as_turns()) for i in indices) * repeats,
                len(indices) * repeats,
                stream=sys.stderr,
                repeats=repeats,
            )
        try:
            outcome = cli_run_execute(
                agent=agent,
                indices=indices,
                git=git,
                cli_args=["manage.py", "run_agent", *sys.argv[2:]],
                limit=options["limit"],
                case_filter=options["filter"],
                store=not options["no_store"],
                progress=progress,
                warn=lambda line: self.stderr.write(line),
            )
        finally:
            if progress is not None:
                progress.close()
        self.store = outcome.store
        return outcome.eval_run

    def _write_outputs(self, agent: Any, eval_run: Any, options: dict[str, Any]) -> None:
        if not options["no_results_file"]:
            results_dir = Path(options["results_dir"] or default_results_dir())
            path = write_eval_run(eval_run, results_dir, datetime.now(UTC))
            self.stdout.write(f"results: {path}")
        for output in options["output"]:
            target = Path(output)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(export_text(eval_run, EXPORT_SUFFIXES[target.suffix]))
            self.stdout.write(f"wrote {target}")
        if self.store is not None and self.store.run is not None:
            self.stdout.write(f"stored as run {self.store.run.pk}")


def run_status(report: TestReport) -> str:
    """The run's status as the dashboard gives it (``RunSummary.run_status``)."""
    return report_summary(report).run_status()


def default_results_dir() -> Path:
    """Result files of command-line runs go to the data folder, never into the project's
    repository (a file there would make the next launch "dirty")."""
    return Path(settings.DATA_DIR) / "results"


def closing_line(agent_name: str, report: TestReport) -> str:
    """``"agent: 4 test cases: 1 passed, 2 failed, 0 errored, 1 not graded (pass rate 33.3%)
    in 1.2s"``: the numbers of the run's page and exports."""
    cases = report_summary(report).cases
    return (
        f"{agent_name}: {cases.total} test cases: {counts_text(cases)} "
        f"(pass rate {format_rate(cases.pass_rate)}) "
        f"in {report.summary.total_duration_ms / 1000:.1f}s"
    )
