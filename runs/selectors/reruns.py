"""A run's re-runs (``runs.services.rerun``): what a re-run ran, a run's re-runs, and the cases
a re-run of its failed ones takes."""

from __future__ import annotations

from dataclasses import dataclass

from runs.core.runoptions import RERUN_FAILED
from runs.core.verdicts.numbers import case_text
from runs.core.verdicts.outcomes import Outcome
from runs.models import CaseRow, Run
from runs.selectors.case_counts import list_count_stored
from runs.selectors.cases import CaseFilters

# What a re-run of "the failed cases" takes: the cases that failed, and those that errored.
FAILED_OUTCOMES = (Outcome.FAILED.value, Outcome.ERROR.value)


@dataclass(frozen=True)
class RerunState:
    """What the run page says of re-runs (``runs/_rerun.html``)."""

    text: str  # what this run re-ran ("failed cases", "case <name>"); "" for no re-run
    reruns: list[int]  # ids of this run's re-runs
    failed: int  # cases a re-run of its failed ones takes (0: none, or it cannot be re-run)


def run_rerun_state(*, run: Run) -> RerunState:
    """No query for a live run; one for its re-runs, one more when it has failed cases and can
    be re-run."""
    if run.is_live:  # nothing to re-run yet, and no re-run of it yet
        return RerunState(text=rerun_text(run), reruns=[], failed=0)
    bad = run.failed_cases + run.errored_cases  # the cases a re-run of its failures takes
    failed = _failed_cases(run) if bad and run_rerunnable(run) else 0
    return RerunState(
        text=rerun_text(run),
        reruns=list(run.reruns.order_by("pk").values_list("pk", flat=True)),
        failed=failed,
    )


def _failed_cases(run: Run) -> int:
    """How many cases a re-run of its failures takes: its list of failures counts them (stored
    when it ended), else counted from its rows."""
    stored = list_count_stored(run=run, filters=CaseFilters(failures=True))
    return stored if stored is not None else len(failed_case_indices(run=run))


def run_rerunnable(run: Run) -> bool:
    """Its cases can be run again: it has settled, has a snapshot of the files it ran, and
    called the agent (a re-grade did not)."""
    return not run.is_live and run.snapshot_id is not None and run.source != Run.Source.REGRADE


def failed_case_indices(*, run: Run) -> list[int]:
    """The indices of its cases that failed or errored (with repeats: in any repetition)."""
    rows = CaseRow.objects.filter(run=run, outcome__in=FAILED_OUTCOMES)
    return sorted(set(rows.values_list("index", flat=True)))


def rerun_text(run: Run) -> str:
    """What a re-run ran, for its header: "failed cases", or "case <name>" ("case 3" for a case
    without a name); "" when ``run`` is no re-run."""
    picked = run.run_options.rerun if run.rerun_of_id else None
    if picked is None:
        return ""
    if picked.cases == RERUN_FAILED:
        return "failed cases"
    if picked.case is None:
        return ""
    return f"case {picked.name}" if picked.name else case_text(picked.case)
