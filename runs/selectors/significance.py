"""Is a change between two sides real? Each side is one run or several runs (of one commit);
each case and each turn is sampled over the side's repetitions (``execution.repeats``) and
runs, and ``runs.core.stats.significance`` tests the two samples (Fisher's exact test: repetitions
are independent sessions, not pairs), corrects for the many cases and turns tested at once
(Benjamini–Hochberg) and gives the pass-rate difference a bootstrap confidence interval.

A case or turn sampled once a side is never significant: a single run cannot tell a
regression from a coin flip, and says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from runs.core.stats.significance import (
    DEFAULT_ALPHA,
    RateDifference,
    Significance,
    classify_changes,
    pass_rate_difference,
)
from runs.core.verdicts.numbers import turn_text
from runs.core.verdicts.outcomes import GRADED_VALUES, Outcome
from runs.models import Run, TurnRow

Samples = dict[str, list[bool]]  # unit key -> its graded outcomes (True: passed)
TURN_SEPARATOR = " · turn "  # in a turn's key, between its case's key and its number


@dataclass(frozen=True)
class SideSamples:
    cases: Samples
    turns: Samples


@dataclass(frozen=True)
class RunSignificance:
    """What the two sides' samples say: per case, per turn, and the pass-rate difference."""

    cases: Significance
    turns: Significance
    pass_rate: RateDifference
    before_runs: tuple[int, ...]
    after_runs: tuple[int, ...]

    def turn_class(self, key: str, turn_index: int) -> str | None:
        unit = self.turns.units.get(turn_key(key, turn_index))
        return unit.classification if unit else None


def turn_key(case_key: str, turn_index: int) -> str:
    return f"{case_key} · {turn_text(turn_index)}"  # turn_text: "turn 2"


def turn_key_parse(key: str) -> tuple[str, int]:
    """``turn_key``'s case key and turn index back ("refund · turn 2" -> ("refund", 1))."""
    case_key, _, number = key.rpartition(TURN_SEPARATOR)
    return case_key, int(number) - 1


def side_samples(run_ids: Sequence[int]) -> SideSamples:
    """The graded outcomes of every case and turn of the runs together, over their repetitions
    (one query). Cases are keyed as compare keys them (their name, else ``#index``)."""
    return samples_of(_turn_rows(run_ids))


def samples_by_run(run_ids: Sequence[int]) -> dict[int, SideSamples]:
    """``side_samples`` of each run alone (one query for all of them)."""
    rows: dict[int, list[tuple[int, int, int, str, int, str]]] = {run_id: [] for run_id in run_ids}
    for row in _turn_rows(run_ids):
        rows[row[0]].append(row)
    return {run_id: samples_of(listed) for run_id, listed in rows.items()}


def _turn_rows(run_ids: Sequence[int]) -> Iterable[tuple[int, int, int, str, int, str]]:
    return (
        TurnRow.objects.filter(run_id__in=run_ids)
        .order_by()
        .values_list("run_id", "case_id", "case__index", "case__name", "index", "outcome")
    )


def samples_of(rows: Iterable[tuple[int, int, int, str, int, str]]) -> SideSamples:
    """``side_samples`` of (run, case id, case index, case name, turn index, outcome) rows: a
    case's sample is one outcome per repetition (passed when every graded turn passed)."""
    turns: Samples = {}
    by_case: dict[int, tuple[str, list[bool]]] = {}
    for _run_id, case_id, index, name, turn_index, outcome in rows:
        if outcome not in GRADED_VALUES:
            continue
        key = name or f"#{index}"
        passed = outcome == Outcome.PASSED
        turns.setdefault(turn_key(key, turn_index), []).append(passed)
        by_case.setdefault(case_id, (key, []))[1].append(passed)
    cases: Samples = {}
    for key, outcomes in by_case.values():
        cases.setdefault(key, []).append(all(outcomes))
    return SideSamples(cases=cases, turns=turns)


def runs_significance(
    before: Sequence[Run], after: Sequence[Run], *, alpha: float = DEFAULT_ALPHA
) -> RunSignificance:
    """The significance of the change from the ``before`` runs to the ``after`` runs (two
    queries)."""
    return significance_between(
        side_samples([run.pk for run in before]),
        side_samples([run.pk for run in after]),
        before_runs=tuple(run.pk for run in before),
        after_runs=tuple(run.pk for run in after),
        alpha=alpha,
    )


def significance_between(
    old: SideSamples,
    new: SideSamples,
    *,
    before_runs: tuple[int, ...],
    after_runs: tuple[int, ...],
    alpha: float = DEFAULT_ALPHA,
) -> RunSignificance:
    """The significance of the change from the samples ``old`` to ``new`` (no query)."""
    return RunSignificance(
        cases=_classified(old.cases, new.cases, alpha),
        turns=_classified(old.turns, new.turns, alpha),
        pass_rate=pass_rate_difference(old.cases, new.cases),
        before_runs=before_runs,
        after_runs=after_runs,
    )


def _classified(before: Samples, after: Samples, alpha: float) -> Significance:
    shared = {key: (before[key], after[key]) for key in before.keys() & after.keys()}
    return classify_changes(shared, paired=False, alpha=alpha)


def same_commit_runs(run: Run) -> list[Run]:
    """``run`` and the other finished runs of its project at its commit (re-grades left out):
    the samples of one side when several runs per commit exist."""
    if not run.git_commit:
        return [run]
    others = Run.objects.filter(
        git_commit=run.git_commit,
        status__in=[Run.Status.PASSED, Run.Status.FAILED],
        regrade_of__isnull=True,
    ).exclude(pk=run.pk)
    if run.project_id:
        others = others.filter(project_id=run.project_id)
    else:
        others = others.filter(project__isnull=True, agent_name=run.agent_name)
    return [run, *others.order_by("created_at", "id")]
