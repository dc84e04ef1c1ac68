"""Comparing runs: cases aligned by name (else index) and turns by index, a verdict per cell,
regressions and fixes against a baseline, per kind. Django-free: it works on the stored
verdicts (``outcome`` and ``kind_outcomes`` of case and turn rows) handed to it as plain data.

Cells hold ``Outcome`` values (``runs.report.outcomes``), the one vocabulary of every layer:
the stored verdict (a cancelled case shows as cancelled), or ``pending`` (no verdict yet),
``absent`` (the run has no such case or turn) and ``none`` (the turn ran none of the selected
kinds).

A cell's verdict, with a kind filter, looks only at the selected kinds of grading (``KINDS``:
tool assertions are a kind of their own), combined as ``outcomes.combined`` does: failed if any
of them failed, else not graded if any could not grade, else passed. An errored or skipped turn
is that whatever the filter. "Not graded" is never a pass nor a fail, so it is never a
regression nor a fix.

Only the matrix is decided here; the runs' own numbers (case and turn counts, pass rate, metric
summaries) are their stored summaries, never recounted from cells.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from runs.report.kinds import KINDS
from runs.report.outcomes import BAD, GRADED, Outcome, combined

Change = Literal["regression", "fix"]
REGRESSION: Change = "regression"
FIX: Change = "fix"
# Case states (runs.models.CaseResult.Status): with no verdict yet, and given up on.
OPEN_CASE_STATES = ("pending", "running")
GAVE_UP_CASE_STATE = "error"
# Stored outcomes a cell shows as they are when no kind is selected.
_SHOWN_AS_STORED = frozenset({Outcome.PASSED, Outcome.FAILED, Outcome.NOT_GRADED})


@dataclass(frozen=True)
class TurnData:
    index: int
    outcome: str  # the stored one: passed | failed | error | not_graded | skipped
    kinds: dict[str, str]


@dataclass(frozen=True)
class CaseData:
    case_id: int
    index: int
    name: str
    status: str  # pending | running | done | error | cancelled
    outcome: str  # the stored one: passed | failed | not_graded | cancelled | error | ""
    kinds: dict[str, str]
    turns: tuple[TurnData, ...] = ()

    @property
    def key(self) -> str:
        return self.name or f"#{self.index}"


@dataclass
class Row:
    """One aligned case: its cell per run and, under it, one line per turn index."""

    key: str
    name: str
    index: int  # in the first run that has it
    cells: dict[int, Outcome]  # run id -> case verdict
    case_ids: dict[int, int]  # run id -> case row id (absent runs missing)
    turns: list[dict[int, Outcome]]  # turn index -> run id -> turn verdict
    regressions: int = 0  # turn-level, against the baseline, over every other run
    fixes: int = 0
    flaky: bool = False
    # run id -> (regressions, fixes) of that run's turns against the baseline (runs with any)
    changes: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        return Outcome.ABSENT in self.cells.values()

    @property
    def changed(self) -> bool:
        return bool(self.regressions or self.fixes or self.flaky)


@dataclass
class Matrix:
    run_ids: list[int]
    baseline_id: int
    rows: list[Row]
    # kind -> run id -> (regressions, fixes) against the baseline, turn-level
    by_kind: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)

    def totals(self, run_id: int) -> tuple[int, int]:
        """(regressions, fixes) of a run against the baseline under the current filter."""
        regressions = fixes = 0
        for row in self.rows:
            found = row.changes.get(run_id)
            if found is not None:
                regressions += found[0]
                fixes += found[1]
        return regressions, fixes

    def cells_of(self, run_id: int) -> list[Outcome]:
        """The case verdicts of one run (``absent`` where it lacks a case)."""
        return [row.cells[run_id] for row in self.rows]


def verdict(outcome: str, kinds: dict[str, str], selected: frozenset[str]) -> Outcome:
    """The verdict of a turn (or a case roll-up) under a kind filter (empty: every kind)."""
    stored = Outcome.of(outcome)
    if stored in (Outcome.SKIPPED, Outcome.ERROR, Outcome.CANCELLED):
        return stored
    if not selected:
        return stored if stored in _SHOWN_AS_STORED else Outcome.NONE
    found = [kinds[kind] for kind in selected if kind in kinds]
    return combined(found) if found else Outcome.NONE


def case_verdict(case: CaseData, selected: frozenset[str]) -> Outcome:
    if case.status in OPEN_CASE_STATES:
        return Outcome.PENDING
    if case.status == GAVE_UP_CASE_STATE:
        return Outcome.ERROR  # it never produced a result (the worker gave up on it)
    return verdict(case.outcome, case.kinds, selected)


def change_of(before: Outcome, after: Outcome) -> Change | None:
    """A regression (passed -> failed or errored), a fix (the other way round), or None."""
    if before is Outcome.PASSED and after in BAD:
        return REGRESSION
    if before in BAD and after is Outcome.PASSED:
        return FIX
    return None


def build_matrix(
    runs: dict[int, Sequence[CaseData]],
    baseline_id: int,
    selected: Iterable[str] = (),
) -> Matrix:
    """Align the cases of ``runs`` (run id -> its cases, in the order runs are shown) and count
    regressions and fixes of every run against the baseline, overall and per kind."""
    chosen = frozenset(selected)
    run_ids = list(runs)
    by_run = {run_id: _keyed(cases) for run_id, cases in runs.items()}
    decided = _RowMemo(run_ids, by_run, chosen, baseline_id)
    rows = [decided(key) for key in _keys(run_ids, by_run)]
    matrix = Matrix(run_ids=run_ids, baseline_id=baseline_id, rows=rows)
    for kind in (kind for kind in KINDS if kind in chosen) if chosen else KINDS:
        matrix.by_kind[kind] = _kind_changes(run_ids, by_run, baseline_id, kind)
    return matrix


def _keyed(cases: Sequence[CaseData]) -> dict[str, CaseData]:
    """Cases by name (else ``#index``); a name repeated within a run gets ``name (2)`` etc."""
    keyed: dict[str, CaseData] = {}
    for case in sorted(cases, key=lambda c: c.index):
        key, n = case.key, 1
        while key in keyed:
            n += 1
            key = f"{case.key} ({n})"
        keyed[key] = case
    return keyed


def _keys(run_ids: list[int], by_run: dict[int, dict[str, CaseData]]) -> list[str]:
    """Every case key, in the order of the first run that has it, then by that run's order."""
    seen: dict[str, tuple[int, int]] = {}
    for position, run_id in enumerate(run_ids):
        for key, case in by_run[run_id].items():
            seen.setdefault(key, (position, case.index))
    return sorted(seen, key=lambda key: seen[key])


class _RowMemo:
    """Decides the row of a key, once per distinct row: a row depends on nothing but its cases'
    states and verdicts, and most rows of large runs look alike. Cases whose turns and verdicts
    by kind are the very same objects (``runs.selectors.compare`` hands equal ones out shared)
    make rows alike; a row like one already decided is copied, not decided again. Identities
    are safe as keys: every case is held by ``by_run`` while the matrix is built."""

    def __init__(
        self,
        run_ids: list[int],
        by_run: dict[int, dict[str, CaseData]],
        selected: frozenset[str],
        baseline_id: int,
    ) -> None:
        self.run_ids = run_ids
        self.by_run = by_run
        self.selected = selected
        self.baseline_id = baseline_id
        self.seen: dict[tuple[object, ...], Row] = {}

    def __call__(self, key: str) -> Row:
        present = {
            run_id: self.by_run[run_id][key]
            for run_id in self.run_ids
            if key in self.by_run[run_id]
        }
        alike = tuple(
            (id(case.turns), case.status, case.outcome, id(case.kinds)) if case else None
            for case in (present.get(run_id) for run_id in self.run_ids)
        )
        first = next(iter(present.values()))
        known = self.seen.get(alike)
        if known is None:
            known = self.seen[alike] = _row(
                key, self.run_ids, present, self.selected, self.baseline_id
            )
        return Row(
            key=key,
            name=first.name,
            index=first.index,
            cells=dict(known.cells),
            case_ids={run_id: case.case_id for run_id, case in present.items()},
            turns=[dict(line) for line in known.turns],
            regressions=known.regressions,
            fixes=known.fixes,
            flaky=known.flaky,
            changes=dict(known.changes),
        )


def _row(
    key: str,
    run_ids: list[int],
    present: dict[int, CaseData],
    selected: frozenset[str],
    baseline_id: int,
) -> Row:
    """The row of the cases ``present`` (run id -> its case called ``key``)."""
    first = next(iter(present.values()))
    turn_count = max(len(case.turns) for case in present.values())
    turns: list[dict[int, Outcome]] = []
    for turn_index in range(turn_count):
        line: dict[int, Outcome] = {}
        for run_id in run_ids:
            case = present.get(run_id)
            turn = case.turns[turn_index] if case and turn_index < len(case.turns) else None
            if turn is not None:
                line[run_id] = verdict(turn.outcome, turn.kinds, selected)
            elif case and case.status in OPEN_CASE_STATES:
                line[run_id] = Outcome.PENDING
            else:
                line[run_id] = Outcome.ABSENT
        turns.append(line)
    row = Row(
        key=key,
        name=first.name,
        index=first.index,
        cells={
            run_id: case_verdict(present[run_id], selected) if run_id in present else Outcome.ABSENT
            for run_id in run_ids
        },
        case_ids={run_id: case.case_id for run_id, case in present.items()},
        turns=turns,
    )
    others = [run_id for run_id in run_ids if run_id != baseline_id]
    for line in turns:
        for run_id in others:
            change = change_of(line.get(baseline_id, Outcome.ABSENT), line[run_id])
            if change is not None:
                regressions, fixes = row.changes.get(run_id, (0, 0))
                row.changes[run_id] = (
                    regressions + (change == REGRESSION),
                    fixes + (change == FIX),
                )
                row.regressions += change == REGRESSION
                row.fixes += change == FIX
        graded = {line[run_id] for run_id in others if line[run_id] in GRADED}
        row.flaky = row.flaky or len(graded) > 1
    return row


def _kind_changes(
    run_ids: list[int], by_run: dict[int, dict[str, CaseData]], baseline_id: int, kind: str
) -> dict[int, tuple[int, int]]:
    only = frozenset({kind})
    base = by_run[baseline_id]
    counts: dict[int, tuple[int, int]] = {}
    # (baseline turns, run turns) -> their changes: once per distinct pair (the turns of most
    # cases are shared objects, see _RowMemo; both are held by by_run, so ids are safe keys)
    seen: dict[tuple[int, int], tuple[int, int]] = {}
    for run_id in run_ids:
        if run_id == baseline_id:
            continue
        regressions = fixes = 0
        for key, case in by_run[run_id].items():
            before = base.get(key)
            if before is None or before.turns is case.turns:
                continue  # not in the baseline, or the very same turns: no change
            pair = (id(before.turns), id(case.turns))
            found = seen.get(pair)
            if found is None:
                found = seen[pair] = _turn_changes(before.turns, case.turns, only)
            regressions += found[0]
            fixes += found[1]
        counts[run_id] = (regressions, fixes)
    return counts


def _turn_changes(
    before: Sequence[TurnData], after: Sequence[TurnData], only: frozenset[str]
) -> tuple[int, int]:
    """(regressions, fixes) of a case's turns ``after`` against ``before`` under ``only``."""
    regressions = fixes = 0
    for turn in after:
        if turn.index >= len(before):
            continue
        old = before[turn.index]
        if old.outcome == turn.outcome and old.kinds == turn.kinds:
            continue  # the same verdicts: no change of any kind
        change = change_of(
            verdict(old.outcome, old.kinds, only), verdict(turn.outcome, turn.kinds, only)
        )
        regressions += change == REGRESSION
        fixes += change == FIX
    return regressions, fixes


def select_rows(rows: list[Row], show: str) -> list[Row]:
    """``all``, ``regressions``, ``fixes``, ``flaky``, ``changed`` or ``partial``."""
    if show == "regressions":
        return [row for row in rows if row.regressions]
    if show == "fixes":
        return [row for row in rows if row.fixes]
    if show == "flaky":
        return [row for row in rows if row.flaky]
    if show == "changed":
        return [row for row in rows if row.changed or row.partial]
    if show == "partial":
        return [row for row in rows if row.partial]
    return rows


def sort_rows(rows: list[Row], sort: str) -> list[Row]:
    """``case`` (the runs' order), ``regressions`` (most first) or ``name``."""
    if sort == "regressions":
        return sorted(rows, key=lambda row: (-row.regressions, -row.fixes, row.index))
    if sort == "name":
        return sorted(rows, key=lambda row: row.key.lower())
    return rows
