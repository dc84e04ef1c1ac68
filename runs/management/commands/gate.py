from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from runs.compare.gate import (
    GateError,
    baseline_spec_parse,
    gate_baseline,
    gate_evaluate,
    gate_kinds,
    gate_run,
    ignore_triaged_parse,
    metric_drops_parse,
    public_url,
)
from runs.core.writers.gate_markdown import GateOptions
from runs.management.commands import run_agent
from runs.management.exits import EXIT_BAD_INPUT, EXIT_EXECUTION, EXIT_FAILED, EXIT_PASSED


class Command(BaseCommand):
    help = (
        "The CI gate: compare a run (--run ID, or --agent PATH to run an agent.yaml first) with "
        "its baseline and print a Markdown summary for a pull request. Exit codes: 0 within the "
        "thresholds, 1 regressions or a threshold missed, 2 bad input (unknown run, no baseline, "
        "bad option), 3 the agent's run could not execute."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        subject = parser.add_mutually_exclusive_group(required=True)
        subject.add_argument("--run", type=int, help="the id of a stored run")
        subject.add_argument("--agent", help="run this agent.yaml first (stored), then gate it")
        parser.add_argument(
            "--results-dir",
            default=None,
            help="with --agent: where its result file goes (default: the data folder's results/)",
        )
        parser.add_argument(
            "--baseline",
            default="parent-commit",
            help="a run id, parent-commit (the compare rule; default) or latest:<branch>",
        )
        parser.add_argument(
            "--max-regressions", type=int, default=0, help="regressed turns allowed (default 0)"
        )
        parser.add_argument("--min-pass-rate", type=float, default=None, help="0–100")
        parser.add_argument(
            "--kinds", default="", help="count regressions and metrics for these kinds only"
        )
        parser.add_argument(
            "--max-metric-drop",
            action="append",
            default=[],
            metavar="NAME=DROP",
            help="fail when that metric's average dropped by more than DROP; repeatable",
        )
        parser.add_argument(
            "--significant-only",
            action="store_true",
            help="count only significant regressions (over the runs' repetitions and the other "
            "finished runs of both commits; Fisher's exact test, Benjamini-Hochberg) and say how "
            "many changes were within noise",
        )
        parser.add_argument(
            "--alpha",
            type=float,
            default=0.05,
            help="with --significant-only: the false discovery rate (default 0.05)",
        )
        parser.add_argument(
            "--ignore-triaged",
            action="append",
            default=[],
            metavar="CATEGORY[,CATEGORY]",
            help="leave out of the verdict the failures people triaged into these categories of "
            "the project (their regressed turns, and from the pass rate the cases whose every "
            "failure was); listed under their own heading; repeatable",
        )
        parser.add_argument("--markdown", default=None, help="also write the summary here")
        parser.add_argument(
            "--url",
            default=None,
            help="the dashboard's base URL for links (default: the setting HOLODECK_PUBLIC_URL)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        sys.exit(self.gate(options))

    def gate(self, options: dict[str, Any]) -> int:
        try:
            gate_options = self._gate_options(options)
            baseline_spec_parse(options["baseline"])  # bad input is said before any run
            run_id = options["run"]
            if options["agent"] is not None:
                code, run_id = self._run_agent(options["agent"], options["results_dir"])
                if run_id is None:
                    return code
            run = gate_run(run_id)
            result = gate_evaluate(run, gate_baseline(run, options["baseline"]), gate_options)
        except GateError as exc:
            self.stderr.write(f"gate: {exc.message}")
            return EXIT_BAD_INPUT
        self.stdout.write(result.markdown, ending="")
        if options["markdown"]:
            target = Path(options["markdown"])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(result.markdown, encoding="utf-8")
        return EXIT_PASSED if result.passed else EXIT_FAILED

    def _gate_options(self, options: dict[str, Any]) -> Any:
        if options["max_regressions"] < 0:
            raise GateError(f"--max-regressions {options['max_regressions']}: must be 0 or more")
        rate = options["min_pass_rate"]
        if rate is not None and not 0 <= rate <= 100:
            raise GateError(f"--min-pass-rate {rate:g}: must be between 0 and 100")
        alpha = options.get("alpha", 0.05)
        if not 0 < alpha < 1:
            raise GateError(f"--alpha {alpha:g}: must be between 0 and 1")
        return GateOptions(
            significant_only=bool(options.get("significant_only")),
            alpha=alpha,
            max_regressions=options["max_regressions"],
            min_pass_rate=rate,
            kinds=gate_kinds(options["kinds"]),
            max_metric_drop=metric_drops_parse(options["max_metric_drop"]),
            ignore_triaged=ignore_triaged_parse(options.get("ignore_triaged") or []),
            base_url=self._base_url(options["url"] or public_url()),
        )

    def _base_url(self, url: str) -> str:
        if not url:
            self.stderr.write(
                "gate: HOLODECK_PUBLIC_URL is not set, so the summary's links are paths "
                "(/runs/<id>/); set it or pass --url https://your-dashboard"
            )
        return url

    def _run_agent(self, agent: str, results_dir: str | None) -> tuple[int, int | None]:
        """Run the agent.yaml with ``run_agent``'s own code, stored: (exit code, the stored run's
        id, None when there is none). Its lines go to stderr: stdout carries only the summary."""
        runner = run_agent.Command()
        runner.stdout = runner.stderr = self.stderr
        argv = [agent, *(["--results-dir", results_dir] if results_dir else [])]
        options = vars(runner.create_parser("manage.py", "run_agent").parse_args(argv))
        code = runner.execute_run(options)
        if code in (EXIT_BAD_INPUT, EXIT_EXECUTION):
            return code, None
        if runner.store is None or runner.store.run is None:
            self.stderr.write("gate: the run was not stored in the database, so it cannot be gated")
            return EXIT_EXECUTION, None
        return code, int(runner.store.run.pk)
