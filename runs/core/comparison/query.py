"""What a compare asks for, one object for every reader of it: the compare page, its side by
side, its CSV and ``GET /api/v1/compare`` (and its CSV) each parse their parameters into a
``ComparisonQuery`` once, and the rows come from one selector
(``runs.compare.reads.compared_rows.compare_rows``), so the page and the API keep the same rows for
the same options.

``checked`` holds the rules that need the runs: the metric must be one of theirs, and sorting by
delta or a minimum drop needs a metric. The rows it keeps, in its order: its ``show``, ``sort``,
``min_drop`` and ``q`` applied to the matrix's rows (``select_rows``, ``sort_rows``,
``rows_dropping``), with the metric's scores and the search's hits given to the rows they are
read for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from runs.core.comparison.matrix import BASELINE_ORDER, Matrix, Row

MAX_RUNS = 12
MAX_SEARCH = 200  # characters of ?q=
MAX_METRIC = 200  # MetricResult.metric_name's length


@dataclass(frozen=True)
class ComparisonQuery:
    """The runs to compare and how, and which rows to keep in which order."""

    run_ids: list[int]
    chosen: int | None = None  # the baseline picked
    kinds: list[str] = field(default_factory=list)
    order: str = BASELINE_ORDER
    show: str = "all"  # one of SHOWS (an alias given is read as its new name)
    sort: str = "case"
    metric: str = ""  # the metric whose score deltas the rows carry ("" none)
    min_drop: float | None = None  # keep rows whose metric fell by at least this much
    q: str = ""  # keep rows where this text occurs in a turn's input or response
    show_alias: str = ""  # the old name given for ``show`` (``flaky``), said on the page

    def state(self, runs: list[int] | None = None) -> dict[str, str]:
        """The query as the page's query string holds it, defaults left empty; ``runs``: the
        runs shown (the baseline added to a lone run), else those asked for."""
        return {
            "runs": ",".join(map(str, self.run_ids if runs is None else runs)),
            "baseline": str(self.chosen) if self.chosen is not None else "",
            "order": self.order if self.order != BASELINE_ORDER else "",
            "kinds": ",".join(self.kinds),
            "show": self.show if self.show != "all" else "",
            "sort": self.sort if self.sort != "case" else "",
            "metric": self.metric,
            "min_drop": f"{self.min_drop:g}" if self.min_drop is not None else "",
            "q": self.q,
        }


def checked(
    query: ComparisonQuery, metric_names: list[str]
) -> tuple[ComparisonQuery, dict[str, str]]:
    """The query with each setting the runs refuse left out, and the messages (parameter ->
    why): a metric none of the runs has, sorting by delta or a minimum drop without a metric."""
    errors: dict[str, str] = {}
    metric, sort, min_drop = query.metric, query.sort, query.min_drop
    if metric and metric not in metric_names:
        errors["metric"] = f"no metric “{metric[:60]}” in these runs: pick one of the list"
        metric = ""
    if sort == "delta" and not metric:
        errors["sort"] = "sorting by delta needs a metric: pick one"
        sort = "case"
    if min_drop is not None and not metric:
        errors["min_drop"] = "a minimum drop needs a metric: pick one"
        min_drop = None
    return replace(query, metric=metric, sort=sort, min_drop=min_drop), errors


# --- the rows kept, in order ------------------------------------------------------------------

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
