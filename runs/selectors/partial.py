"""A run's partial badge read in a query: its launch's limit, filter and agent.yaml case count
as columns (``Run.options`` also holds the list of its cases, which can be long)."""

from __future__ import annotations

from typing import Any

from django.db.models.fields.json import KT

from runs.models import run_partial_text

# The launch options a partial badge reads, as columns (not the whole JSON of Run.options).
PARTIAL_COLUMNS = (
    KT("options__limit"),
    KT("options__case_filter"),
    KT("options__config_cases"),
    KT("options__repeats"),
)


def partial_text_of(
    limit: Any, case_filter: Any, config_cases: Any, total_cases: int, repeats: Any = None
) -> str:
    """``run_partial_text`` of the PARTIAL_COLUMNS as a query read them (text on PostgreSQL,
    numbers on SQLite)."""
    options = {
        "limit": _number(limit),
        "case_filter": case_filter or "",
        "config_cases": _number(config_cases),
        "repeats": _number(repeats),
    }
    return run_partial_text(options, total_cases=total_cases)


def _number(value: Any) -> int | None:
    try:
        return None if value in (None, "", "null") else int(value)
    except (TypeError, ValueError):
        return None
