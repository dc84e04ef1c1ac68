"""What changed between two snapshots: the paths added, removed, changed or kept."""

from __future__ import annotations

from dataclasses import dataclass

from runs.core.sealing.pack import Snapshot


@dataclass(frozen=True)
class SnapshotDiff:
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]  # content or executable bit
    identical: tuple[str, ...]


def snapshot_diff(old: Snapshot, new: Snapshot) -> SnapshotDiff:
    """Which paths the two snapshots add, remove, change or share (each sorted)."""
    before = {f.path: (f.sha256, f.mode) for f in old.files}
    after = {f.path: (f.sha256, f.mode) for f in new.files}
    both = sorted(before.keys() & after.keys())
    return SnapshotDiff(
        added=tuple(sorted(after.keys() - before.keys())),
        removed=tuple(sorted(before.keys() - after.keys())),
        changed=tuple(p for p in both if before[p] != after[p]),
        identical=tuple(p for p in both if before[p] == after[p]),
    )
