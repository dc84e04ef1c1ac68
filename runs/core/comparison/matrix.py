"""Comparing runs: cases aligned by name (else index) and turns by index, a verdict per cell,
regressions and fixes against a baseline, per kind. Django-free: it works on the stored
verdicts (``outcome`` and ``kind_outcomes`` of case and turn rows) handed to it as plain data.

Cells hold ``Outcome`` values (``runs.core.verdicts.outcomes``), the one vocabulary of every layer:
the stored verdict (a cancelled case shows as cancelled), or ``pending`` (no verdict yet),
``absent`` (the run has no such case or turn) and ``none`` (the turn ran none of the selected
kinds).

A cell's verdict, with a kind filter, looks only at the selected kinds of grading (``KINDS``:
tool assertions are a kind of their own), combined as ``outcomes.combined`` does: failed if any
of them failed, else not graded if any could not grade, else passed. An errored or skipped turn
is that whatever the filter. "Not graded" is never a pass nor a fail, so it is never a
regression nor a fix.

Each run is compared with one other run (``Matrix.against``): in the baseline mode (the
default) every run with the baseline; in the chronological mode (``order=commits``) the runs are
columns oldest first and each is compared with the column before it, so "regressed" and "fixed"
always read forward in time.

What counts, everywhere compare counts (the matrix's marks, its filters, the headline, the
regressions and fixes by kind, the API):

- a **regression** is a turn that was *graded and passed* in the run it is compared with and
  failed or errored (a **fix** the other way round); nothing else is: a case cancelled in one
  run and failed in the other, or a turn not graded then failed, is not a graded pass that
  broke;
- a row **changed** for a run when any of its verdicts (the case's or a turn's) differs from
  the compared run's: every regression and fix, and also cancelled → failed, not graded →
  passed, skipped → failed... Whatever a row shows as different is in ``show=changed``;
- with a repeated run among them (``significance`` given to ``build_matrix``), a turn's change
  is a regression or a fix only when it is significant over the repetitions
  (``runs.core.stats.significance``); a change within noise is counted as such (``Row.noise``),
  never drawn as a regression, and the row still changed.

A case "changed back and forth" (``Row.unstable``) when one of its turns went from passed to
failed (or errored) and back again, or the other way round, along the runs in commit order.
That is not flakiness: runs of different commits differ because the code did. Nothing here is
called flaky until runs are repeated at one commit.

Beside the verdicts, a row can carry the scores of one chosen metric (the mean of the case's
stored turn scores, as the case roll-up has it) and their deltas against the compared cells,
and the turns where a searched text occurs; which rows are kept, and in which order, is
``runs.core.comparison.query``.

Only the matrix is decided here; the runs' own numbers (case and turn counts, pass rate, metric
summaries) are their stored summaries, never recounted from cells.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Literal

from runs.core.stats.significance import SIGNIFICANTLY_BETTER, SIGNIFICANTLY_WORSE
from runs.core.verdicts.kinds import KINDS
from runs.core.verdicts.outcomes import BAD, Outcome, combined

Change = Literal["regression", "fix", "noise"]
REGRESSION: Change = "regression"
FIX: Change = "fix"
# A regression or a fix that is within noise over the runs' repetitions (not significant).
NOISE: Change = "noise"
# With repeated runs: (run id, case key, turn index) -> the significance class of that turn's
# change against the compared run (``runs.core.stats.significance``), None when it was not tested.
TurnSignificance = Callable[[int, str, int], str | None]
# Case states (runs.models.CaseResult.Status): with no verdict yet, and given up on.
OPEN_CASE_STATES = ("pending", "running")
GAVE_UP_CASE_STATE = "error"
# Stored outcomes a cell shows as they are when no kind is selected.
_SHOWN_AS_STORED = frozenset({Outcome.PASSED, Outcome.FAILED, Outcome.NOT_GRADED})

# How the runs are laid out and what each is compared with.
BASELINE_ORDER = "baseline"  # the baseline first, every other run against it
COMMIT_ORDER = "commits"  # oldest first, each run against the one before it
ORDERS = (BASELINE_ORDER, COMMIT_ORDER)


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
    regressions: int = 0  # turn-level, each run against the run it is compared with
    fixes: int = 0
    # A turn changed back and forth along the runs in commit order (not flakiness: see above).
    unstable: bool = False
    # run id -> (regressions, fixes) of that run's turns against its compared run (runs with any)
    changes: dict[int, tuple[int, int]] = field(default_factory=dict)
    # The runs where a verdict of the row (the case's or a turn's) differs from the compared
    # run's: every regression and fix, and any other change (cancelled -> failed, ...).
    changed_in: tuple[int, ...] = ()
    # With repeated runs: turns whose change is within noise (not significant), over the runs.
    noise: int = 0
    # run id -> per turn index, its change against the compared run (None: none), as drawn.
    marks: dict[int, tuple[Change | None, ...]] = field(default_factory=dict)
    # With a chosen metric (``attach_scores``): run id -> the case's score, and run id -> its
    # delta against the compared run's (only where both have a stored score).
    scores: dict[int, float] = field(default_factory=dict)
    deltas: dict[int, float] = field(default_factory=dict)
    # With a search (``attach_hits``): run id -> the indexes of the turns where the text occurs.
    hits: dict[int, tuple[int, ...]] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        return Outcome.ABSENT in self.cells.values()

    @property
    def changed(self) -> bool:
        """Any verdict differs between a run and the run it is compared with, or a turn
        changed back and forth: what ``show=changed`` keeps (with the partial rows)."""
        return bool(self.regressions or self.fixes or self.unstable or self.changed_in)

    @property
    def flaky(self) -> bool:
        """The old name of ``unstable`` (the API keeps its key): changed back and forth."""
        return self.unstable

    @property
    def drop(self) -> float | None:
        """The largest fall of the chosen metric's score against a compared cell (a positive
        number), None when no cell fell."""
        falls = [-delta for delta in self.deltas.values() if delta < 0]
        return max(falls) if falls else None


@dataclass
class Matrix:
    run_ids: list[int]  # the columns, in order
    baseline_id: int
    # Every row, or (a compare of finished runs tallied by the database) a sequence that reads
    # the rows of the slice asked (``runs.compare.reads.tally.PagedRows``).
    rows: Sequence[Row]
    # kind -> run id -> (regressions, fixes) against its compared run, turn-level
    by_kind: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)
    # run id -> the run it is compared with (every run but the reference column has one)
    against: dict[int, int] = field(default_factory=dict)
    # The runs older than the run they are compared with: their changes read forward in time,
    # from them to it (a turn failing here and passing there was fixed, never "regressed").
    backwards: frozenset[int] = frozenset()

    def totals(self, run_id: int) -> tuple[int, int]:
        """(regressions, fixes) of a run against its compared run under the current filter."""
        regressions = fixes = 0
        for row in self.rows:
            found = row.changes.get(run_id)
            if found is not None:
                regressions += found[0]
                fixes += found[1]
        return regressions, fixes

    def changed_cases(self, run_id: int) -> int:
        """The rows where a verdict of run ``run_id`` differs from its compared run's."""
        return sum(1 for row in self.rows if run_id in row.changed_in)

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


def compared_with(run_ids: Sequence[int], baseline_id: int, order: str) -> dict[int, int]:
    """Run id -> the run it is compared with: the previous column in commit order
    (``run_ids`` oldest first), else the baseline."""
    if order == COMMIT_ORDER:
        return {run_ids[i]: run_ids[i - 1] for i in range(1, len(run_ids))}
    return {run_id: baseline_id for run_id in run_ids if run_id != baseline_id}


def change_of(before: Outcome, after: Outcome) -> Change | None:
    """A regression (passed -> failed or errored), a fix (the other way round), or None."""
    if before is Outcome.PASSED and after in BAD:
        return REGRESSION
    if before in BAD and after is Outcome.PASSED:
        return FIX
    return None


def significant_change(change: Change | None, significance: str | None) -> Change | None:
    """A change as drawn when the runs' repetitions were tested: a regression only when the
    turn is significantly worse, a fix only when significantly better, else within noise."""
    if change is None:
        return None
    wanted = SIGNIFICANTLY_WORSE if change == REGRESSION else SIGNIFICANTLY_BETTER
    return change if significance == wanted else NOISE


def changed_back_and_forth(verdicts: Iterable[Outcome]) -> bool:
    """Verdicts in time order went from passed to failed (or errored) and back, or the other
    way round; the others (not graded, absent, ...) are passed over."""
    states: list[bool] = []
    for outcome in verdicts:
        if outcome is Outcome.PASSED or outcome in BAD:
            good = outcome is Outcome.PASSED
            if not states or states[-1] != good:
                states.append(good)
    return len(states) >= 3


def build_matrix(
    runs: dict[int, Sequence[CaseData]],
    baseline_id: int,
    selected: Iterable[str] = (),
    *,
    against: Mapping[int, int] | None = None,
    timeline: Sequence[int] | None = None,
    significance: TurnSignificance | None = None,
) -> Matrix:
    """Align the cases of ``runs`` (run id -> its cases, in the order runs are shown) and count
    regressions and fixes of every run against the run it is compared with (``against``; by
    default the baseline), overall and per kind. ``timeline``: the run ids oldest first (by
    default the order of ``runs``), along which a case changes back and forth.
    ``significance``: with repeated runs, each turn's significance class against the compared
    run; only significant changes are then regressions and fixes (``significant_change``)."""
    chosen = frozenset(selected)
    run_ids = list(runs)
    if against is None:
        against = compared_with(run_ids, baseline_id, BASELINE_ORDER)
    pairs = dict(against)
    order = list(timeline or run_ids)
    backwards = older_than_compared(pairs, order)
    if significance is not None and backwards:
        significance = _forward_in_time(significance, backwards)
    by_run = {run_id: _keyed(cases) for run_id, cases in runs.items()}
    decided = _RowMemo(run_ids, by_run, chosen, pairs, order, significance)
    rows = [decided(key) for key in _keys(run_ids, by_run)]
    matrix = Matrix(
        run_ids=run_ids, baseline_id=baseline_id, rows=rows, against=pairs, backwards=backwards
    )
    for kind in (kind for kind in KINDS if kind in chosen) if chosen else KINDS:
        matrix.by_kind[kind] = _kind_changes(
            run_ids, by_run, pairs, kind, significance, backwards=backwards
        )
    return matrix


def older_than_compared(against: Mapping[int, int], timeline: Sequence[int]) -> frozenset[int]:
    """The runs that come before the run they are compared with in ``timeline`` (oldest
    first): a column older than its baseline."""
    position = {run_id: index for index, run_id in enumerate(timeline)}
    return frozenset(
        run_id
        for run_id, other in against.items()
        if position.get(run_id, 0) < position.get(other, 0)
    )


def in_time_order(run_id: int, other: int, backwards: frozenset[int]) -> tuple[int, int]:
    """(before, after) of a run and the run it is compared with, read forward in time."""
    return (run_id, other) if run_id in backwards else (other, run_id)


_FLIPPED: dict[str, str] = {
    SIGNIFICANTLY_WORSE: SIGNIFICANTLY_BETTER,
    SIGNIFICANTLY_BETTER: SIGNIFICANTLY_WORSE,
}


def _forward_in_time(significance: TurnSignificance, backwards: frozenset[int]) -> TurnSignificance:
    """``significance`` (a run against the run it is compared with) read forward in time: for
    a run older than its compared run, worse there is better going forward."""

    def forward(run_id: int, key: str, index: int) -> str | None:
        found = significance(run_id, key, index)
        if found is None or run_id not in backwards:
            return found
        return _FLIPPED.get(found, found)

    return forward


def _keyed(cases: Sequence[CaseData]) -> dict[str, CaseData]:
    """Cases by name (else ``#index``); a name repeated within a run gets ``name (2)`` etc."""
    ordered = sorted(cases, key=lambda c: c.index)
    return dict(zip(keys_of(case.key for case in ordered), ordered, strict=True))


def keys_of(names: Iterable[str]) -> list[str]:
    """The compare keys of a run's cases, given in index order by name (else ``#index``): a
    name repeated gets `` (2)``, `` (3)``... (what ``CaseResult.compare_key`` stores)."""
    taken: set[str] = set()
    keys = []
    for name in names:
        key, n = name, 1
        while key in taken:
            n += 1
            key = f"{name} ({n})"
        taken.add(key)
        keys.append(key)
    return keys


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
    by kind are the very same objects (``runs.compare.reads.comparison`` hands equal ones out
    shared) make rows alike; a row like one already decided is copied, not decided again. Identities
    are safe as keys: every case is held by ``by_run`` while the matrix is built."""

    def __init__(
        self,
        run_ids: list[int],
        by_run: dict[int, dict[str, CaseData]],
        selected: frozenset[str],
        against: dict[int, int],
        timeline: list[int],
        significance: TurnSignificance | None = None,
    ) -> None:
        self.run_ids = run_ids
        self.by_run = by_run
        self.selected = selected
        self.against = against
        self.timeline = timeline
        self.significance = significance
        self.seen: dict[tuple[object, ...], Row] = {}

    def __call__(self, key: str) -> Row:
        present = {
            run_id: self.by_run[run_id][key]
            for run_id in self.run_ids
            if key in self.by_run[run_id]
        }
        alike: tuple[object, ...] = tuple(
            (id(case.turns), case.status, case.outcome, id(case.kinds)) if case else None
            for case in (present.get(run_id) for run_id in self.run_ids)
        )
        if self.significance is not None:  # a row's marks depend on its key's significance
            alike = (key, *alike)
        first = next(iter(present.values()))
        known = self.seen.get(alike)
        if known is None:
            known = self.seen[alike] = _row(
                key,
                self.run_ids,
                present,
                self.selected,
                self.against,
                self.timeline,
                self.significance,
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
            unstable=known.unstable,
            changes=dict(known.changes),
            changed_in=known.changed_in,
            noise=known.noise,
            marks=dict(known.marks),
        )


def _row(
    key: str,
    run_ids: list[int],
    present: dict[int, CaseData],
    selected: frozenset[str],
    against: dict[int, int],
    timeline: list[int],
    significance: TurnSignificance | None = None,
) -> Row:
    """The row of the cases ``present`` (run id -> its case called ``key``)."""
    first = next(iter(present.values()))
    turns = _turn_lines(run_ids, present, selected)
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
    marks: dict[int, list[Change | None]] = {run_id: [] for run_id in against}
    backwards = older_than_compared(against, timeline)
    for turn_index, line in enumerate(turns):
        for run_id, other in against.items():
            before, after = in_time_order(run_id, other, backwards)
            change = change_of(line.get(before, Outcome.ABSENT), line.get(after, Outcome.ABSENT))
            if significance is not None:
                change = significant_change(change, significance(run_id, key, turn_index))
            marks[run_id].append(change)
            if change is not None:
                regressions, fixes = row.changes.get(run_id, (0, 0))
                row.changes[run_id] = (
                    regressions + (change == REGRESSION),
                    fixes + (change == FIX),
                )
                row.regressions += change == REGRESSION
                row.fixes += change == FIX
                row.noise += change == NOISE
        row.unstable = row.unstable or changed_back_and_forth(line[run_id] for run_id in timeline)
    row.marks = {run_id: tuple(found) for run_id, found in marks.items()}
    # A case absent from one of the two is not a change of verdict (the row is partial).
    row.changed_in = tuple(
        run_id
        for run_id, other in against.items()
        if Outcome.ABSENT not in (row.cells[run_id], row.cells[other])
        and (
            row.cells[run_id] != row.cells[other]
            or any(line[run_id] != line[other] for line in turns)
        )
    )
    return row


def _turn_lines(
    run_ids: list[int], present: dict[int, CaseData], selected: frozenset[str]
) -> list[dict[int, Outcome]]:
    """Per turn index, each run's verdict of that turn of its case (``pending`` while the case
    runs, ``absent`` where it has no such turn or case)."""
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
    return turns


def _kind_changes(
    run_ids: list[int],
    by_run: dict[int, dict[str, CaseData]],
    against: dict[int, int],
    kind: str,
    significance: TurnSignificance | None = None,
    *,
    backwards: frozenset[int] = frozenset(),
) -> dict[int, tuple[int, int]]:
    only = frozenset({kind})
    counts: dict[int, tuple[int, int]] = {}
    seen: dict[tuple[int, int], tuple[int, int]] = {}  # shared by the runs: see _changes_between
    for run_id in run_ids:
        if run_id not in against:
            continue
        of_case = None
        if significance is not None:  # repeated runs: each turn's own significance
            of_case = _of_run(significance, run_id)
        before, after = in_time_order(run_id, against[run_id], backwards)
        counts[run_id] = _changes_between(by_run[before], by_run[after], only, seen, of_case)
    return counts


def _changes_between(
    before: dict[str, CaseData],
    after: dict[str, CaseData],
    only: frozenset[str],
    seen: dict[tuple[int, int], tuple[int, int]],
    significance: Callable[[str], Callable[[int], str | None]] | None = None,
) -> tuple[int, int]:
    """(regressions, fixes) of the cases ``after`` (by key) against the same cases ``before``.
    Without ``significance``, once per distinct pair of turns (``seen``: (compared turns, run
    turns) -> their changes; the turns of most cases are shared objects, see _RowMemo, held by
    the caller, so ids are safe keys)."""
    regressions = fixes = 0
    for key, case in after.items():
        old = before.get(key)
        if old is None or old.turns is case.turns:
            continue  # not in the compared run, or the very same turns: no change
        found: tuple[int, int] | None
        if significance is not None:
            found = _turn_changes(old.turns, case.turns, only, significance(key))
        else:
            pair = (id(old.turns), id(case.turns))
            found = seen.get(pair)
            if found is None:
                found = seen[pair] = _turn_changes(old.turns, case.turns, only)
        regressions += found[0]
        fixes += found[1]
    return regressions, fixes


def _of_run(
    significance: TurnSignificance, run_id: int
) -> Callable[[str], Callable[[int], str | None]]:
    """The significance of one run's cases' turns: by case key, then turn index."""
    return lambda key: _of_case(significance, run_id, key)


def _of_case(significance: TurnSignificance, run_id: int, key: str) -> Callable[[int], str | None]:
    """The significance of one case's turns in one run, by turn index."""
    return lambda index: significance(run_id, key, index)


def _turn_changes(
    before: Sequence[TurnData],
    after: Sequence[TurnData],
    only: frozenset[str],
    significance: Callable[[int], str | None] | None = None,
) -> tuple[int, int]:
    """(regressions, fixes) of a case's turns ``after`` against ``before`` under ``only``;
    ``significance``: a turn's class by its position, when only significant changes count."""
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
        if significance is not None:
            change = significant_change(change, significance(turn.index))
        regressions += change == REGRESSION
        fixes += change == FIX
    return regressions, fixes


def series_churn(
    series: Sequence[Sequence[CaseData]], selected: Iterable[str] = ()
) -> list[tuple[int, int] | None]:
    """Per run of a series (its cases, oldest run first): (regressions, fixes) of its turns
    against the run before it, cases aligned by name and turns by index as in the matrix
    (None for the first run); ``selected``: the kinds whose verdicts count (empty: the stored
    verdicts)."""
    only = frozenset(selected)
    keyed = [_keyed(cases) for cases in series]
    counts: list[tuple[int, int] | None] = [None] if keyed else []
    seen: dict[tuple[int, int], tuple[int, int]] = {}  # as in _kind_changes
    for before, after in pairwise(keyed):
        counts.append(_changes_between(before, after, only, seen))
    return counts
