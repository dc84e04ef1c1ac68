"""Compare and the CI gate read the one record of a run: the compare page's headline, the compare
API's headline and the gate's Markdown show each run's stored summary (the numbers of its run
page), whatever the run is compared with."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.compare.gate import gate_baseline, gate_evaluate
from runs.core.verdicts.numbers import format_rate
from runs.core.writers.gate_markdown import GateOptions
from runs.models import Run
from runs.services.tokens import token_create
from tests.web.one_record import (
    IMPORTED,
    MIXED,
    Numbers,
    contradictory_import,
    html_numbers,
    mixed_run,
)

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["contradictory_import", "mixed_run"]  # fixtures

COUNTS = ("passed", "failed", "error", "not_graded")


def compare_page(client: Client, *runs: Run, **params: str) -> str:
    query = {"runs": ",".join(str(run.pk) for run in runs), "baseline": str(runs[0].pk), **params}
    response = client.get(reverse("compare"), query)
    assert response.status_code == 200, response.content[:2000]
    return response.text


def test_the_compare_page_shows_each_runs_stored_summary(
    viewer_client: Client, mixed_run: Run, contradictory_import: Run
) -> None:
    html = compare_page(viewer_client, contradictory_import, mixed_run)
    assert html_numbers(html, mixed_run.pk) == MIXED
    assert html_numbers(html, contradictory_import.pk) == IMPORTED


def test_a_kind_filter_changes_the_matrix_not_the_runs_counts(
    viewer_client: Client, mixed_run: Run, contradictory_import: Run
) -> None:
    html = compare_page(viewer_client, contradictory_import, mixed_run, kinds="standard")
    shown = html_numbers(html, mixed_run.pk)
    assert (shown.cases, shown.turns, shown.pass_rate) == (MIXED.cases, MIXED.turns, "33.3%")
    # Only the metrics of the selected kinds are listed, with the same per-turn counts.
    assert shown.metrics == {"answer_numeric": MIXED.metrics["answer_numeric"]}
    # The pass rate over the selected kinds is a number of its own, labelled so.
    assert "pass rate, standard only" in html
    assert re.search(r'data-kind-pass-rate="standard">[^<]+<', html)


def test_a_second_launch_of_the_same_agent_compares_number_for_number(
    viewer_client: Client, mixed_run: Run, eager_celery: None
) -> None:
    from runs.services.launch import run_create

    assert mixed_run.project is not None
    again = run_create(project=mixed_run.project, user=None)
    again.refresh_from_db()
    html = compare_page(viewer_client, mixed_run, again)
    assert html_numbers(html, mixed_run.pk) == MIXED
    assert html_numbers(html, again.pk) == MIXED


# --- the compare API ---------------------------------------------------------------------------


def api_numbers(headline: dict[str, Any]) -> Numbers:
    summary = headline["summary"]
    return Numbers(
        cases={name: summary["cases"][name] for name in COUNTS},
        turns={name: summary["turns"][name] for name in COUNTS},
        metrics={
            metric["name"]: (
                metric["evaluated"],
                metric["passed"],
                metric["failed"],
                metric["not_graded"],
            )
            for metric in summary["metrics"]
        },
        pass_rate=format_rate(summary["pass_rate"]),
    ).nonzero()


def test_the_compare_api_serves_each_runs_stored_summary(
    client: Client, viewer: User, mixed_run: Run, contradictory_import: Run
) -> None:
    _, secret = token_create(user=viewer, name="ci")
    query: dict[str, list[int] | int] = {
        "runs": [contradictory_import.pk, mixed_run.pk],
        "baseline": contradictory_import.pk,
    }
    response = client.get("/api/v1/compare", query, headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 200, response.content
    headlines = {headline["run_id"]: headline for headline in response.json()["headline"]}
    assert api_numbers(headlines[mixed_run.pk]) == MIXED
    assert api_numbers(headlines[contradictory_import.pk]) == IMPORTED
    assert headlines[mixed_run.pk]["kind_pass_rate"] is None  # no kind filter


# --- the gate's Markdown -----------------------------------------------------------------------


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Every Markdown table of ``text``: its rows (header first, the rule left out) as cells,
    Markdown escapes undone."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [
                re.sub(r"\\(.)", r"\1", cell.strip())
                for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]
            ]
            if not all(set(cell) <= {"-", " "} for cell in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def gate_numbers(markdown: str) -> Numbers:
    """The gated run's numbers in the gate's summary: the first table's run column, and the
    metrics tables (metric, kind, turns graded, passed, failed, not graded, ...; drops and the
    others apart) of the run."""
    counts, *others = markdown_tables(markdown)
    column = {row[0]: row[1] for row in counts[1:]}
    labels = {
        "passed": "passed",
        "failed": "failed",
        "error": "errored",
        "not_graded": "not graded",
    }
    header = ["metric", "kind", "turns graded"]
    metrics = [row for table in others if table[0][:3] == header for row in table[1:]]
    return Numbers(
        cases={name: int(column[f"cases {label}"]) for name, label in labels.items()},
        turns={name: int(column[f"turns {label}"]) for name, label in labels.items()},
        metrics={  # a metric of the baseline only has no counts ("–")
            row[0]: (int(row[2]), int(row[3]), int(row[4]), int(row[5]))
            for row in metrics
            if row[2].isdigit()
        },
        pass_rate=column["pass rate"],
    ).nonzero()


def test_the_gate_markdown_reports_the_runs_stored_summary(
    mixed_run: Run, contradictory_import: Run
) -> None:
    result = gate_evaluate(
        mixed_run, gate_baseline(mixed_run, contradictory_import.pk), GateOptions()
    )
    assert gate_numbers(result.markdown) == MIXED
    assert result.pass_rate == pytest.approx(33.33)
    assert result.run.summary.cases.not_graded == 1

    back = gate_evaluate(
        contradictory_import, gate_baseline(contradictory_import, mixed_run.pk), GateOptions()
    )
    assert gate_numbers(back.markdown) == IMPORTED


def test_markdown_tables_reads_escaped_pipes_as_text() -> None:
    text = "| a | b \\| c\\_d |\n| --- | --- |\n| 1 | 2 |\n\nafter\n| x |\n"
    assert markdown_tables(text) == [[["a", "b | c_d"], ["1", "2"]], [["x"]]]
