"""A run's partial badge read in a query: its launch's limit, filter, agent.yaml case count and
repeats are columns of the run (``Run.options`` also holds the list of its cases, which can be
long: a list never reads it)."""

from __future__ import annotations

from runs.core.runoptions import Partial, partial_text

# The run's columns a partial badge reads (``RunOptions.columns``), in ``partial_text_of``'s
# order (its total cases apart).
PARTIAL_COLUMNS = ("case_limit", "case_filter", "config_cases", "repeats")


def partial_text_of(
    limit: int | None, case_filter: str, config_cases: int | None, total_cases: int, repeats: int
) -> str:
    """The partial badge of a run of ``total_cases`` rows read with the PARTIAL_COLUMNS."""
    return partial_text(Partial(limit, case_filter, config_cases, repeats, total_cases))
