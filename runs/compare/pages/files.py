"""Two runs' configurations compared: their settings side by side and every file of their
snapshots that differs, read only when small enough to diff (and for staff only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from runs.core.sealing import SnapshotFile, snapshot_diff
from runs.selectors.snapshots import StoredSnapshot, snapshot_contents
from runs.web.diffs import (
    CONTENTS_STAFF_ONLY,
    MAX_FILE_DIFF_LINES,
    FileDiff,
    diff_too_large,
    file_diff,
    file_unread,
)

if TYPE_CHECKING:
    from runs.models import Run


@dataclass(frozen=True)
class FilesCompared:
    """Every file of two runs' snapshots: those that differ, with their diffs (in path order),
    and those that are identical."""

    left: StoredSnapshot
    right: StoredSnapshot
    diffs: list[FileDiff]
    identical: tuple[str, ...]

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(("changed", "added", "removed"), 0)
        for diff in self.diffs:
            counts[diff.status] += 1
        return counts


def files_compared(
    left: tuple[int, StoredSnapshot],
    right: tuple[int, StoredSnapshot],
    *,
    full: str = "",
    contents: bool = True,
) -> FilesCompared:
    """Two runs' snapshots (run id, snapshot) compared: their manifests say which files differ,
    and only those small enough to diff are read (one query) and diffed; ``full``: the path
    whose diff is shown whole; ``contents`` False (not staff): no file is read, each differing
    file says so."""
    (left_id, old), (right_id, new) = left, right
    paths = snapshot_diff(old.as_snapshot(), new.as_snapshot())
    before = {entry.path: entry for entry in old.files}
    after = {entry.path: entry for entry in new.files}
    differ = sorted([*paths.changed, *paths.added, *paths.removed])
    # A file whose mode alone changed need not be read.
    same_bytes = {p for p in paths.changed if before[p].sha256 == after[p].sha256}
    # Decided from the manifests' sizes, so a file too large to diff is never inflated.
    unread = {
        path
        for path in differ
        if path not in same_bytes
        and (not contents or diff_too_large(_size(before, path), _size(after, path)))
    }
    to_read = [path for path in differ if path not in same_bytes | unread]
    stored = snapshot_contents(
        wanted={
            old.id: [before[path] for path in to_read if path in before],
            new.id: [after[path] for path in to_read if path in after],
        }
    )

    def read(snapshot: StoredSnapshot, files: dict[str, SnapshotFile], path: str) -> bytes | None:
        if path not in files:
            return None
        return b"" if path in same_bytes else stored[(snapshot.id, path)]

    diffs = [
        file_unread(
            path,
            (_size(before, path), _size(after, path)),
            modes=_modes(before, after, path),
            note="" if contents else CONTENTS_STAFF_ONLY,
        )
        if path in unread
        else file_diff(
            path,
            read(old, before, path),
            read(new, after, path),
            labels=(f"{path} (run #{left_id})", f"{path} (run #{right_id})"),
            modes=_modes(before, after, path),
            most_lines=None if path == full else MAX_FILE_DIFF_LINES,
        )
        for path in differ
    ]
    return FilesCompared(old, new, diffs, paths.identical)


def _modes(
    before: dict[str, SnapshotFile], after: dict[str, SnapshotFile], path: str
) -> tuple[int, int]:
    return (
        before[path].mode if path in before else 0o644,
        after[path].mode if path in after else 0o644,
    )


def _size(files: dict[str, SnapshotFile], path: str) -> int | None:
    return files[path].size if path in files else None


def config_text(run: Run) -> str:
    """The agent.yaml the run was launched with; for an imported run (HoloDeck files carry
    only the parsed config), its config snapshot as YAML."""
    if run.raw_yaml:
        return run.raw_yaml

    return yaml.safe_dump(run.config_snapshot or {}, sort_keys=False, allow_unicode=True)


def config_facts(run: Run) -> dict[str, Any]:
    return {
        "snapshot": run.config_snapshot or {},
        "prompt_version": run.prompt_version or {},
        "git": {
            "commit": run.git_commit,
            "branch": run.git_branch,
            "dirty": run.git_dirty,
            "engine": run.holodeck_version,
        },
    }
