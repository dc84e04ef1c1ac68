"""`manage.py run_agent`: the CLI for CI (exit codes, result file, JSON / Markdown / JUnit)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from django.core.management import call_command

from runs.core.wire.holodeck_io import load_eval_runs

REPO = Path(__file__).resolve().parents[3]


def run_command(*args: str) -> int:
    with pytest.raises(SystemExit) as exited:
        call_command("run_agent", *args, "--no-store", "--quiet")
    return int(exited.value.code or 0)


def test_the_convfinqa_example_runs_end_to_end_and_writes_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent_dir = tmp_path / "convfinqa"
    shutil.copytree(
        REPO / "examples" / "convfinqa", agent_dir, ignore=shutil.ignore_patterns("results")
    )
    outputs = [tmp_path / "out" / name for name in ("report.json", "report.md", "junit.xml")]
    code = run_command(
        str(agent_dir / "agent.yaml"),
        *(f"--output={p}" for p in outputs),
        f"--results-dir={tmp_path / 'r'}",
    )
    assert code == 1  # one case fails on purpose
    (written,) = (tmp_path / "r").glob("convfinqa-analyst/*.json")
    (run,) = load_eval_runs(written)
    (same,) = load_eval_runs(outputs[0])
    assert run.report.summary == same.report.summary
    assert (run.report.summary.total_tests, run.report.summary.failed) == (3, 1)
    assert sum(len(r.turns or [1]) for r in run.report.results) == 10
    markdown = outputs[1].read_text()
    assert "northwind_capex_decline" in markdown and "FAILED" in markdown
    suite = ET.parse(outputs[2]).getroot()
    cases = suite.findall(".//testcase")
    assert len(cases) == 3
    assert len([c for c in cases if c.find("failure") is not None]) == 1
    # The closing line: the numbers of the run's page and exports, not HoloDeck's summary.
    assert (
        "convfinqa-analyst: 3 test cases: 2 passed, 1 failed, 0 errored, 0 not graded "
        "(pass rate 66.7%) in " in capsys.readouterr().out
    )
    assert "- **Test cases**: 3 total: 2 passed, 1 failed, 0 errored, 0 not graded" in markdown


def test_the_485_turn_fixture_runs_through_the_command_with_a_generated_transcript(
    tmp_path: Path, shared_dir: Path
) -> None:
    fixture = shared_dir / "fixtures" / "convfinqa" / "convfinqa_subset_inline.yaml"
    (tmp_path / "agent.yaml").write_text(
        "name: convfinqa-fixture\n"
        "model: {provider: scripted, name: generated}\n"
        "instructions: {inline: Answer from the filing.}\n"
        "evaluations:\n  metrics:\n    - {type: standard, metric: numeric}\n"
        f"test_cases_file: {fixture}\n"
    )
    output = tmp_path / "report.json"
    code = run_command(
        str(tmp_path / "agent.yaml"),
        f"--output={output}",
        "--no-results-file",
        "--parallel-test-cases=8",
    )
    report = json.loads(output.read_text())["report"]
    assert report["summary"]["total_tests"] == len(report["results"]) == 133
    turns = [turn for result in report["results"] for turn in result["turns"]]
    assert len(turns) == 485
    # Answering the ground truth passes every numeric turn; the few yes/no answers cannot be
    # graded by a numeric metric and say so.
    failing = [turn for turn in turns if not turn["passed"]]
    assert all(turn["ground_truth"] in {"yes", "no"} for turn in failing)
    assert all("could not parse a number" in turn["metric_results"][0]["error"] for turn in failing)
    assert code == (1 if failing else 0)


def test_a_config_error_exits_2_and_names_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "agent.yaml").write_text(
        "name: broken\nmodel: {provider: scripted, name: s}\ninstructions: {inline: x}\n"
        "test_cases:\n  - name: c\n    turns: []\n"
    )
    assert run_command(str(tmp_path / "agent.yaml")) == 2
    assert "test case 'c'" in capsys.readouterr().err


def test_an_execution_error_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.yaml").write_text("just text\n")
    (tmp_path / "agent.yaml").write_text(
        "name: broken\nmodel: {provider: scripted, name: s, transcript: t.yaml}\n"
        "instructions: {inline: x}\ntest_cases:\n  - {name: c, input: hi}\n"
    )
    assert run_command(str(tmp_path / "agent.yaml")) == 3
    assert "execution error" in capsys.readouterr().err


def test_an_unknown_output_format_is_refused(tmp_path: Path) -> None:
    assert run_command(str(REPO / "examples" / "convfinqa" / "agent.yaml"), "--output=x.pdf") == 2


def test_a_filter_that_matches_nothing_is_a_config_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = run_command(str(REPO / "examples" / "convfinqa" / "agent.yaml"), "--filter=nothing")
    assert code == 2
    assert "no test case matches --filter 'nothing'" in capsys.readouterr().err


def test_a_non_positive_timeout_is_a_config_error() -> None:
    assert run_command(str(REPO / "examples" / "convfinqa" / "agent.yaml"), "--timeout=-1") == 2


def test_an_unmigrated_database_only_warns_that_the_run_was_not_stored(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["HOLODECK_DATA_DIR"] = str(tmp_path / "fresh")
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "run_agent",
            str(REPO / "examples" / "convfinqa" / "agent.yaml"),
            "--quiet",
            f"--results-dir={tmp_path / 'results'}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr  # the example's failing case, not a crash
    assert "the run was not stored in the database" in done.stderr
    assert "Traceback" not in done.stderr
