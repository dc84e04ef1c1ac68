"""What the pages say of a run's launch options: its partial badge and its launch options rows
(Django-free; ``Run.partial_text`` and ``Run.launch_options`` give them to the templates)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from runs.core.runoptions.model import RERUN_FAILED, RerunPick, RunOptions
from runs.core.verdicts.numbers import case_text


class PartialColumns(Protocol):
    """What a partial badge reads of a run: its option columns (``RunOptions.columns``) and
    its number of case rows (a ``Run``, a list's row, a ``Partial``)."""

    @property
    def case_limit(self) -> int | None: ...
    @property
    def case_filter(self) -> str: ...
    @property
    def config_cases(self) -> int | None: ...
    @property
    def repeats(self) -> int: ...
    @property
    def total_cases(self) -> int: ...


class Partial(NamedTuple):
    """The PartialColumns of a run read as values."""

    case_limit: int | None
    case_filter: str
    config_cases: int | None
    repeats: int
    total_cases: int


def partial_text(run: PartialColumns) -> str:
    """The partial badge's text of a run: "partial: 3 of 8 cases, filter 'cash'" when it
    selected fewer cases than its agent.yaml had, else "".

    Runs launched before ``config_cases`` was recorded are partial when a limit below their
    case count, or a filter, was given (how many cases the agent.yaml had is then unknown).
    """
    limit, case_filter = run.case_limit, run.case_filter
    cases = run.total_cases // run.repeats  # its rows are its cases' repetitions
    if run.config_cases is not None:
        if cases >= run.config_cases:
            return ""
        text = f"partial: {cases} of {run.config_cases} cases"
    elif case_filter or (limit is not None and limit <= cases):
        text = f"partial: {cases} case{'' if cases == 1 else 's'}"
    else:
        return ""
    if case_filter:
        text += f", filter '{case_filter}'"
    if limit:
        text += f", limit {limit}"
    return text


def run_partial_text(options: RunOptions | Mapping[str, Any] | None, *, total_cases: int) -> str:
    """``partial_text`` of a run of ``total_cases`` rows launched with ``options`` (a
    ``RunOptions``, or the JSON ``Run.options`` stores)."""
    if not isinstance(options, RunOptions):
        options = RunOptions.stored(options)
    columns = options.columns()
    return partial_text(Partial(**columns, total_cases=total_cases))


def run_launch_options(options: RunOptions, *, git_ref: str, commit: str) -> list[tuple[str, str]]:
    """(label, value) of each launch option a run recorded, for its page; [] for a run that
    was not launched (an import)."""
    if options.case_indices is None:
        return []
    if options.rerun is not None:  # its cases were picked by the re-run, not by a limit or filter
        rows = [("re-run of", rerun_text(options.rerun))]
    else:
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


def rerun_text(picked: RerunPick) -> str:
    """What a re-run re-ran, for its launch options: "case 3 of run #1", "case 'refund' of
    run #1", "the failed cases of run #1"."""
    if picked.cases == RERUN_FAILED:
        what = "the failed cases"
    elif picked.case is None:
        what = "cases"
    else:
        what = f"case {picked.name!r}" if picked.name else case_text(picked.case)
    return f"{what} of run #{picked.of}"
