"""The matrix's rows kept and ordered, as the compare page's ``show``, ``sort``, ``min_drop`` and
``q`` say (``GET /api/v1/compare`` takes the same): the rows' filters, their orders, and the
metric's scores and the search's hits given to the rows they are read for."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from runs.core.comparison.matrix import Matrix, Row

# Rows to show (``select_rows``). "flaky" is the old name of "unstable", kept so old links work:
# it never meant flakiness (a verdict that differs between commits is a change).
SHOWS = ("all", "regressions", "fixes", "unstable", "changed", "partial")
SHOW_ALIASES = {"flaky": "unstable"}
SORTS = ("case", "regressions", "name", "delta")


def select_rows(rows: Sequence[Row], show: str) -> list[Row]:
    """``all``, ``regressions``, ``fixes``, ``unstable`` (``flaky``, its old name),
    ``changed`` or ``partial``."""
    show = SHOW_ALIASES.get(show, show)
    if show == "regressions":
        return [row for row in rows if row.regressions]
    if show == "fixes":
        return [row for row in rows if row.fixes]
    if show == "unstable":
        return [row for row in rows if row.unstable]
    if show == "changed":
        return [row for row in rows if row.changed or row.partial]
    if show == "partial":
        return [row for row in rows if row.partial]
    return list(rows)


def sort_rows(rows: list[Row], sort: str) -> list[Row]:
    """``case`` (the runs' order), ``regressions`` (most first), ``name``, or ``delta``: the
    chosen metric's largest drop first, then the rows whose score moved least, then the rows
    without a delta."""
    if sort == "regressions":
        return sorted(rows, key=lambda row: (-row.regressions, -row.fixes, row.index))
    if sort == "name":
        return sorted(rows, key=lambda row: row.key.lower())
    if sort == "delta":
        return sorted(rows, key=_by_drop)
    return rows


def _by_drop(row: Row) -> tuple[int, float, int]:
    if not row.deltas:
        return (1, 0.0, row.index)
    return (0, min(row.deltas.values()), row.index)


def rows_dropping(rows: list[Row], min_drop: float) -> list[Row]:
    """The rows where the chosen metric's score fell by at least ``min_drop`` against a
    compared cell."""
    return [row for row in rows if row.drop is not None and row.drop >= min_drop - 1e-9]


def rows_matching(rows: list[Row]) -> list[Row]:
    """The rows where the searched text occurs in a turn of a run (``attach_hits``)."""
    return [row for row in rows if row.hits]


def attach_scores(matrix: Matrix, scores: Mapping[int, float]) -> None:
    """Give every row the chosen metric's score of each of its cases (``scores``: case id ->
    score; a case without one has none, never 0) and the deltas against the compared cells."""
    for row in matrix.rows:
        row.scores = {
            run_id: scores[case_id] for run_id, case_id in row.case_ids.items() if case_id in scores
        }
        row.deltas = {  # rounded: the mean of equal scores can differ in the last bit
            run_id: round(row.scores[run_id] - row.scores[other], 9)
            for run_id, other in matrix.against.items()
            if run_id in row.scores and other in row.scores
        }


def attach_hits(matrix: Matrix, hits: Mapping[int, Iterable[int]]) -> None:
    """Give every row the turns where the searched text occurs (``hits``: case id -> turn
    indexes), per run."""
    for row in matrix.rows:
        row.hits = {
            run_id: tuple(sorted(hits[case_id]))
            for run_id, case_id in row.case_ids.items()
            if case_id in hits
        }
