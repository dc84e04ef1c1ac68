"""The compare pages' query parameters, read once into a ``ComparisonQuery``
(``runs.core.comparison.query``): the compare page reads them all, its side by side the runs and how
they are compared (the rows' options are the page's), its CSV the runs, their baseline and the
kinds. Each refused value is a ``BadParam`` naming it (a 400, or the page's form again with the
message at its field)."""

from __future__ import annotations

from dataclasses import replace

from runs.core.comparison.matrix import BASELINE_ORDER, ORDERS
from runs.core.comparison.query import (
    MAX_METRIC,
    MAX_RUNS,
    MAX_SEARCH,
    SHOW_ALIASES,
    SHOWS,
    SORTS,
    ComparisonQuery,
)
from runs.core.verdicts.kinds import KINDS
from runs.web.params import (
    Query,
    choice_list_param,
    choice_param,
    float_param,
    int_list_param,
    int_param,
    text_param,
)


def runs_query(request: Query) -> ComparisonQuery:
    """The runs, the baseline picked and the kinds: what the CSV reads."""
    return ComparisonQuery(
        run_ids=int_list_param(request, "runs", most=MAX_RUNS),
        chosen=int_param(request, "baseline"),
        kinds=choice_list_param(request, "kinds", KINDS),
    )


def side_by_side_query(request: Query) -> ComparisonQuery:
    """The runs and how they are compared, and the text searched for: what the side by side
    reads (its rows are the compare page's)."""
    return replace(
        runs_query(request),
        order=choice_param(request, "order", ORDERS) or BASELINE_ORDER,
        q=text_param(request, "q", max_length=MAX_SEARCH),
    )


def compare_query(request: Query) -> ComparisonQuery:
    """Every setting of the compare page: the runs, how they are compared and which rows to
    keep in which order."""
    show = choice_param(request, "show", (*SHOWS, *SHOW_ALIASES)) or "all"
    return replace(
        side_by_side_query(request),
        show=SHOW_ALIASES.get(show, show),
        show_alias=show if show in SHOW_ALIASES else "",
        sort=choice_param(request, "sort", SORTS) or "case",
        metric=text_param(request, "metric", max_length=MAX_METRIC),
        min_drop=float_param(request, "min_drop", minimum=0, maximum=1),
    )
