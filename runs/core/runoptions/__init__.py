"""A run's launch options (``Run.options``), typed and validated (Django-free): ``model`` is
the one ``RunOptions`` every writer builds and every reader reads; ``texts`` what the pages say
of them (the partial badge, the launch options rows)."""

from runs.core.runoptions.model import RERUN_FAILED, CaseEntry, RerunPick, RunOptions
from runs.core.runoptions.replay import ReplayChanges, ReplayPick
from runs.core.runoptions.texts import (
    Partial,
    PartialColumns,
    partial_text,
    run_launch_options,
    run_partial_text,
)

__all__ = [
    "RERUN_FAILED",
    "CaseEntry",
    "Partial",
    "PartialColumns",
    "ReplayChanges",
    "ReplayPick",
    "RerunPick",
    "RunOptions",
    "partial_text",
    "run_launch_options",
    "run_partial_text",
]
