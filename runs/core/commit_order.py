"""Runs in commit order: by the position of their commit on a first-parent history (oldest
first), runs of one commit by date, and runs whose commit is not on it merged among them by
date. Trends draws its points in this order and compare's chronological mode shows its columns
in it, so both read forward in time the same way."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

# A commit this short or shorter is not matched against the history by prefix.
MIN_PREFIX = 4


class Placed(Protocol):
    """What ordering needs of a run: its id, commit and creation time."""

    @property
    def id(self) -> int: ...

    @property
    def commit(self) -> str: ...

    @property
    def created_at(self) -> datetime: ...


def on_history(commit: str, history: list[str]) -> bool:
    """``commit`` (whole, or a prefix long enough) is one of ``history``'s."""
    if not commit:
        return False
    if commit in history:
        return True
    return MIN_PREFIX <= len(commit) < 40 and any(full.startswith(commit) for full in history)


def commit_ordered[P: Placed](runs: list[P], history: list[str]) -> list[P]:
    """Runs whose commit is on ``history`` (oldest first) by its position, then date; the
    others merged among them by date. ``runs`` is in date order."""
    position = {commit: index for index, commit in enumerate(history)}
    found: dict[str, int | None] = {}

    def place(commit: str) -> int | None:
        if commit not in found:
            found[commit] = position.get(commit)
            if found[commit] is None and MIN_PREFIX <= len(commit) < 40:
                found[commit] = next(
                    (i for i, full in enumerate(history) if full.startswith(commit)), None
                )
        return found[commit]

    on = [run for run in runs if run.commit and place(run.commit) is not None]
    on.sort(key=lambda run: (place(run.commit), run.created_at, run.id))
    off = [run for run in runs if not run.commit or place(run.commit) is None]
    merged: list[P] = []
    i = 0
    for run in on:
        while i < len(off) and off[i].created_at < run.created_at:
            merged.append(off[i])
            i += 1
        merged.append(run)
    merged.extend(off[i:])
    return merged
