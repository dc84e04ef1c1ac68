"""A compare decided pair by pair: each run against the run it is compared with, over the
cases the two hold, tallied by the database by their pair of stored verdicts
(``runs.compare.reads.tally``). Everything compare counts for a run (its regressions and
fixes, overall and per kind, its changed cases, its cells) depends only on its case and the
compared run's case of the same key, so each distinct pair of cases is decided once, here,
with the matrix's own rules (``runs.core.comparison.matrix``), and counted as many times as the
database found it. Django-free."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from runs.core.comparison.matrix import (
    FIX,
    REGRESSION,
    CaseData,
    Row,
    _keys,
    _row,
    _RowMemo,
    _turn_changes,
    case_verdict,
)
from runs.core.verdicts.kinds import KINDS


def matrix_rows(
    by_run: dict[int, dict[str, CaseData]],
    selected: Iterable[str],
    *,
    against: Mapping[int, int],
    timeline: Sequence[int],
) -> list[Row]:
    """The rows of cases already keyed (run id -> key -> case, runs in the columns' order),
    as ``build_matrix`` decides them (without repeats): a page of a compare whose counts are
    tallied apart."""
    run_ids = list(by_run)
    decided = _RowMemo(run_ids, by_run, frozenset(selected), dict(against), list(timeline))
    return [decided(key) for key in _keys(run_ids, by_run)]


@dataclass
class PairCounts:
    """What a run counts against the run it is compared with, summed over the pairs."""

    regressions: int = 0
    fixes: int = 0
    changed: int = 0
    # kind -> (regressions, fixes) with only that kind selected
    by_kind: dict[str, tuple[int, int]] | None = None


def pair_counts(
    pairs: Iterable[tuple[CaseData | None, CaseData | None, int]],
    run_ids: tuple[int, int],
    selected: frozenset[str],
    *,
    timeline: Sequence[int],
    before_first: bool,
) -> PairCounts:
    """Sum of what each pair (the compared run's case, the run's case, how many keys hold
    that pair; None: absent) counts for the run: ``run_ids`` is (compared run, run);
    ``before_first``: the compared run is the older, so the changes read from it to the run."""
    other, run_id = run_ids
    found = PairCounts(by_kind={})
    kinds = [kind for kind in KINDS if kind in selected] if selected else list(KINDS)
    by_kind = dict.fromkeys(kinds, (0, 0))
    for old, new, count in pairs:
        if old is None or new is None:
            continue  # a key absent from one of the two: never a change of verdict
        row = pair_row((other, old), (run_id, new), selected, timeline)
        regressions, fixes = row.changes.get(run_id, (0, 0))
        found.regressions += regressions * count
        found.fixes += fixes * count
        found.changed += count * (run_id in row.changed_in)
        if old.turns == new.turns:
            continue
        before, after = (old, new) if before_first else (new, old)
        for kind in kinds:
            kind_regressions, kind_fixes = _turn_changes(
                before.turns, after.turns, frozenset({kind})
            )
            total = by_kind[kind]
            by_kind[kind] = (total[0] + kind_regressions * count, total[1] + kind_fixes * count)
    found.by_kind = by_kind
    return found


def pair_row(
    before: tuple[int, CaseData | None],
    after: tuple[int, CaseData | None],
    selected: frozenset[str],
    timeline: Sequence[int],
) -> Row:
    """The row of one case in a run (``after``) and in the run it is compared with
    (``before``), either absent (None): what the matrix counts for that run, decided alone."""
    (other, old), (run_id, new) = before, after
    present = {r: case for r, case in ((other, old), (run_id, new)) if case is not None}
    order = [r for r in timeline if r in (other, run_id)]
    return _row("", order, present, selected, {run_id: other}, order)


def cells_tally(
    cases: Iterable[tuple[CaseData, int]], selected: frozenset[str]
) -> list[tuple[str, int]]:
    """A run's cells under the kind filter, as (verdict, how many cases) pairs."""
    return [(case_verdict(case, selected).value, count) for case, count in cases]


__all__ = ["FIX", "REGRESSION", "PairCounts", "cells_tally", "matrix_rows", "pair_counts"]
