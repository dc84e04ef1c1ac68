"""The compare model's two layouts (against the baseline, or in commit order against the run
before), "changed back and forth" (never "flaky"), a metric's score deltas and the search: no
database, no Django."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from runs.core.commit_order import commit_ordered, on_history
from runs.core.comparison.matrix import (
    BASELINE_ORDER,
    COMMIT_ORDER,
    CaseData,
    Matrix,
    TurnData,
    build_matrix,
    changed_back_and_forth,
    compared_with,
    series_churn,
)
from runs.core.comparison.query import (
    attach_hits,
    attach_scores,
    rows_dropping,
    rows_matching,
    select_rows,
    sort_rows,
)
from runs.core.verdicts.numbers import format_score_delta
from runs.core.verdicts.outcomes import Outcome

P, F, E, N = Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.NOT_GRADED


def case(run_id: int, index: int, *outcomes: str) -> CaseData:
    """Case ``index`` of run ``run_id``, one turn per outcome (ids: run * 100 + index)."""
    turns = tuple(TurnData(n, outcome, {"code": outcome}) for n, outcome in enumerate(outcomes))
    failed = any(outcome != "passed" for outcome in outcomes)
    return CaseData(
        case_id=run_id * 100 + index,
        index=index,
        name=f"case {index}",
        status="done",
        outcome="failed" if failed else "passed",
        kinds={"code": "failed" if failed else "passed"},
        turns=turns,
    )


def runs_of(*columns: Sequence[Sequence[str]]) -> dict[int, Sequence[CaseData]]:
    """Runs 1, 2, ... (oldest first), each a list of cases given as their turns' outcomes."""
    return {
        run_id: [case(run_id, index, *turns) for index, turns in enumerate(cases)]
        for run_id, cases in enumerate(columns, start=1)
    }


def in_order(runs: dict[int, Sequence[CaseData]], order: str, baseline: int) -> Matrix:
    ids = list(runs) if order == COMMIT_ORDER else [baseline] + [r for r in runs if r != baseline]
    return build_matrix(
        {run_id: runs[run_id] for run_id in ids},
        baseline,
        against=compared_with(ids, baseline, order),
        timeline=sorted(runs),
    )


# --- the two layouts ---------------------------------------------------------------------------


def test_in_commit_order_each_run_is_compared_with_the_one_before_it() -> None:
    assert compared_with([1, 2, 3], 3, COMMIT_ORDER) == {2: 1, 3: 2}
    assert compared_with([3, 1, 2], 3, BASELINE_ORDER) == {1: 3, 2: 3}


def test_an_older_run_against_a_newer_baseline_reads_forward_in_time_as_in_commit_order() -> None:
    # Case 0 fails in the oldest run and passes since: against the newest (the baseline) the
    # oldest reads forward in time, a fix (never "regressed"); in commit order the middle run
    # fixed it.
    runs = runs_of([["failed"]], [["passed"]], [["passed"]])

    by_baseline = in_order(runs, BASELINE_ORDER, baseline=3)
    in_time = in_order(runs, COMMIT_ORDER, baseline=3)

    assert by_baseline.backwards == frozenset({1, 2})
    assert by_baseline.rows[0].changes == {1: (0, 1)}
    assert in_time.rows[0].changes == {2: (0, 1)}
    assert in_time.totals(2) == (0, 1) and in_time.totals(3) == (0, 0)
    assert in_time.by_kind["code"] == {2: (0, 1), 3: (0, 0)}
    assert by_baseline.by_kind["code"] == {1: (0, 1), 2: (0, 0)}


def test_the_regressions_by_kind_in_commit_order_are_counted_against_the_run_before() -> None:
    runs = runs_of(
        [["passed", "passed"], ["failed"]],
        [["failed", "passed"], ["passed"]],
        [["failed", "failed"], ["failed"]],
    )

    matrix = in_order(runs, COMMIT_ORDER, baseline=1)

    assert matrix.by_kind["code"] == {2: (1, 1), 3: (2, 0)}
    assert [matrix.totals(run_id) for run_id in (2, 3)] == [(1, 1), (2, 0)]


# --- changed back and forth, never "flaky" -------------------------------------------------------


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([P, F, P], True),
        ([F, P, F], True),
        ([P, E, N, P], True),  # not graded is passed over; errored is bad, as failed is
        ([P, F, F], False),  # one change between commits: a regression, not instability
        ([F, F, P], False),
        ([P, N, P], False),
        ([P, Outcome.ABSENT, F, Outcome.PENDING], False),
        ([], False),
    ],
)
def test_a_turn_changed_back_and_forth_only_when_it_went_one_way_and_back(
    verdicts: list[Outcome], expected: bool
) -> None:
    assert changed_back_and_forth(verdicts) is expected


def test_a_verdict_that_differs_between_commits_is_a_change_not_unstable() -> None:
    # The old "flaky" flagged any case whose verdict differed across the non-baseline runs.
    runs = runs_of([["passed"], ["passed"]], [["passed"], ["failed"]], [["failed"], ["passed"]])

    matrix = in_order(runs, COMMIT_ORDER, baseline=1)
    once, twice = matrix.rows

    assert (once.regressions, once.unstable) == (1, False)
    assert (twice.regressions, twice.fixes, twice.unstable) == (1, 1, True)
    assert twice.changed and once.changed


def test_back_and_forth_follows_the_timeline_whatever_the_columns_order() -> None:
    runs = runs_of([["passed"]], [["failed"]], [["passed"]])
    # Baseline layout with the newest run as the baseline: columns 3, 1, 2.
    matrix = in_order(runs, BASELINE_ORDER, baseline=3)

    assert matrix.rows[0].unstable


def test_show_flaky_is_the_old_name_of_unstable() -> None:
    runs = runs_of([["passed"], ["passed"]], [["failed"], ["passed"]], [["passed"], ["failed"]])
    rows = in_order(runs, COMMIT_ORDER, baseline=1).rows

    assert select_rows(rows, "flaky") == select_rows(rows, "unstable") == [rows[0]]
    assert rows[0].flaky is rows[0].unstable is True
    assert rows[1].flaky is False


# --- a metric's scores and deltas ----------------------------------------------------------------


def scored(order: str, scores: dict[int, float]) -> Matrix:
    """Three runs of four passing cases; ``scores``: case id -> score (run * 100 + index)."""
    runs = runs_of(*[[["passed"]] * 4] * 3)
    matrix = in_order(runs, order, baseline=1)
    attach_scores(matrix, scores)
    return matrix


def test_a_case_without_the_metric_has_no_score_and_no_delta_never_zero() -> None:
    matrix = scored(BASELINE_ORDER, {100: 0.8, 200: 0.5, 101: 0.9})
    first, second, *_ = matrix.rows

    assert first.scores == {1: 0.8, 2: 0.5} and first.deltas == {2: -0.3}
    assert 3 not in first.scores and 3 not in first.deltas
    assert second.scores == {1: 0.9} and second.deltas == {}
    assert second.drop is None


def test_deltas_are_against_the_cell_each_run_is_compared_with() -> None:
    scores = {100: 0.9, 200: 0.6, 300: 0.7}

    by_baseline = scored(BASELINE_ORDER, scores).rows[0]
    in_time = scored(COMMIT_ORDER, scores).rows[0]

    assert by_baseline.deltas == {2: pytest.approx(-0.3), 3: pytest.approx(-0.2)}
    assert in_time.deltas == {2: pytest.approx(-0.3), 3: pytest.approx(0.1)}
    assert in_time.drop == pytest.approx(0.3)


def test_sorting_by_delta_puts_the_largest_drop_first_and_rows_without_a_delta_last() -> None:
    scores = {100: 0.9, 200: 0.8, 101: 0.9, 201: 0.2, 102: 0.5, 202: 0.7}
    rows = scored(BASELINE_ORDER, scores).rows  # case 3 has no score at all

    ordered = sort_rows(rows, "delta")

    assert [row.key for row in ordered] == ["case 1", "case 0", "case 2", "case 3"]
    assert [row.drop for row in ordered] == [pytest.approx(0.7), pytest.approx(0.1), None, None]


def test_a_minimum_drop_keeps_the_rows_that_fell_at_least_that_much() -> None:
    scores = {100: 0.9, 200: 0.8, 101: 0.9, 201: 0.2, 102: 0.5, 202: 0.7}
    rows = scored(BASELINE_ORDER, scores).rows

    assert [row.key for row in rows_dropping(rows, 0.1)] == ["case 0", "case 1"]  # inclusive
    assert [row.key for row in rows_dropping(rows, 0.5)] == ["case 1"]
    assert rows_dropping(rows, 0.8) == []


def test_equal_scores_have_a_delta_of_exactly_zero() -> None:
    # 0.1 + 0.2 is not 0.3 in binary floats: a mean of turns can differ in the last bit.
    row = scored(BASELINE_ORDER, {100: 0.3, 200: 0.1 + 0.2}).rows[0]

    assert row.deltas == {2: 0.0} and row.drop is None


@pytest.mark.parametrize(
    ("delta", "text"),
    [(-0.12, "−0.12"), (0.05, "+0.05"), (-0.004, "−0.004"), (0.0, "±0"), (None, "–")],
)
def test_a_score_delta_reads_with_a_real_minus_and_two_decimals(
    delta: float | None, text: str
) -> None:
    assert format_score_delta(delta) == text


# --- the search --------------------------------------------------------------------------------


def test_the_search_keeps_the_rows_with_a_matching_turn_and_says_which_turns() -> None:
    runs = runs_of([["passed", "passed"]] * 3, [["passed", "passed"]] * 3)
    matrix = in_order(runs, BASELINE_ORDER, baseline=1)

    attach_hits(matrix, {201: {1, 0}, 102: {1}})

    kept = rows_matching(matrix.rows)
    assert [row.key for row in kept] == ["case 1", "case 2"]
    assert kept[0].hits == {2: (0, 1)} and kept[1].hits == {1: (1,)}


# --- trends' churn -----------------------------------------------------------------------------


def test_a_series_counts_each_runs_regressed_and_fixed_turns_against_the_run_before() -> None:
    runs = runs_of(
        [["passed", "failed"], ["passed"]],
        [["failed", "passed"], ["passed"]],
        [["failed", "passed"], ["error"]],
        [["passed", "passed"]],  # case 1 gone: nothing to count for it
    )
    series = [runs[run_id] for run_id in sorted(runs)]

    assert series_churn(series) == [None, (1, 1), (1, 0), (0, 1)]
    # An errored turn is errored whatever the kinds: a regression under any filter.
    assert series_churn(series, ["code"]) == [None, (1, 1), (1, 0), (0, 1)]
    assert series_churn(series, ["rag"]) == [None, (0, 0), (0, 0), (0, 0)]  # no rag ran
    assert series_churn([]) == [] and series_churn(series[:1]) == [None]


# --- commit order ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placed:
    id: int
    commit: str
    created_at: datetime


def test_runs_follow_the_history_and_runs_off_it_are_merged_by_date() -> None:
    start = datetime(2026, 3, 1, tzinfo=UTC)
    history = ["a" * 40, "b" * 40, "c" * 40]
    on_c = Placed(1, "c" * 40, start)
    on_a = Placed(2, "aaaaaaa", start + timedelta(hours=1))  # a short commit: by its prefix
    off = Placed(3, "d" * 40, start + timedelta(hours=2))
    on_b = Placed(4, "b" * 40, start + timedelta(hours=3))

    assert [run.id for run in commit_ordered([on_c, on_a, off, on_b], history)] == [2, 3, 4, 1]
    assert on_history("aaaaaaa", history) and not on_history("d" * 40, history)
    assert not on_history("", history) and not on_history("aaa", history)


def test_an_older_runs_significance_against_a_newer_baseline_reads_forward_in_time_too() -> None:
    from runs.core.stats.significance import SIGNIFICANTLY_WORSE

    # Run 1 (older) failed where run 2 (the newer baseline) passes, and its repetitions say it
    # is significantly worse than run 2: going forward in time, that is a significant fix.
    runs = runs_of([["failed"]], [["passed"]])

    def worse(run_id: int, key: str, index: int) -> str | None:
        return SIGNIFICANTLY_WORSE

    matrix = build_matrix(runs, 2, against={1: 2}, timeline=[1, 2], significance=worse)

    assert matrix.backwards == frozenset({1})
    assert matrix.rows[0].changes == {1: (0, 1)} and matrix.rows[0].noise == 0
    assert matrix.by_kind["code"] == {1: (0, 1)}
