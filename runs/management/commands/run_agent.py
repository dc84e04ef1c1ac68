from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from graders.result import error_text
from runs.engine.events import emit

EXIT_PASSED, EXIT_FAILED, EXIT_CONFIG, EXIT_EXECUTION = 0, 1, 2, 3


class Command(BaseCommand):
    help = (
        "Run an agent's test cases from the command line (for CI). Exit codes: 0 all passed, "
        "1 some failed, 2 configuration error, 3 execution error. Writes the HoloDeck-compatible "
        "result file to results/<slug>/<timestamp>.json beside agent.yaml."
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
            help="where results/<slug>/ goes (default: beside agent.yaml)",
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
        from runs.spec.errors import ConfigError
        from runs.spec.loader import load_agent

        for output in options["output"]:
            if Path(output).suffix not in {".json", ".md", ".xml"}:
                self.stderr.write(f"--output {output}: use a .json, .md or .xml file name")
                return EXIT_CONFIG
        try:
            agent = load_agent(options["agent"], parallel_override=options["parallel_test_cases"])
        except ConfigError as exc:
            for line in exc.lines():
                self.stderr.write(line)
            return EXIT_CONFIG
        if options["limit"] is not None and options["limit"] < 1:
            self.stderr.write(f"--limit {options['limit']}: must be at least 1")
            return EXIT_CONFIG
        if options["timeout"] is not None:
            if options["timeout"] <= 0:
                self.stderr.write(f"--timeout {options['timeout']:g}: must be a positive number")
                return EXIT_CONFIG
            agent.config.execution.llm_timeout = options["timeout"]
        from runs.services.launch import cases_select

        indices = cases_select(
            agent.config.test_cases, case_filter=options["filter"], limit=options["limit"]
        )
        if not indices:
            self.stderr.write(f"no test case matches --filter {options['filter']!r}")
            return EXIT_CONFIG
        from runs.engine.metrics import judge_warnings
        from runs.gitutil import git_info

        for warning in judge_warnings(agent):
            self.stderr.write(f"warning: {warning}")
        git = git_info(agent.base_dir)
        try:
            eval_run = self._run(agent, indices, options, git)
        except Exception as exc:  # backend could not start, etc.
            self.stderr.write(f"execution error: {error_text(exc)}")
            return EXIT_EXECUTION
        try:
            self._write_outputs(agent, eval_run, options, git)
        except OSError as exc:
            self.stderr.write(f"execution error: could not write the results: {exc}")
            return EXIT_EXECUTION
        summary = eval_run.report.summary
        self.stdout.write(
            f"{agent.config.name}: {summary.passed}/{summary.total_tests} test cases passed "
            f"({summary.pass_rate:g}%) in {summary.total_duration_ms / 1000:.1f}s"
        )
        return EXIT_PASSED if summary.failed == 0 else EXIT_FAILED

    def _run(self, agent: Any, indices: list[int], options: dict[str, Any], git: Any) -> Any:
        from runs.engine.executor import Engine
        from runs.engine.progress import TerminalProgress
        from runs.report.models import EvalRun, EvalRunMetadata

        cases = agent.config.test_cases
        progress = None
        if not options["quiet"]:
            progress = TerminalProgress(
                sum(len(cases[i].as_turns()) for i in indices), len(indices), stream=sys.stderr
            )
        cli_args = ["manage.py", "run_agent", *sys.argv[2:]]
        store = None if options["no_store"] else self._open_store(agent, indices, options, git)
        self.store = store
        listeners = [listener for listener in (progress, store) if listener is not None]

        async def on_event(event: Any) -> None:
            for listener in listeners:
                await emit(listener, event)

        engine = Engine(agent, on_event=on_event)
        try:
            report = asyncio.run(engine.run(case_indices=indices))
        except Exception as exc:
            if store is not None:
                store.fail(f"execution error: {error_text(exc)}")
            raise
        finally:
            if progress is not None:
                progress.close()
        if store is not None:
            store.close(report)
        return EvalRun(
            report=report,
            metadata=EvalRunMetadata(
                agent_config=agent.redacted_snapshot(),
                prompt_version=None,
                holodeck_version=report.holodeck_version,
                cli_args=cli_args,
                git_commit=git.commit if git else None,
            ),
        )

    def _open_store(self, agent: Any, indices: list[int], options: dict[str, Any], git: Any) -> Any:
        """The run's rows, written as cases finish through the same recorder as the workers'."""
        return RunStore.open(
            agent,
            indices,
            options,
            git,
            cli_args=["manage.py", "run_agent", *sys.argv[2:]],
            warn=lambda line: self.stderr.write(line),
        )

    def _write_outputs(self, agent: Any, eval_run: Any, options: dict[str, Any], git: Any) -> None:
        from runs.report.holodeck_io import write_eval_run
        from runs.report.writers import EXPORT_SUFFIXES, export_text

        if not options["no_results_file"]:
            results_dir = Path(options["results_dir"] or agent.base_dir / "results")
            path = write_eval_run(eval_run, results_dir, datetime.now(UTC))
            self.stdout.write(f"results: {path}")
        for output in options["output"]:
            target = Path(output)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(export_text(eval_run, EXPORT_SUFFIXES[target.suffix]))
            self.stdout.write(f"wrote {target}")
        if self.store is not None and self.store.run is not None:
            self.store.mark_written(eval_run)
            self.stdout.write(f"stored as run {self.store.run.pk}")


class RunStore:
    """Stores a CLI run as it goes, through ``runs.recorder`` (the write path of the workers).

    Storing is best effort: a database that is missing, unmigrated or failing never changes the
    run's outcome or its result file; it is said once on stderr and storing stops.
    """

    def __init__(self, run: Any, recorder: Any, warn: Callable[[str], None]) -> None:
        self.run = run
        self.recorder = recorder
        self.warn = warn

    @classmethod
    def open(
        cls,
        agent: Any,
        indices: list[int],
        options: dict[str, Any],
        git: Any,
        *,
        cli_args: list[str],
        warn: Callable[[str], None],
    ) -> RunStore | None:
        from django.db import DatabaseError

        from runs.models import AgentProject, Run
        from runs.recorder import CaseRecorder, run_open, run_options

        try:
            project = AgentProject.objects.filter(directory=str(agent.base_dir)).first()
            run = run_open(
                agent=agent,
                options=run_options(
                    agent=agent,
                    indices=indices,
                    limit=options["limit"],
                    case_filter=options["filter"],
                ),
                source=Run.Source.CLI,
                project=project,
                git=git,
                cli_args=cli_args,
            )
        except DatabaseError as exc:
            warn(f"warning: the run was not stored in the database: {exc}")
            return None
        return cls(run, CaseRecorder(per_turn=False, claim_in=run), warn)

    async def __call__(self, event: Any) -> None:
        from django.db import DatabaseError

        if self.run is None:
            return
        try:
            await self.recorder(event)
        except DatabaseError as exc:
            self.warn(f"warning: storing the run in the database failed: {exc}")
            self.run = None

    def mark_written(self, eval_run: Any) -> None:
        """Remember the result file's hash: importing that file later finds this run."""
        from django.db import DatabaseError

        from runs.models import Run
        from runs.services.history import eval_run_hash

        if self.run is None:
            return
        try:
            Run.objects.filter(pk=self.run.pk).update(source_hash=eval_run_hash(eval_run))
        except DatabaseError as exc:
            self.warn(f"warning: storing the run in the database failed: {exc}")

    def fail(self, error: str) -> None:
        from django.db import DatabaseError

        from runs.recorder import run_counters

        if self.run is None:
            return
        with contextlib.suppress(DatabaseError):
            self.run.fail(error, **run_counters(self.run))

    def close(self, report: Any) -> None:
        """Settle what the engine never finished and end the run from its rows."""
        from django.db import DatabaseError

        from runs.recorder import case_fail, run_finish

        if self.run is None:
            return
        by_name = {r.test_name: r for r in report.results}
        try:
            for case, attempt in self.recorder.unsettled():
                result = by_name.get(case.name or None)
                error = result.errors[0] if result and result.errors else "execution error"
                case_fail(case, attempt, error)
            run_finish(self.run.pk)
        except DatabaseError as exc:
            self.warn(f"warning: storing the run in the database failed: {exc}")
            self.run = None
