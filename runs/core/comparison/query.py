"""What a compare asks for, one object for every reader of it: the compare page, its side by
side, its CSV and ``GET /api/v1/compare`` (and its CSV) each parse their parameters into a
``ComparisonQuery`` once, and the rows come from one selector
(``runs.compare.reads.compared_rows.compare_rows``), so the page and the API keep the same rows for
the same options.

``checked`` holds the rules that need the runs: the metric must be one of theirs, and sorting by
delta or a minimum drop needs a metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from runs.core.comparison.matrix import BASELINE_ORDER

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
