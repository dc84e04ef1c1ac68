"""The end of a run: its roll-up computed from its rows, and its status."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.utils import timezone

from runs.core.verdicts.summary import RunSummary
from runs.mapping import summary_of_rows
from runs.models import CASE_COUNTERS, CaseRow, Run, TurnRow
from runs.selectors.case_counts import list_counts_count
from runs.selectors.costs import cost_sums_count, run_prices_warn


def run_settle(run: Run) -> bool:
    """Finish the run once no case is pending or running (True when it did)."""
    open_cases = CaseRow.objects.filter(
        run=run, status__in=[CaseRow.Status.PENDING, CaseRow.Status.RUNNING]
    ).exists()
    if open_cases:
        return False
    run_finish(run.pk)
    return True


def run_finish(run_id: int, *, source_hash: str = "") -> None:
    """Compute the summary from the rows and end the run (once: a conditional UPDATE).

    The live counters are recomputed from the rows here, so they end exact whatever happened
    on the way (redeliveries, recovered cases, cancellation). ``source_hash``: the hash of the
    result file the run ends with (run_agent's), so importing that file finds the run.
    """
    run = Run.objects.get(pk=run_id)
    summary = summary_of_rows(run.pk)
    duration = int((timezone.now() - (run.started_at or run.created_at)).total_seconds() * 1000)
    fields = {
        **run_counters(summary),
        "turns_done": TurnRow.objects.filter(run=run).count(),
        "duration_ms": duration,
        "summary": summary.model_dump(mode="json"),
        # What its case list counts under each filter (its rows change no more).
        "list_counts": list_counts_store(run),
        "report_timestamp": timezone.now().isoformat(),
        **({"source_hash": source_hash} if source_hash else {}),
    }
    status = summary.run_status()
    if status == Run.Status.ERROR:
        ended = run.fail("every test case failed to execute", **fields)
    elif status == Run.Status.CANCELLED:  # a re-grade of a cancelled run (a cancelled run is so)
        ended = run.cancel(**fields)
    else:
        ended = run.finish(passed=status == Run.Status.PASSED, **fields)
    if not ended:
        # Cancelled (or already finished): keep the status but store the summary.
        Run.objects.filter(pk=run.pk).update(**fields)
    statistics_refresh(turns=fields["turns_done"])
    run_prices_warn(run=run, when="finished")


# A run that wrote this many turns or more refreshes PostgreSQL's planner statistics when it
# ends: its pages' plans (which index reads a filter's rows in order) rest on them.
STATISTICS_AFTER_TURNS = 10_000
ROW_TABLES = ("runs_caseresult", "runs_turnresult", "runs_metricresult")


def statistics_refresh(*, turns: int) -> None:
    """``ANALYZE`` the result tables on PostgreSQL after a run of ``turns`` ≥
    ``STATISTICS_AFTER_TURNS`` (what autovacuum does in its own time, or never where it is
    off: without, the planner takes a table of 100,000 new rows for an empty one). A sample
    of each table, about a second at millions of rows; nothing on SQLite."""
    if turns < STATISTICS_AFTER_TURNS or connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {', '.join(ROW_TABLES)}")


def list_counts_store(run: Run) -> dict[str, Any]:
    """What an ended run stores of its rows besides its summary (``Run.list_counts``): its case
    list's counts (``runs.selectors.case_counts``) and its cost's token sums."""
    return {**list_counts_count(run=run), "cost": cost_sums_count(run_ids=[run.pk])[run.pk]}


def run_counters(summary: RunSummary) -> dict[str, Any]:
    """The run's counter columns from its summary."""
    cases = summary.cases
    return {
        "cases_done": cases.done,
        **{column: getattr(cases, outcome.value) for outcome, column in CASE_COUNTERS.items()},
        "pass_rate": summary.pass_rate,
    }


def run_abort(run: Run, error: str) -> bool:
    """End a run that cannot go on (its command died, it could not start) as an error, with the
    summary of what it did write."""
    summary = summary_of_rows(run.pk)
    return run.fail(
        error,
        **run_counters(summary),
        summary=summary.model_dump(mode="json"),
        list_counts=list_counts_store(run),
    )
