"""What the pages say of a run's launch options: its partial badge and its launch options rows
(Django-free; ``Run.partial_text`` and ``Run.launch_options`` give them to the templates)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runs.runoptions.model import RunOptions


def partial_text(
    *,
    limit: int | None,
    case_filter: str,
    config_cases: int | None,
    repeats: int,
    total_cases: int,
) -> str:
    """The partial badge's text of a run launched with these options (the run's option
    columns): "partial: 3 of 8 cases, filter 'cash'" when it selected fewer cases than its
    agent.yaml had, else "".

    Runs launched before ``config_cases`` was recorded are partial when a limit below their
    case count, or a filter, was given (how many cases the agent.yaml had is then unknown).
    """
    total_cases //= repeats  # its rows are its cases' repetitions
    if config_cases is not None:
        if total_cases >= config_cases:
            return ""
        text = f"partial: {total_cases} of {config_cases} cases"
    elif case_filter or (limit is not None and limit <= total_cases):
        text = f"partial: {total_cases} case{'' if total_cases == 1 else 's'}"
    else:
        return ""
    if case_filter:
        text += f", filter '{case_filter}'"
    if limit:
        text += f", limit {limit}"
    return text


def run_partial_text(options: RunOptions | Mapping[str, Any] | None, *, total_cases: int) -> str:
    """``partial_text`` of a run's options (a ``RunOptions``, or the JSON ``Run.options``
    stores)."""
    if not isinstance(options, RunOptions):
        options = RunOptions.stored(options)
    return partial_text(
        limit=options.limit,
        case_filter=options.case_filter,
        config_cases=options.config_cases,
        repeats=options.repeats,
        total_cases=total_cases,
    )


def run_launch_options(options: RunOptions, *, git_ref: str, commit: str) -> list[tuple[str, str]]:
    """(label, value) of each launch option a run recorded, for its page; [] for a run that
    was not launched (an import)."""
    if options.case_indices is None:
        return []
    rows = [
        ("limit", str(options.limit) if options.limit else "none"),
        ("filter", repr(options.case_filter) if options.case_filter else "none"),
    ]
    if options.parallel:
        rows.append(("parallel", str(options.parallel)))
    if options.repeats > 1:
        rows.append(("repeats", str(options.repeats)))
    rows.append(("git ref", git_ref or "the working tree"))
    if commit:
        rows.append(("commit", commit))
    return rows
