"""The API and the three export formats report the run's one summary: the same case counts,
turn counts, metric counts (per turn) and pass rate as the run page, for a run with passed,
failed, not graded and errored turns and for an import whose summary contradicts its results.

Each surface has its small reader here: the API's JSON, the JSON export's ``run_summary``, the
Markdown's header lines and metric table, the JUnit suite's properties.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.core.verdicts.numbers import format_rate
from runs.core.verdicts.outcomes import Outcome
from runs.models import CaseRow, Run
from runs.services.tokens import token_create
from tests.web.one_record import (
    IMPORTED,
    MIXED,
    Numbers,
    contradictory_import,
    mixed_run,
)

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["contradictory_import", "mixed_run"]  # fixtures

API = "/api/v1"
# The outcome counts a surface states (zero counts may be left out).
COUNTED = tuple(outcome.value for outcome in Outcome)
METRIC_COLUMNS = ("evaluated", "passed", "failed", Outcome.NOT_GRADED.value)


@pytest.fixture
def token(viewer: User) -> dict[str, str]:
    _, secret = token_create(user=viewer, name="exports")
    return {"Authorization": f"Bearer {secret}"}


def export(client: Client, token: dict[str, str], run: Run, fmt: str) -> str:
    response = client.get(f"{API}/runs/{run.pk}/export", {"format": fmt}, headers=token)
    assert response.status_code == 200
    return response.content.decode()


# --- the readers ---------------------------------------------------------------------------------


def summary_numbers(summary: dict[str, Any]) -> Numbers:
    """A RunSummary as JSON (the API's ``summary``, the JSON export's ``run_summary``)."""
    return Numbers(
        cases={key: summary["cases"][key] for key in COUNTED if key in summary["cases"]},
        turns={key: summary["turns"][key] for key in COUNTED if key in summary["turns"]},
        metrics={
            m["name"]: (m["evaluated"], m["passed"], m["failed"], m["not_graded"])
            for m in summary["metrics"]
        },
        pass_rate=format_rate(summary["pass_rate"]),
    ).nonzero()


_COUNT = re.compile(r"(\d+) ([a-z ]+?)(?=,|$| \()")
_LABELS = {outcome.label: outcome.value for outcome in Outcome}


def markdown_numbers(text: str) -> Numbers:
    """The header's "Test cases" and "Turns" lines and the "Metrics (per turn)" table."""
    lines = text.splitlines()
    cases_line = next(line for line in lines if line.startswith("- **Test cases**: "))
    turns_line = next(line for line in lines if line.startswith("- **Turns**: "))
    rate = re.search(r"\(pass rate (.+?)\)", cases_line)
    assert rate is not None
    table = lines[lines.index("## Metrics (per turn)") :]
    assert "| Turns graded | Passed | Failed | Not graded |" in table[2]
    metrics: dict[str, tuple[int, int, int, int]] = {}
    for row in table[4:]:
        if not row.startswith("| "):
            break
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        evaluated, passed, failed, not_graded = (int(cell) for cell in cells[2:6])
        metrics[cells[0]] = (evaluated, passed, failed, not_graded)
    return Numbers(
        cases=_counts(cases_line),
        turns=_counts(turns_line),
        metrics=metrics,
        pass_rate=rate.group(1),
    ).nonzero()


def _counts(line: str) -> dict[str, int]:
    counts = line.split(" total: ", 1)[1]
    return {_LABELS[label]: int(number) for number, label in _COUNT.findall(counts)}


def junit_numbers(xml: str) -> Numbers:
    """The testsuite's properties: ``cases.<outcome>``, ``turns.<outcome>``, ``pass_rate``,
    ``metric.<name>.<column>``."""
    suite = ET.fromstring(xml).find("testsuite")
    assert suite is not None
    properties = {
        p.get("name", ""): p.get("value", "") for p in suite.findall("properties/property")
    }
    counts: dict[str, dict[str, int]] = {"cases": {}, "turns": {}}
    metrics: dict[str, list[int]] = {}
    for name, value in properties.items():
        scope, _, key = name.partition(".")
        if scope in counts and key in COUNTED:
            counts[scope][key] = int(value)
        elif scope == "metric" and key.rsplit(".", 1)[-1] in METRIC_COLUMNS:
            metric, column = key.rsplit(".", 1)
            metrics.setdefault(metric, [0, 0, 0, 0])[METRIC_COLUMNS.index(column)] = int(value)
    return Numbers(
        cases=counts["cases"],
        turns=counts["turns"],
        metrics={name: (v[0], v[1], v[2], v[3]) for name, v in metrics.items()},
        pass_rate=properties["pass_rate"],
    ).nonzero()


# --- every surface, both runs --------------------------------------------------------------------


def surfaces(client: Client, token: dict[str, str], run: Run) -> dict[str, Numbers]:
    detail = client.get(f"{API}/runs/{run.pk}", headers=token).json()
    document = json.loads(export(client, token, run, "json"))
    return {
        "api": summary_numbers(detail["summary"]),
        "json": summary_numbers(document["report"]["run_summary"]),
        "markdown": markdown_numbers(export(client, token, run, "markdown")),
        "junit": junit_numbers(export(client, token, run, "junit")),
    }


def test_the_api_and_every_export_report_the_mixed_runs_numbers(
    client: Client, token: dict[str, str], mixed_run: Run
) -> None:
    assert surfaces(client, token, mixed_run) == dict.fromkeys(
        ("api", "json", "markdown", "junit"), MIXED
    )


def test_the_api_and_every_export_report_the_imported_runs_results_not_its_file_summary(
    client: Client, token: dict[str, str], contradictory_import: Run
) -> None:
    assert surfaces(client, token, contradictory_import) == dict.fromkeys(
        ("api", "json", "markdown", "junit"), IMPORTED
    )
    report = json.loads(export(client, token, contradictory_import, "json"))["report"]
    # HoloDeck's own summary, per case, is the results' too (the file said 11 and 1).
    assert (report["summary"]["passed"], report["summary"]["failed"]) == (12, 0)


# --- the not graded turn, and the verdicts the files carry ---------------------------------------


def test_the_not_graded_case_is_skipped_in_junit_and_not_graded_in_markdown(
    client: Client, token: dict[str, str], mixed_run: Run
) -> None:
    suite = ET.fromstring(export(client, token, mixed_run, "junit")).find("testsuite")
    assert suite is not None
    [case] = suite.findall("testcase[@name='grader_down']")
    assert [child.tag for child in case if child.tag in ("failure", "error", "skipped")] == [
        "skipped"
    ]
    assert case.findall("skipped")[0].get("message", "").startswith("not graded: turn 2 of 2")
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("2", "0", "1")

    markdown = export(client, token, mixed_run, "markdown")
    assert "### ⚠️ 3. grader_down (NOT GRADED)" in markdown
    assert "| 2 | ⚠️ not graded | and plus 1? |" in markdown
    assert "| 2 | 💥 errored | and plus 1? |" in markdown  # agent_breaks' second turn


def test_the_api_export_and_the_results_file_keep_0_based_turn_index_while_people_read_from_1(
    client: Client, token: dict[str, str], mixed_run: Run, tmp_path: Path
) -> None:
    from runs.core.wire.holodeck_io import write_eval_run
    from runs.selectors import run_eval_run

    results = json.loads(export(client, token, mixed_run, "json"))["report"]["results"]
    multi = [result for result in results if len(result["turns"] or []) == 2]
    assert multi and all([t["turn_index"] for t in r["turns"]] == [0, 1] for r in multi)
    written = json.loads(write_eval_run(run_eval_run(run=mixed_run), tmp_path).read_text())
    indexes = [[t["turn_index"] for t in r["turns"] or []] for r in written["report"]["results"]]
    assert [0, 1] in indexes and all(0 in found for found in indexes if found)
    markdown = export(client, token, mixed_run, "markdown")
    assert "| 0 |" not in markdown.split("## Test cases")[1]  # turns read from 1


def test_the_json_export_carries_the_stored_verdicts_and_a_results_file_does_not(
    client: Client, token: dict[str, str], mixed_run: Run, tmp_path: Path
) -> None:
    from runs.core.wire.holodeck_io import write_eval_run
    from runs.selectors import run_eval_run

    results = json.loads(export(client, token, mixed_run, "json"))["report"]["results"]
    stored = dict(CaseRow.objects.filter(run=mixed_run).values_list("name", "outcome"))
    assert {result["test_name"]: result["outcome"] for result in results} == stored
    turns = [turn["outcome"] for result in results for turn in result["turns"] or []]
    assert Outcome.NOT_GRADED.value in turns and Outcome.ERROR.value in turns

    written = write_eval_run(run_eval_run(run=mixed_run), tmp_path).read_text()
    assert '"outcome"' not in written and '"kind_outcomes"' not in written
    assert '"run_summary"' not in written
