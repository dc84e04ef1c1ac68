"""The compare matrix decides a row once for rows alike: the same matrix whether the cases'
turns and verdicts are shared objects (as the compare selector hands them out) or not."""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from itertools import pairwise

import pytest

from runs.core.comparison.matrix import (
    COMMIT_ORDER,
    FIX,
    REGRESSION,
    CaseData,
    Matrix,
    TurnData,
    build_matrix,
    change_of,
    compared_with,
    verdict,
)
from runs.core.verdicts.kinds import KINDS
from runs.core.verdicts.outcomes import Outcome

TURN_OUTCOMES = ("passed", "failed", "error", "not_graded", "skipped")
KIND_OUTCOMES = ("passed", "failed", "not_graded")
CASE_STATES = ("done", "done", "done", "pending", "running", "error", "cancelled")


def shared_runs(seed: int, runs: int, cases: int, variety: int) -> dict[int, Sequence[CaseData]]:
    """Runs of cases drawn from ``variety`` turn lists and verdicts by kind, shared between
    cases and runs (few: many rows alike); some cases are missing from some runs, some have
    fewer turns, some are still open."""
    rng = random.Random(seed)
    outcomes = rng.sample(TURN_OUTCOMES, variety)
    verdicts = [
        {kind: rng.choice(KIND_OUTCOMES) for kind in rng.sample(KINDS, rng.randint(0, 3))}
        for _ in range(variety)
    ]
    turn_lists = [
        tuple(
            TurnData(index=index, outcome=rng.choice(TURN_OUTCOMES), kinds=rng.choice(verdicts))
            for index in range(rng.randint(0, 3))
        )
        for _ in range(variety)
    ]
    found: dict[int, Sequence[CaseData]] = {}
    for run_id in range(1, runs + 1):
        found[run_id] = [
            CaseData(
                case_id=run_id * 1000 + index,
                index=index,
                name=f"case {index}" if index % 5 else "",
                status=(status := rng.choice(CASE_STATES)),
                outcome="" if status in ("pending", "running") else rng.choice(outcomes),
                kinds=rng.choice(verdicts),
                turns=rng.choice(turn_lists) if status != "pending" else (),
            )
            for index in range(cases)
            if rng.random() > 0.1  # absent from this run
        ]
    return found


def unshared(runs: dict[int, Sequence[CaseData]]) -> dict[int, Sequence[CaseData]]:
    """The same runs with every case's turns and verdicts an object of its own."""
    return {run_id: [copy.deepcopy(case) for case in cases] for run_id, cases in runs.items()}


def brute_force_totals(matrix: Matrix, run_id: int) -> tuple[int, int]:
    if run_id not in matrix.against:
        return 0, 0
    regressions = fixes = 0
    for row in matrix.rows:
        for line in row.turns:
            change = change_of(
                line.get(matrix.against[run_id], Outcome.ABSENT), line.get(run_id, Outcome.ABSENT)
            )
            regressions += change == REGRESSION
            fixes += change == FIX
    return regressions, fixes


def brute_force_by_kind(
    runs: dict[int, Sequence[CaseData]], kind: str
) -> dict[int, tuple[int, int]]:
    """Per run, (regressions, fixes) of its turns against the baseline's (run 1) under ``kind``."""
    only = frozenset({kind})
    base = {case.key: case for case in runs[1]}
    counts = {}
    for run_id, cases in runs.items():
        if run_id == 1:
            continue
        changes = [
            change_of(
                verdict(before.outcome, before.kinds, only),
                verdict(after.outcome, after.kinds, only),
            )
            for case in cases
            if case.key in base
            for before, after in zip(base[case.key].turns, case.turns, strict=False)
        ]
        counts[run_id] = (changes.count(REGRESSION), changes.count(FIX))
    return counts


def brute_force_in_commit_order(
    runs: dict[int, Sequence[CaseData]], kind: str
) -> dict[int, tuple[int, int]]:
    """Per run, (regressions, fixes) of its turns against the run before it under ``kind``."""
    only = frozenset({kind})
    ids = sorted(runs)
    counts = {}
    for before_id, run_id in pairwise(ids):
        base = {case.key: case for case in runs[before_id]}
        changes = [
            change_of(
                verdict(before.outcome, before.kinds, only),
                verdict(after.outcome, after.kinds, only),
            )
            for case in runs[run_id]
            if case.key in base
            for before, after in zip(base[case.key].turns, case.turns, strict=False)
        ]
        counts[run_id] = (changes.count(REGRESSION), changes.count(FIX))
    return counts


def as_data(matrix: Matrix) -> tuple[object, ...]:
    rows = [(row.key, row.index, row.cells, row.case_ids, row.turns) for row in matrix.rows] + [
        (row.regressions, row.fixes, row.unstable, row.changes) for row in matrix.rows
    ]
    return rows, matrix.by_kind


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("selected", [(), ("tools",), ("code", "geval")])
@pytest.mark.parametrize(("run_count", "cases", "variety"), [(2, 150, 2), (4, 60, 4)])
def test_shared_turn_objects_give_the_same_matrix_as_separate_ones(
    seed: int, selected: tuple[str, ...], run_count: int, cases: int, variety: int
) -> None:
    runs = shared_runs(seed, run_count, cases, variety)
    shared = build_matrix(runs, 1, selected)
    separate = build_matrix(unshared(runs), 1, selected)

    assert as_data(shared) == as_data(separate)
    for kind, counts in shared.by_kind.items():
        assert counts == brute_force_by_kind(runs, kind)
    for run_id in runs:
        assert shared.totals(run_id) == brute_force_totals(shared, run_id)
        assert separate.totals(run_id) == brute_force_totals(separate, run_id)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("selected", [(), ("code", "tools")])
def test_in_commit_order_shared_and_separate_turns_count_against_the_run_before(
    seed: int, selected: tuple[str, ...]
) -> None:
    runs = shared_runs(seed, 4, 80, 3)
    against = compared_with(sorted(runs), 1, COMMIT_ORDER)
    shared = build_matrix(runs, 1, selected, against=against)
    separate = build_matrix(unshared(runs), 1, selected, against=against)

    assert as_data(shared) == as_data(separate)
    for kind, counts in shared.by_kind.items():
        assert counts == brute_force_in_commit_order(runs, kind)
    for run_id in runs:
        assert shared.totals(run_id) == brute_force_totals(shared, run_id)


def test_rows_decided_once_hold_data_of_their_own() -> None:
    turns = (TurnData(0, "passed", {}), TurnData(1, "failed", {}))
    runs: dict[int, Sequence[CaseData]] = {
        run_id: [CaseData(run_id * 10 + i, i, f"c{i}", "done", "failed", {}, turns) for i in (0, 1)]
        for run_id in (1, 2)
    }
    first, second = build_matrix(runs, 1).rows

    assert first.turns == second.turns and first.turns is not second.turns
    first.turns[0][1] = Outcome.ABSENT
    first.cells[1] = Outcome.ABSENT
    assert second.turns[0][1] is Outcome.PASSED and second.cells[1] is Outcome.FAILED
    assert (first.key, second.key) == ("c0", "c1")
    assert (first.case_ids, second.case_ids) == ({1: 10, 2: 20}, {1: 11, 2: 21})
