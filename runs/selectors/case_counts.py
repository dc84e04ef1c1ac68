"""What a run's case list counts under each of its filters, counted once when the run ends and
stored with it (``Run.list_counts``), so the run page of a finished run reads its counts, its
status reason's causes and its repeats tile instead of counting 100,000 rows on every view.

Stored (``list_counts_count``, by the recorder as it stores the run's summary):

- ``all``, ``failures``, ``outcome`` (each stored verdict), ``tools`` (``failed``), ``metric``
  (each metric's name), ``flaky``: how many rows the case list shows under that one filter —
  case rows, or a repeated run's cases (its distinct indices);
- ``causes``: the most common error of its not-graded and of its errored cases (its status
  reason names them);
- ``repeats``: a repeated run's tile (flaky cases, pass@k, pass^k).

A list with a search, a review filter or two filters at once is counted on read (``None``
here); so is every list of a run that is live, or that ended before the counts were stored.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from django.db.models import Count, QuerySet

from runs.core.verdicts.kinds import METRIC_KINDS
from runs.core.verdicts.outcomes import Outcome
from runs.core.verdicts.repeats import RunRepeatStats, run_repeat_stats
from runs.core.verdicts.status import most_common_cause
from runs.models import CaseRow, MetricRow, TurnRow
from runs.selectors.cases import (
    CASE_OUTCOMES,
    TOOL_VERDICTS,
    CaseFilters,
    case_group_indices,
    case_repeat_stats,
    case_rows,
)
from runs.selectors.compare_store import compare_store

if TYPE_CHECKING:
    from runs.models import Run

# The shape of what is stored; a row holding another is counted on read.
LIST_COUNTS_VERSION = 1


def listed(run: Run, cases: QuerySet[CaseRow]) -> QuerySet[Any, Any]:
    """What the case list counts and pages: the case rows, or a repeated run's case indices
    (one row per case, its repetitions under it)."""
    return case_group_indices(cases) if run.repeats > 1 else cases


def list_counts_count(*, run: Run) -> dict[str, Any]:
    """Every stored count of ``run``'s case list, counted from its rows (what the recorder
    stores when the run ends; a few queries, each one over the run's case or metric rows)."""

    def count(filters: CaseFilters) -> int:
        return int(listed(run, case_rows(run=run, filters=filters, fields=("id",))).count())

    repeats = run_repeat_stats(case_repeat_stats(run=run), run.repeats) if run.repeats > 1 else None
    return {
        "version": LIST_COUNTS_VERSION,
        "all": count(CaseFilters()),
        "failures": count(CaseFilters(failures=True)),
        "outcome": {outcome: count(CaseFilters(outcome=outcome)) for outcome in CASE_OUTCOMES},
        "tools": {verdict: count(CaseFilters(tools=verdict)) for verdict in TOOL_VERDICTS},
        "metric": _metric_failures(run),
        "flaky": count(CaseFilters(flaky=True)) if run.repeats > 1 else 0,
        "causes": {
            Outcome.NOT_GRADED.value: _not_graded_cause(run),
            Outcome.ERROR.value: _case_error_cause(run, Outcome.ERROR),
        },
        "repeats": _stored_repeats(repeats) if repeats is not None else None,
        # What a compare reads instead of the run's turns (runs.selectors.compare_store).
        "compare": compare_store(run=run),
    }


def _metric_failures(run: Run) -> dict[str, int]:
    """Per metric of the run, how many rows the list filtered to it shows (its cases with a
    turn that failed it, by the index each metric row keeps: a repeated run's list counts case
    indices, and so does this). One query, no join."""
    counted = (
        MetricRow.objects.filter(run=run, kind__in=METRIC_KINDS, outcome=Outcome.FAILED)
        .order_by()
        .values("metric_name")
        .annotate(n=Count("case_index", distinct=True))
        .values_list("metric_name", "n")
    )
    return dict(counted)


def _stored_repeats(stats: RunRepeatStats) -> dict[str, Any]:
    found = asdict(stats)
    found.pop("live")
    return found


def _stored(run: Run) -> dict[str, Any] | None:
    """The run's stored counts, when they hold for its rows: it has ended (a live run's rows
    change) and they are of this shape."""
    stored = run.list_counts
    if run.is_live or not isinstance(stored, dict):
        return None
    return stored if stored.get("version") == LIST_COUNTS_VERSION else None


def list_count_stored(*, run: Run, filters: CaseFilters) -> int | None:
    """How many rows ``run``'s case list shows under ``filters`` (one of them at most, no
    search), as stored when it ended; None when it must be counted (a search, two filters, a
    live run, none stored). The run page's review filter is counted by its caller."""
    stored = _stored(run)
    if stored is None or filters.query or filters.text:
        return None
    chosen = {
        key: value
        for key, value in (
            ("failures", filters.failures),
            ("outcome", filters.outcome),
            ("metric", filters.metric),
            ("tools", filters.tools),
            ("flaky", filters.flaky),
        )
        if value
    }
    if len(chosen) > 1:
        return None
    if not chosen:
        return int(stored["all"])
    ((key, value),) = chosen.items()
    found = stored.get(key)
    if isinstance(found, dict):
        return int(found.get(value, 0))  # a metric the run has no failure of: none
    return int(found) if found is not None else None


def case_cause(*, run: Run, outcome: Outcome) -> str:
    """The most common error of ``run``'s cases with ``outcome`` (not graded, errored): stored
    when it ended, else read from a bounded sample of its rows."""
    stored = _stored(run)
    cause = stored.get("causes", {}).get(outcome.value) if stored is not None else None
    if isinstance(cause, str):
        return cause
    if outcome == Outcome.NOT_GRADED:
        return _not_graded_cause(run)
    return _case_error_cause(run, outcome)


# How many not-graded or errored rows (of how many cases) a cause is read from: enough to find
# it, bounded whatever the size of the run (the cases are found through the index on run and
# outcome, their turns through their case, their metrics through their turn).
CAUSE_SAMPLE = 500
CAUSE_CASES = 100


def _not_graded_cause(run: Run) -> str:
    """The most common error of the metrics that could not grade in the run's not-graded
    cases; else (a case with nothing to grade) of those cases' own errors."""
    cases = CaseRow.objects.filter(run=run, outcome=Outcome.NOT_GRADED).order_by()
    ids = list(cases.values_list("pk", flat=True)[:CAUSE_CASES])
    if not ids:
        return ""
    turns = list(TurnRow.objects.filter(case_id__in=ids).values_list("pk", flat=True))
    errors = (
        MetricRow.objects.filter(turn_id__in=turns, outcome__in=(Outcome.NOT_GRADED, Outcome.ERROR))
        .exclude(error=None)
        .order_by()
        .values_list("error", flat=True)[:CAUSE_SAMPLE]
    )
    return most_common_cause(errors) or _case_error_cause(run, Outcome.NOT_GRADED)


def _case_error_cause(run: Run, outcome: Outcome) -> str:
    """The most common first error of the run's cases with ``outcome``."""
    rows = (
        CaseRow.objects.filter(run=run, outcome=outcome)
        .order_by()
        .values_list("errors", flat=True)[:CAUSE_SAMPLE]
    )
    return most_common_cause([str(errors[0]) for errors in rows if errors])


def repeats_stored(*, run: Run) -> RunRepeatStats | None:
    """A repeated run's tile as stored when it ended; None when it must be counted."""
    stored = _stored(run)
    found = stored.get("repeats") if stored is not None else None
    if not isinstance(found, dict):
        return None
    return RunRepeatStats(**found)
