"""The one write path: a run stored by ``run_agent`` and the same run executed by the
dashboard's workers give the same rows, field by field (timings and orchestration aside)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import models

from runs.core.runoptions import RunOptions
from runs.models import CaseRow, MetricRow, Run, TurnRow
from runs.recorder import case_rows_ensure
from runs.services import launch
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db(transaction=True)

# Differ by nature between two executions, or between the ways they were started.
TIMINGS = {
    "execution_time_ms",
    "evaluation_time_ms",
    "duration_ms",
    "agent_ms",  # the run's turns' execution times summed (Run.list_counts["compare"])
    "timestamp",
    "session_start_ms",  # 0 or 1 ms for the scripted provider, as the machine allows
}
ORCHESTRATION = {
    "id",
    "uid",
    "run",
    "case",
    "turn",
    "source",
    "source_hash",
    "created_at",
    "started_at",
    "finished_at",
    "report_timestamp",
    "created_by",
    "cli_args",
    "options",
    "enqueued",
    "enqueued_at",
    "heartbeat_at",
    "claimed_by",
}


def values(row: models.Model) -> dict[str, Any]:
    return {
        field.name: without_timings(getattr(row, field.attname))
        for field in row._meta.concrete_fields
        if field.name not in TIMINGS | ORCHESTRATION
    }


def without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def stored(run: Run) -> dict[str, Any]:
    return {
        "run": values(run),
        "cases": [values(c) for c in CaseRow.objects.filter(run=run).order_by("index")],
        "turns": [
            values(t) for t in TurnRow.objects.filter(run=run).order_by("case__index", "index")
        ],
        "metrics": [
            values(m)
            for m in MetricRow.objects.filter(run=run).order_by(
                "turn__case__index", "turn__index", "position"
            )
        ],
    }


def test_the_cli_and_the_dashboard_store_a_run_with_the_same_rows(
    tmp_path: Path, eager_celery: None
) -> None:
    project = example_project(tmp_path)
    dashboard = launch.run_create(project=project)  # eager: the worker's code path runs it
    with pytest.raises(SystemExit):
        call_command("run_agent", str(project.agent_path), "--quiet", "--no-results-file")
    cli = Run.objects.get(source=Run.Source.CLI)
    dashboard.refresh_from_db()
    assert dashboard.status == Run.Status.FAILED and dashboard.turns_done == 10
    ours, theirs = stored(dashboard), stored(cli)
    for table in ("run", "cases", "turns", "metrics"):
        assert ours[table] == theirs[table], table
    assert len(ours["metrics"]) > 10  # the comparison compared something


def test_a_cli_run_is_stored_as_it_goes_and_ends_like_a_dashboard_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = example_project(tmp_path)
    with pytest.raises(SystemExit) as exited:
        call_command("run_agent", str(project.agent_path), "--quiet", "--no-results-file")
    assert exited.value.code == 1
    run = Run.objects.get()
    assert f"stored as run {run.pk}" in capsys.readouterr().out
    assert run.status == Run.Status.FAILED and run.source == Run.Source.CLI
    assert (run.cases_done, run.passed_cases, run.failed_cases) == (3, 2, 1)
    assert run.pass_rate == pytest.approx(66.67)
    assert set(run.cases.values_list("status", flat=True)) == {CaseRow.Status.DONE}
    assert set(run.cases.values_list("outcome", flat=True)) == {"passed", "failed"}


def test_a_run_queued_before_case_rows_were_made_at_launch_gets_them_from_its_options() -> None:
    options = RunOptions(cases=[(0, "refund", False, 1), (1, "", True, 3)], case_indices=[0, 1])
    run = Run.objects.create(agent_name="a", total_cases=2, total_turns=4, **options.fields())

    case_rows_ensure(run)
    case_rows_ensure(run)  # a redelivered start adds nothing

    rows = CaseRow.objects.filter(run=run).order_by("index")
    assert [(c.index, c.name, c.is_multi_turn, c.turn_count) for c in rows] == [
        (0, "refund", False, 1),
        (1, "", True, 3),
    ]
